"""Reward sensitivity on the `slowdowns` setup: the same training budget with several reward configs.

For each reward YAML of ``configs/rewards/`` it trains ``--base-config`` (default
configs/ppo_slowdowns_request.yaml: behaviour cloning of least_prefill, which ignores speed, so the
reward has to teach the router to route around slowed replicas) with that reward (everything else
identical, ``--timesteps`` PPO steps) into ``runs/reward_sensitivity/<reward>``, resuming if
interrupted, then evaluates every policy on seeds 101-105 (never trained on) next to least_prefill,
the adaptive heuristic and the warm start, and prints TTFT p99 and mean e2e per reward with the
ratios to adaptive and to the warm start, with paired wins. A per-step reward (Little's law...)
trains with ``ppo.gamma = --step-gamma`` (0.995: its return must look ahead), a per-request one
(credited to its routing decision) with the base config's gamma (0).

Run: ``.venv/bin/python benchmarks/bench_rewards.py [--rewards request_ttft,vidur_ttft,...]
[--timesteps 20000] [--demo-steps 4000]``; ``--evaluate-only`` skips training (uses what the runs folder holds).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.evaluate.paired import evaluate_policies  # noqa: E402
from schedulers.routing.policy import make_policy  # noqa: E402
from schedulers.sim.env_config import load_env_config  # noqa: E402

SEEDS = [101, 102, 103, 104, 105]
DEFAULT_REWARDS = "request_ttft,vidur_ttft,vidur_ttft_tail,vidur_littles_law,vidur_hybrid"
BASE_CONFIG = ROOT / "configs" / "ppo_slowdowns_request.yaml"


def credit_of(reward: str) -> str:
    """``"request"`` or ``"step"``: how the Vidur env credits this reward (see schedulers/sim/env.py)."""
    from rewardkit import RewardComposer

    from schedulers.sim.reward_context import reward_credit

    path = ROOT / "configs" / "rewards" / f"{reward}.yaml"
    return reward_credit(RewardComposer.from_yaml(path).context_keys(), str(path))


def train_with_reward(reward: str, args: argparse.Namespace, runs: Path) -> Path:
    """Train the base config with ``configs/rewards/<reward>.yaml``; return its policy path."""
    from schedulers.train.trainer import train

    cfg = yaml.safe_load(Path(args.base_config).read_text())
    cfg["reward"] = f"configs/rewards/{reward}.yaml"
    cfg["ppo"]["total_timesteps"] = args.timesteps
    if credit_of(reward) == "step":
        cfg["ppo"]["gamma"] = args.step_gamma
    cfg["bc"]["demo_steps"] = args.demo_steps
    cfg["logging"]["plots"] = True
    out = runs / reward
    t0 = time.perf_counter()
    result = train(cfg, out)
    print(f"[rewards] {reward}: {result.updates} updates in {(time.perf_counter() - t0) / 60:.1f} min", file=sys.stderr)
    return result.policy_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rewards", default=DEFAULT_REWARDS, help="comma-separated names in configs/rewards/")
    parser.add_argument("--base-config", default=str(BASE_CONFIG), help="training config every reward shares")
    parser.add_argument("--timesteps", type=int, default=20000, help="PPO env steps per reward (after cloning)")
    parser.add_argument("--demo-steps", type=int, default=4000, help="behaviour-cloning demonstration steps per reward")
    parser.add_argument("--step-gamma", type=float, default=0.995, help="ppo.gamma for per-step rewards")
    parser.add_argument("--runs", default="runs/reward_sensitivity", help="folder of the training runs")
    parser.add_argument("--evaluate-only", action="store_true", help="do not train; evaluate existing policies")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # one decision at a time: extra threads only spin on a busy machine
    rewards = [r.strip() for r in args.rewards.split(",") if r.strip()]
    missing = [r for r in rewards if not (ROOT / "configs" / "rewards" / f"{r}.yaml").is_file()]
    if missing:
        parser.error(f"no configs/rewards/<name>.yaml for {missing}")
    runs = ROOT / args.runs
    from schedulers.rl.ppo_router import PPORouter

    routers: dict = {"adaptive": make_policy("adaptive"), "least_prefill": make_policy("least_prefill")}
    for reward in rewards:
        policy = runs / reward / "policy.pt"
        if not args.evaluate_only:
            policy = train_with_reward(reward, args, runs)
        if policy.is_file():
            routers[reward] = PPORouter.from_checkpoint(policy)
        else:
            print(f"[rewards] {reward}: no policy at {policy}, skipped", file=sys.stderr)
    warm = next((runs / r / "bc_policy.pt" for r in rewards if (runs / r / "bc_policy.pt").is_file()), None)
    if warm is not None:
        routers["warm_start"] = PPORouter.from_checkpoint(warm)
    cfg = load_env_config(ROOT / "configs" / "envs" / "slowdowns.yaml")
    results = evaluate_policies(cfg, routers, SEEDS, out_dir=runs / "evaluation", baseline="adaptive")
    adaptive_ttft = results.values("adaptive", "ttft_p99")
    warm_ttft = results.values("warm_start", "ttft_p99") if "warm_start" in results.routers else None
    print(f"\n== reward sensitivity: slowdowns setup, {args.timesteps} PPO steps per reward, seeds 101-105 ==")
    print(f"{'policy':20} | {'credit':7} | {'TTFT p99 (s)':>12} | {'e2e mean (s)':>12} | {'/ adaptive':>10} | "
          f"{'/ warm start':>12} | wins vs warm start")
    for name in results.routers:
        ttft = results.values(name, "ttft_p99")
        e2e = results.values(name, "e2e_mean")
        credit = credit_of(name) if name in rewards else "-"
        vs_warm = f"{ttft.mean() / warm_ttft.mean():11.3f}x" if warm_ttft is not None else f"{'-':>12}"
        wins = f"{int(np.sum(ttft < warm_ttft))}/5" if warm_ttft is not None else "-"
        print(f"{name:20} | {credit:7} | {ttft.mean():12.3f} | {e2e.mean():12.2f} | {ttft.mean() / adaptive_ttft.mean():9.3f}x | "
              f"{vs_warm} | {wins}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
