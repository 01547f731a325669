"""Reward sensitivity on the `slowdowns` setup: the same training budget with several reward configs.

For each reward YAML of ``configs/rewards/`` it trains ``configs/ppo_slowdowns.yaml`` with that
reward (everything else identical, ``--timesteps`` PPO steps after the same behaviour cloning of
the adaptive heuristic) into ``runs/reward_sensitivity/<reward>``, resuming if interrupted, then
evaluates every policy on seeds 101-105 (never trained on) next to the adaptive heuristic, and
prints TTFT p99 and mean e2e per reward with the ratio to adaptive and paired wins.

Run: ``.venv/bin/python benchmarks/bench_rewards.py [--rewards vidur_ttft,vidur_ttft_tail,...]
[--timesteps 6144] [--demo-steps 3000]``; ``--evaluate-only`` skips training (uses what the runs folder holds).
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
from schedulers.routing.router import HeuristicRouter  # noqa: E402
from schedulers.sim.env_config import load_env_config  # noqa: E402

SEEDS = [101, 102, 103, 104, 105]
DEFAULT_REWARDS = "vidur_ttft,vidur_ttft_tail,vidur_littles_law,vidur_hybrid"
BASE_CONFIG = ROOT / "configs" / "ppo_slowdowns.yaml"


def train_with_reward(reward: str, timesteps: int, demo_steps: int, runs: Path) -> Path:
    """Train the slowdowns config with ``configs/rewards/<reward>.yaml``; return its policy path."""
    from schedulers.train.trainer import train

    cfg = yaml.safe_load(BASE_CONFIG.read_text())
    cfg["reward"] = f"configs/rewards/{reward}.yaml"
    cfg["ppo"]["total_timesteps"] = timesteps
    cfg["bc"]["demo_steps"] = demo_steps
    cfg["logging"]["plots"] = True
    out = runs / reward
    t0 = time.perf_counter()
    result = train(cfg, out)
    print(f"[rewards] {reward}: {result.updates} updates in {(time.perf_counter() - t0) / 60:.1f} min", file=sys.stderr)
    return result.policy_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rewards", default=DEFAULT_REWARDS, help="comma-separated names in configs/rewards/")
    parser.add_argument("--timesteps", type=int, default=6144, help="PPO env steps per reward (after cloning)")
    parser.add_argument("--demo-steps", type=int, default=3000, help="behaviour-cloning demonstration steps per reward")
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

    routers: dict = {"adaptive": HeuristicRouter("adaptive")}
    for reward in rewards:
        policy = runs / reward / "policy.pt"
        if not args.evaluate_only:
            policy = train_with_reward(reward, args.timesteps, args.demo_steps, runs)
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
    print(f"\n== reward sensitivity: slowdowns setup, {args.timesteps} PPO steps per reward, seeds 101-105 ==")
    print(f"{'policy':20} | {'TTFT p99 (s)':>12} | {'e2e mean (s)':>12} | {'TTFT p99 / adaptive':>19} | wins vs adaptive")
    for name in results.routers:
        ttft = results.values(name, "ttft_p99")
        e2e = results.values(name, "e2e_mean")
        wins = int(np.sum(ttft < adaptive_ttft))
        print(f"{name:20} | {ttft.mean():12.3f} | {e2e.mean():12.2f} | {ttft.mean() / adaptive_ttft.mean():18.3f}x | {wins}/5")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
