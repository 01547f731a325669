"""PPO router against the routing heuristics on three clusters, with the issue's targets.

Setups (CodeLlama-34B, TP2, sarathi chunk 512 / batch cap 128, splitwise_conv lengths, Poisson
arrivals, 1,000 requests per episode, evaluation seeds 101-105 never used in training, the same
arrivals and slowdowns for every policy):

==============  ===========================================  ==============================
setup           env YAML                                     training config
==============  ===========================================  ==============================
homogeneous     configs/envs/codellama34b_tp2_4r.yaml        (the slowdowns checkpoint)
hetero          configs/envs/hetero.yaml (2x1.0 + 2x0.55)    configs/ppo_hetero.yaml
slowdowns       configs/envs/slowdowns.yaml (4x1.0, ~1 in    configs/ppo_slowdowns_request.yaml
                4 at ~40% speed at any time)
==============  ===========================================  ==============================

Each runs at about 85% of its capacity, measured by ``--capacity``: all 1,000 requests arrive at
once and the throughput (completions / makespan) of the best heuristic for that setup is the
capacity (mean over seeds 201-203, which are neither training nor evaluation seeds). Then the same
checkpoint on twice the replicas at twice the rate.

For every setup it prints the evaluation tables, the PPO router's TTFT p99 and mean e2e ratios
to each group of baselines (speed-oblivious heuristics, capacity-aware ones, heuristics that do not
estimate speed, the adaptive heuristic, its own warm start, the oracle) with paired wins over the
seeds, whether the issue's targets are met, and decisions per second.

Run: ``.venv/bin/python benchmarks/bench_scheduler.py [--setups hetero,slowdowns,homogeneous]``
(a setup without ``runs/<training config name>/policy.pt`` is trained first, resuming);
``--capacity`` measures the capacities instead; ``--seeds 301-320`` evaluates on other seeds
(more seeds narrow the intervals; keep them apart from the training seeds, 1000 onwards).
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

from schedulers.cli import DEFAULT_BASELINES, describe_seeds, evaluation_seeds  # noqa: E402
from schedulers.evaluate.paired import evaluate_policies  # noqa: E402
from schedulers.evaluate.evaluation_results import paired_ratio_interval  # noqa: E402
from schedulers.routing.policy import Policy, make_policy, registered_policies  # noqa: E402
from schedulers.sim.env_config import load_env_config  # noqa: E402

SEEDS = [101, 102, 103, 104, 105]
CAPACITY_SEEDS = [201, 202, 203]
SETUPS: dict[str, dict[str, Any]] = {
    # the slowdowns checkpoint where nothing slows down: learning to route around slowdowns must not cost here
    "homogeneous": {"env": "configs/envs/codellama34b_tp2_4r.yaml", "train": "configs/ppo_slowdowns_request.yaml",
                    "best": "least_prefill"},
    "hetero": {"env": "configs/envs/hetero.yaml", "train": "configs/ppo_hetero.yaml", "best": "cap_least_prefill"},
    "slowdowns": {"env": "configs/envs/slowdowns.yaml", "train": "configs/ppo_slowdowns_request.yaml", "best": "adaptive"},
}
#: baselines evaluated at the base scale (the best of random, lor, least_kv and power_of_two never
#: beat least_prefill here; `rewardkit evaluate` runs them all) and at twice the replicas.
BASELINES = "round_robin,jsq,least_tokens,least_prefill,cap_jsq,cap_least_prefill,adaptive,oracle"
SCALED_BASELINES = "round_robin,least_prefill,cap_least_prefill,adaptive"


def heuristics_reading(*speeds: str) -> tuple[str, ...]:
    """The registered heuristics whose ``reads_speed`` is one of ``speeds``."""
    return tuple(n for n, cls in registered_policies().items() if not cls.learned and cls.reads_speed in speeds)


#: heuristics that ignore speed entirely.
SPEED_OBLIVIOUS = heuristics_reading("")
#: heuristics that read the declared speed.
CAPACITY_AWARE = heuristics_reading("declared")
#: heuristics that do not estimate speed online (they may read the declared speed).
NON_ESTIMATING = heuristics_reading("", "declared")


class TimedRouter(Policy):
    """Wraps a policy and accumulates the wall time spent choosing replicas."""

    def __init__(self, router: Policy) -> None:
        self.router, self.seconds, self.decisions = router, 0.0, 0
        self.name, self.observation, self.needs_true_speed = router.name, router.observation, router.needs_true_speed
        self.learned, self.reads_speed = router.learned, router.reads_speed

    def reset(self, seed: int | None = None) -> None:
        self.router.reset(seed)

    def decide(self, snapshot: Any, prompt_tokens: float = 0.0, *, rows: Any = None, true_speed: Any = None) -> int:
        t0 = time.perf_counter()
        action = self.router.decide(snapshot, prompt_tokens, rows=rows, true_speed=true_speed)
        self.seconds += time.perf_counter() - t0
        self.decisions += 1
        return action


def capacity(setups: list[str]) -> None:
    """All requests at once: throughput of the setup's best heuristic (and two others) per setup."""
    print(f"capacity seeds: {describe_seeds(list(CAPACITY_SEEDS))}")
    print(f"{'setup':12} | {'router':18} | {'capacity (req/s)':>16} | per seed")
    for name in setups:
        cfg = load_env_config(ROOT / SETUPS[name]["env"], {"qps": 10000.0})
        routers = {r: make_policy(r) for r in ("least_prefill", "cap_least_prefill", "adaptive")}
        res = evaluate_policies(cfg, routers, CAPACITY_SEEDS, log=lambda m: None)
        for r in routers:
            values = res.values(r, "throughput")
            mark = "  <- best for setup" if r == SETUPS[name]["best"] else ""
            print(f"{name:12} | {r:18} | {values.mean():16.2f} | {', '.join(f'{v:.2f}' for v in values)}{mark}")
        qps = load_env_config(ROOT / SETUPS[name]["env"]).qps
        best = res.values(SETUPS[name]["best"], "throughput").mean()
        print(f"{name:12} | configured qps {qps} = {100 * qps / best:.0f}% of the best router's capacity")


def checkpoint_for(name: str, train: bool) -> tuple[Path, float | None]:
    """``runs/<training config>/policy.pt``, training it first (resuming) when missing and ``train``."""
    train_cfg = ROOT / SETUPS[name]["train"]
    out = ROOT / "runs" / train_cfg.stem
    policy = out / "policy.pt"
    if policy.is_file():
        return policy, None
    if not train:
        raise SystemExit(f"{policy} does not exist: train it with `rewardkit train {SETUPS[name]['train']}` or drop --no-train")
    from schedulers.train.trainer import train as run_training

    t0 = time.perf_counter()
    result = run_training(train_cfg, out)
    return result.policy_path, time.perf_counter() - t0


def evaluate_setup(
    name: str, label: str, overrides: dict[str, Any], policy: Path, out: Path, baselines: str, seeds: list[int]
) -> dict[str, Any]:
    from schedulers.rl.ppo_router import PPORouter

    cfg = load_env_config(ROOT / SETUPS[name]["env"], overrides or None)
    routers: dict[str, Any] = {n: make_policy(n) for n in baselines.split(",")}
    warm = policy.parent / "bc_policy.pt"
    if warm.is_file():
        routers["warm_start"] = TimedRouter(PPORouter.from_checkpoint(warm))
    ppo = TimedRouter(PPORouter.from_checkpoint(policy))
    routers["ppo"] = ppo
    t0 = time.perf_counter()
    results = evaluate_policies(cfg, routers, seeds, out_dir=out / f"{name}-{label}")
    wall = time.perf_counter() - t0
    print(f"\n== {name} {label}: {cfg.num_replicas} replicas at speeds {cfg.replica_speeds}, {cfg.qps} req/s, "
          f"{cfg.requests_per_episode} requests, slowdowns: {'yes' if cfg.slowdowns else 'no'} ==")
    print(results.format_table())
    ppo_wall = sum(e["wall_s"] for e in results.episodes if e["router"] == "ppo")
    return {"setup": name, "label": label, "results": results, "wall": wall, "ppo": ppo, "ppo_wall_s": ppo_wall}


def saved_summaries(setups: list[str], out: Path) -> list[dict[str, Any]]:
    """Summaries rebuilt from the ``results.json`` files an earlier run wrote under ``out``."""
    import json

    from schedulers.evaluate.evaluation_results import EvaluationResults

    found = []
    for name in setups:
        for path in sorted(out.glob(f"{name}-*/results.json")):
            data = json.loads(path.read_text())
            res = EvaluationResults(data["env"], data["seeds"], data["routers"], data["heuristics"], data["baseline"])
            res.episodes = data["episodes"]
            found.append({"setup": name, "label": path.parent.name[len(name) + 1:], "results": res, "ppo": None})
    return found


def best_of(results: Any, names: tuple[str, ...] | list[str], metric: str) -> tuple[str, np.ndarray]:
    """The router among ``names`` with the lowest mean ``metric`` and its per-seed values."""
    present = [n for n in names if n in results.routers]
    best = min(present, key=lambda n: results.values(n, metric).mean())
    return best, results.values(best, metric)


def ratio_row(results: Any, group: str, names: Any, metric: str = "ttft_p99") -> tuple[str, float, int, str, str]:
    """(description, PPO mean / reference mean, paired wins of PPO, reference name, "low-high" 90% interval)."""
    ref, theirs = best_of(results, names, metric)
    mine = results.values("ppo", metric)
    low, high = paired_ratio_interval(mine, theirs)
    return group, float(mine.mean() / theirs.mean()), int(np.sum(mine < theirs)), ref, f"{low:.2f}-{high:.2f}"


def targets(name: str, summary: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """The issue's targets for the setup: (target, measured, met; None = reported, no target)."""
    res = summary["results"]
    out: list[tuple[str, str, bool | None]] = []

    def add(text: str, group: str, names: Any, limit: float | None, metric: str = "ttft_p99") -> None:
        if not any(n in res.routers for n in names):
            return  # that baseline was not evaluated in this run
        _, ratio, wins, ref, interval = ratio_row(res, group, names, metric)
        out.append((text, f"{ratio:.3f}x {ref} ({wins}/{len(res.seeds)} wins; 90% CI {interval})",
                    None if limit is None else ratio <= limit))

    if name == "hetero":
        add("TTFT p99 <= 0.8x best speed-oblivious", "oblivious", SPEED_OBLIVIOUS, 0.8)
        add("TTFT p99 within 3% of best capacity-aware", "capacity", CAPACITY_AWARE, 1.03)
        add("TTFT p99 vs adaptive (reported)", "adaptive", ("adaptive",), None)
    elif name == "slowdowns":
        add("TTFT p99 <= 0.9x best non-estimating", "non-estimating", NON_ESTIMATING, 0.9)
        add("TTFT p99 <= 1.0x adaptive (0.95x: clear win)", "adaptive", ("adaptive",), 1.0)
        add("TTFT p99 <= 0.95x its warm start", "warm start", ("warm_start",), 0.95)
    else:
        add("TTFT p99 within 3% of least_prefill", "least_prefill", ("least_prefill",), 1.03)
    add("e2e mean <= round_robin", "round_robin", ("round_robin",), 1.0, "e2e_mean")
    add("TTFT p99 vs oracle (ceiling, reported)", "oracle", ("oracle",), None)
    if "warm_start" in res.routers and name != "slowdowns":
        add("TTFT p99 vs its warm start (reported)", "warm start", ("warm_start",), None)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setups", default="hetero,slowdowns,homogeneous", help="comma-separated setups")
    parser.add_argument("--capacity", action="store_true", help="measure each setup's capacity instead")
    parser.add_argument("--checkpoint", default=None, help="policy.pt to evaluate on every chosen setup (default: per setup)")
    parser.add_argument("--report", action="store_true", help="print the targets from the results saved under --out (no runs)")
    parser.add_argument("--no-train", action="store_true", help="fail instead of training a missing checkpoint")
    parser.add_argument("--no-scale", action="store_true", help="skip the twice-the-replicas evaluation")
    parser.add_argument("--baselines", default=BASELINES, help=f"baselines at the base scale (all: {DEFAULT_BASELINES})")
    parser.add_argument("--out", default="runs/bench_scheduler", help="folder for tables and plots")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                        help="evaluation seeds as for `rewardkit evaluate --seeds`: comma-separated seeds and "
                             "ranges A-B (default: the issue's five, 101-105); keep them apart from the training "
                             "configs' seeds.train_start onwards")
    args = parser.parse_args(argv)
    try:
        seeds = evaluation_seeds(args.seeds)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.capacity and not args.report:
        print(f"evaluation seeds: {describe_seeds(seeds)}", flush=True)
    import torch

    torch.set_num_threads(1)  # one decision at a time: extra threads only spin on a busy machine
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = [s for s in setups if s not in SETUPS]
    if unknown:
        parser.error(f"unknown setups {unknown}; expected some of {', '.join(SETUPS)}")
    if args.capacity:
        capacity(setups)
        return 0
    out = Path(args.out)
    summaries, train_times = [], {}
    if args.report:
        summaries = saved_summaries(setups, out)
        setups = []
    for name in setups:
        policy, seconds = (Path(args.checkpoint), None) if args.checkpoint else checkpoint_for(name, not args.no_train)
        if seconds is not None:
            train_times[name] = seconds
        base = load_env_config(ROOT / SETUPS[name]["env"])
        summaries.append(evaluate_setup(name, f"{base.num_replicas}x{base.qps:g}", {}, policy, out, args.baselines, seeds))
        if not args.no_scale:
            scaled = {"num_replicas": 2 * base.num_replicas, "qps": 2 * base.qps}
            summaries.append(
                evaluate_setup(name, f"{2 * base.num_replicas}x{2 * base.qps:g}", scaled, policy, out, SCALED_BASELINES, seeds)
            )

    shown = sorted({seed for s in summaries for seed in s["results"].seeds})
    print(f"\n== targets (PPO router, means over seeds {describe_seeds(shown)}; wins = seeds where PPO is strictly lower) ==")
    print(f"{'setup':22} | {'target':46} | {'measured':40} | met")
    for s in summaries:
        for text, value, met in targets(s["setup"], s):
            flag = "-" if met is None else ("yes" if met else "NO")
            print(f"{s['setup'] + ' ' + s['label']:22} | {text:46} | {value:40} | {flag}")
    for name, seconds in train_times.items():
        print(f"training wall time {name}: {seconds / 60:.1f} min (target: within 20 min)")
    print("\n== speed (PPO episodes, drain included) ==")
    for s in summaries:
        if s["ppo"] is None:
            dps = [e["decisions_per_s"] for e in s["results"].episodes if e["router"] == "ppo"]
            print(f"{s['setup'] + ' ' + s['label']:22} | {np.mean(dps):,.0f} decisions/s (from the saved episodes)")
            continue
        ppo = s["ppo"]
        dps = ppo.decisions / s["ppo_wall_s"] if s["ppo_wall_s"] else float("nan")
        share = ppo.seconds / s["ppo_wall_s"] if s["ppo_wall_s"] else float("nan")
        print(f"{s['setup'] + ' ' + s['label']:22} | {dps:,.0f} decisions/s | policy {100 * share:.0f}% / "
              f"simulator and env {100 * (1 - share):.0f}% of wall time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
