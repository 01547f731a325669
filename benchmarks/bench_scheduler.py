"""PPO router against the routing heuristics on the reference cluster, with the issue's targets.

Setup (configs/envs/codellama34b_tp2_4r.yaml): CodeLlama-34B, TP2, 4 replicas, sarathi chunk
512 / batch cap 128, splitwise_conv lengths, Poisson 12.5 req/s, 1,000 requests per episode,
evaluation seeds 101-105 (never used in training), the same arrivals for every policy. Then the
same checkpoint on 8 replicas at 25 req/s. Prints each table, the targets and whether they are
met, environment decisions per second and the share of time in the policy versus the simulator.

Run: ``.venv/bin/python benchmarks/bench_scheduler.py [--checkpoint runs/bench_ppo/policy.pt]``
(without --checkpoint it trains ``configs/ppo_vidur.yaml`` into runs/bench_ppo first, resuming).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.cli import DEFAULT_BASELINES  # noqa: E402
from schedulers.sim.env_config import load_env_config  # noqa: E402
from schedulers.evaluate.paired import evaluate_policies  # noqa: E402
from schedulers.routing.router import HeuristicRouter  # noqa: E402

ENV = ROOT / "configs" / "envs" / "codellama34b_tp2_4r.yaml"
SEEDS = [101, 102, 103, 104, 105]


class TimedRouter:
    """Wraps a router and accumulates the wall time spent choosing actions."""

    def __init__(self, router: Any) -> None:
        self.router, self.seconds, self.decisions = router, 0.0, 0

    def reset(self, seed: int | None = None) -> None:
        self.router.reset(seed)

    def act(self, obs: Any, env: Any) -> int:
        t0 = time.perf_counter()
        action = self.router.act(obs, env)
        self.seconds += time.perf_counter() - t0
        self.decisions += 1
        return action


def run(label: str, overrides: dict[str, Any], ppo: TimedRouter, out: Path) -> dict[str, Any]:
    cfg = load_env_config(ENV, overrides or None)
    routers: dict[str, Any] = {name: HeuristicRouter(name) for name in DEFAULT_BASELINES.split(",")}
    routers["ppo"] = ppo
    ppo.seconds, ppo.decisions = 0.0, 0
    t0 = time.perf_counter()
    results = evaluate_policies(cfg, routers, SEEDS, out_dir=out / label)
    wall = time.perf_counter() - t0
    print(f"\n== {label}: {cfg.num_replicas} replicas, {cfg.qps} req/s, {cfg.requests_per_episode} requests ==")
    print(results.format_table())
    rows = {r["router"]: r for r in results.table()}
    ppo_rows = [e for e in results.episodes if e["router"] == "ppo"]
    ppo_wall = sum(e["wall_s"] for e in ppo_rows)
    return {"label": label, "rows": rows, "wall": wall, "ppo_policy_s": ppo.seconds,
            "ppo_wall_s": ppo_wall, "ppo_decisions": ppo.decisions}


def targets(summary: dict[str, Any]) -> list[tuple[str, str, bool]]:
    r = summary["rows"]["ppo"]
    ttft_rr = r["ttft_p99_vs_round_robin"]
    ttft_best = r["ttft_p99_vs_best_heuristic"]
    e2e_rr = r["e2e_mean_vs_round_robin"]
    return [
        ("TTFT p99 <= 0.6x round_robin", f"{ttft_rr:.3f}x", ttft_rr <= 0.6),
        ("TTFT p99 within 5% of best heuristic", f"{ttft_best:.3f}x ({r['ttft_p99_best_heuristic']})", ttft_best <= 1.05),
        ("e2e mean <= round_robin", f"{e2e_rr:.3f}x", e2e_rr <= 1.0),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="trained policy (default: train configs/ppo_vidur.yaml)")
    parser.add_argument("--out", default="runs/bench_scheduler", help="folder for tables and plots")
    args = parser.parse_args(argv)
    train_seconds = None
    checkpoint = args.checkpoint
    if checkpoint is None:
        from schedulers.train.trainer import train

        t0 = time.perf_counter()
        result = train(ROOT / "configs" / "ppo_vidur.yaml", ROOT / "runs" / "bench_ppo")
        train_seconds = time.perf_counter() - t0
        checkpoint = str(result.policy_path)
    from schedulers.rl.ppo_router import PPORouter

    ppo = TimedRouter(PPORouter.from_checkpoint(checkpoint))
    out = Path(args.out)
    summaries = [run("4x12.5", {}, ppo, out), run("8x25", {"num_replicas": 8, "qps": 25.0}, ppo, out)]

    print("\n== targets (PPO, means over seeds 101-105) ==")
    print(f"{'setup':8} | {'target':40} | {'measured':28} | met")
    for s in summaries:
        for name, value, met in targets(s):
            print(f"{s['label']:8} | {name:40} | {value:28} | {'yes' if met else 'NO'}")
    if train_seconds is not None:
        print(f"training wall time: {train_seconds / 60:.1f} min (target: within 20 min)")
    print("\n== speed ==")
    for s in summaries:
        dps = s["ppo_decisions"] / s["ppo_wall_s"] if s["ppo_wall_s"] else float("nan")
        share = s["ppo_policy_s"] / s["ppo_wall_s"] if s["ppo_wall_s"] else float("nan")
        print(f"{s['label']:8} | PPO episodes: {dps:,.0f} decisions/s (drain included) | "
              f"policy {100 * share:.0f}% / simulator and env {100 * (1 - share):.0f}% of wall time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
