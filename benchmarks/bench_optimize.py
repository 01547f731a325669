"""Does tuning find a reward worth having? A whole ``rewardkit optimize`` run on the router, judged on fresh seeds.

One study per ``--start`` on the ``slowdowns`` setup (configs/envs/slowdowns.yaml), the way
``rewardkit optimize`` runs it: the noise first (the base's repeats), then the search (TPE,
successive halving over PPO updates), then validation (the top ``--validate`` configs and the base
re-run ``--repeats`` times on validation seeds, paired) and the verdict (the winner only when its
simultaneous 90% interval excludes "no improvement", else the base).

- ``--start hybrid``: from the seed system's per-step reward (configs/rewards/vidur_hybrid.yaml)
  over a search space of reward *structures* (configs/tune/vidur_hybrid_structure_space.yaml: the
  hybrid's own terms, per-step Little's law, per-request latency terms; each with its gamma). Base
  trained with ppo.gamma 0.995, as a per-step reward needs. Target: the exported reward's router
  at least 25% lower TTFT p99 than the hybrid start on the report seeds, interval excluding zero;
  moonshot: within 5% of request_ttft.yaml's router (trained the same way, never shown to the search).
- ``--start request_ttft``: from configs/rewards/request_ttft.yaml with its weight space
  (configs/tune/request_ttft_space.yaml): an honest verdict, a validated improvement or the base.

Then the report: the validation runs' own policies (``--repeats`` independent trainings of the
exported config and of the base) evaluated on the report seeds (``--report-seeds``, default
101-105 and 301-320, never used by the search or validation), with round_robin and adaptive for
reference; a paired interval of the exported config's TTFT p99 change against the base; the
compute per phase and what pruning and fidelity saved against every trial at full budget with
every repeat (the longest budget). Fidelity has three rungs: every search trial trains with
configs/tune/ppo_tune_slowdowns.yaml (8 PPO updates of 2,000 decisions after cloning least_prefill),
evaluated at updates 4 and 8, and successive halving stops the worse half at update 4 (at update 2
every policy is still near its warm start); only the base (the noise) and the ``--validate``
finalists train ``--validate-updates`` updates (default 24), ``--repeats`` times each, and the verdict
and the report are judged on those policies. The study resumes when re-run.

Run: ``.venv/bin/python benchmarks/bench_optimize.py --start hybrid [--trials 30] [--out runs/bench_optimize]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit.optimize import BayesianRewardOptimizer  # noqa: E402
from rewardkit.optimize.intervals import paired_changes  # noqa: E402
from rewardkit.optimize.results import best_table, format_table, plotting_available, save_plots  # noqa: E402
from rewardkit.optimize.validation import (Validation, compute_table, export, measure_noise,  # noqa: E402
                                           training_path, validate)
from schedulers.cli import evaluation_seeds  # noqa: E402
from schedulers.evaluate.paired import evaluate_policies  # noqa: E402
from schedulers.rl.ppo_router import PPORouter  # noqa: E402
from schedulers.routing.policy import make_policy  # noqa: E402
from schedulers.train.config import load_config  # noqa: E402
from schedulers.train.trainer import train  # noqa: E402
from schedulers.tune.vidur_objective import VidurObjective  # noqa: E402

ENV = ROOT / "configs" / "envs" / "slowdowns.yaml"
TRAIN = ROOT / "configs" / "tune" / "ppo_tune_slowdowns.yaml"
REQUEST_TTFT = ROOT / "configs" / "rewards" / "request_ttft.yaml"
STARTS = {
    "hybrid": (ROOT / "configs" / "rewards" / "vidur_hybrid.yaml",
               ROOT / "configs" / "tune" / "vidur_hybrid_structure_space.yaml", {"ppo.gamma": 0.995}),
    "request_ttft": (REQUEST_TTFT, ROOT / "configs" / "tune" / "request_ttft_space.yaml", {}),
}


def make_optimizer(args: argparse.Namespace) -> BayesianRewardOptimizer:
    base, space, settings = STARTS[args.start]
    if args.seed:  # an independent replication: other search draws and seeds, other training runs
        cfg, _ = load_config(args.train_config)
        settings = {**settings, "seeds.torch": int(cfg["seeds"]["torch"]) + 1000 * args.seed}
    objective = VidurObjective(train_config=args.train_config, env_config=args.env, n_seeds=args.tune_seeds,
                               eval_every=args.eval_every, base_settings=settings,
                               validate_settings=validation_budget(args.train_config, args.validate_updates))
    return BayesianRewardOptimizer(base, space, objective, study_name=f"bench_{args.start}",
                                   storage=str(args.out / f"bench_{args.start}.journal"), pruner="halving", seed=args.seed,
                                   n_seeds=args.tune_seeds)


def validation_budget(train_config: Path, updates: int) -> dict[str, Any]:
    """Training settings of the noise, validation and reference runs: ``updates`` PPO updates (0: the
    search's own budget), the entropy bonus annealed over the same span."""
    if not updates:
        return {}
    cfg, _ = load_config(train_config)
    steps = updates * cfg["ppo"]["n_envs"] * cfg["ppo"]["n_steps"]
    return {"ppo.total_timesteps": steps, "entropy.coef.steps": steps}


def validation_policies(opt: BayesianRewardOptimizer, validation: Validation, key: str) -> list[Path]:
    """The policies the validation runs of config ``key`` trained (one per repeat)."""
    repeats = sum(1 for k, _ in validation.evaluations if k == key)  # the race gives finalists their own count
    return [opt.study_dir / "validation" / key / f"repeat_{r}" / "train" / "policy.pt" for r in range(repeats)]


def _train_reference(job: tuple[VidurObjective, int, Path]) -> Path:
    """Train request_ttft.yaml's router, repeat ``r`` (the moonshot's reference); runs in a worker."""
    import torch

    torch.set_num_threads(1)
    objective, repeat, out = job
    # request_ttft.yaml's own credit: the training config's gamma (0, per request), not the start's
    own_gamma = load_config(objective.train_config)[0]["ppo"]["gamma"]
    cfg = objective.training_config(REQUEST_TTFT, {"ppo.gamma": own_gamma}, repeat, phase="validate")
    return train(cfg, out, resume=True).policy_path


def _evaluate(job: tuple[Path, dict[str, Path], list[int]]) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    env, policies, seeds = job
    routers: dict[str, Any] = {"round_robin": make_policy("round_robin"), "adaptive": make_policy("adaptive")}
    routers.update({name: PPORouter.from_checkpoint(path) for name, path in policies.items()})
    return list(evaluate_policies(env, routers, seeds, log=lambda msg: None).episodes)


def report(opt: BayesianRewardOptimizer, validation: Validation, args: argparse.Namespace) -> str:
    """The exported config's and the base's validation policies (and request_ttft's) on the report seeds."""
    chosen = validation.chosen
    policies = {f"base/r{r}": p for r, p in enumerate(validation_policies(opt, validation, "base"))}
    if chosen.label != "base":
        policies.update({f"exported/r{r}": p for r, p in enumerate(validation_policies(opt, validation, chosen.key))})
    ctx = multiprocessing.get_context("spawn")
    if args.start == "hybrid":
        jobs = [(opt.objective, r, args.out / "reference_request_ttft" / f"repeat_{r}") for r in range(args.repeats)]
        print(f"[report] training request_ttft.yaml's router {args.repeats} times (the moonshot's reference)", flush=True)
        with ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
            for r, path in enumerate(pool.map(_train_reference, jobs)):
                policies[f"request_ttft/r{r}"] = path
    seeds = evaluation_seeds(args.report_seeds)
    print(f"[report] evaluating {len(policies)} policies and 2 heuristics on report seeds {args.report_seeds}", flush=True)
    chunks = [seeds[i::args.workers] for i in range(args.workers)]
    with ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
        rows = [row for part in pool.map(_evaluate, [(args.env, policies, c) for c in chunks if c]) for row in part]
    ttft: dict[str, dict[int, float]] = {}
    for row in rows:
        ttft.setdefault(row["router"], {})[int(row["seed"])] = float(row["ttft_p99"])

    def matrix(prefix: str) -> np.ndarray:
        return np.array([[ttft[f"{prefix}/r{r}"][s] for s in seeds] for r in range(args.repeats)])

    groups = ["base"] + (["exported"] if chosen.label != "base" else []) + (
        ["request_ttft"] if args.start == "hybrid" else [])
    means = {g: float(matrix(g).mean()) for g in groups}
    means.update({h: statistics.fmean(ttft[h][s] for s in seeds) for h in ("round_robin", "adaptive")})
    table_rows = [[name, f"{value:.3f}", f"{value / means['base']:.3f}"] for name, value in means.items()]
    text = (f"report seeds {args.report_seeds} ({len(seeds)} seeds; never used by search or validation), "
            f"TTFT p99 in s, PPO rows averaged over {args.repeats} independent trainings:\n"
            + format_table(["policy", "TTFT p99 (s)", "/ base"], table_rows))
    if chosen.label != "base":
        change, = paired_changes([matrix("exported")], matrix("base"))
        mean, low, high = change.relative(means["base"])
        text += (f"\nexported ({chosen.label}) vs the {args.start} start: TTFT p99 {mean:+.1%} "
                 f"(90% paired interval {low:+.1%} to {high:+.1%})")
        if args.start == "hybrid":
            text += f"; target <= -25% with the interval excluding 0: {'met' if high < 0 and mean <= -0.25 else 'NOT met'}"
            gap = means["exported"] / means["request_ttft"] - 1
            text += (f"\nmoonshot: exported vs request_ttft.yaml's router {gap:+.1%} "
                     f"(within 5%: {'met' if gap <= 0.05 else 'not met'})")
    else:
        text += f"\nthe base was exported ({validation.verdict()})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", choices=sorted(STARTS), default="hybrid")
    parser.add_argument("--trials", type=int, default=30, help="search trials (the study's total)")
    parser.add_argument("--tune-seeds", type=int, default=3, help="evaluation seeds per run")
    parser.add_argument("--eval-every", type=int, default=4,
                        help="PPO updates between the pruner's evaluations (4: prune at half budget; at 2 every "
                             "policy is still near its warm start and the rung would be noise)")
    parser.add_argument("--validate", type=int, default=3, help="top configs re-run on validation seeds")
    parser.add_argument("--validate-updates", type=int, default=24,
                        help="PPO updates of the noise, validation and reference runs (the top rung; 0: the "
                             "search's 8); the verdict is judged on policies trained this long")
    parser.add_argument("--repeats", type=int, default=3, help="runs per config in validation (and the noise)")
    parser.add_argument("--workers", type=int, default=2, help="processes (search workers, validation runs)")
    parser.add_argument("--report-seeds", default="101-105,301-320")
    parser.add_argument("--no-report", action="store_true", help="stop after the verdict")
    parser.add_argument("--env", type=Path, default=ENV, help="env config (default: the slowdowns setup)")
    parser.add_argument("--train-config", type=Path, default=TRAIN, help="training config of every run")
    parser.add_argument("--seed", type=int, default=0,
                        help="study seed; a non-zero seed also moves every run's torch seed (+1000 x seed): "
                             "an independent replication of the benchmark")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_optimize")
    args = parser.parse_args()
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    opt = make_optimizer(args)
    print(f"study {opt.study_name}: base {STARTS[args.start][0].name}, space {STARTS[args.start][1].name}, "
          f"env {args.env.name}, training {args.train_config.name}; seeds: search {opt.seeds}, validation "
          f"{args.repeats} repeats of {args.tune_seeds}", flush=True)
    phases = {}
    t0 = time.perf_counter()
    print(measure_noise(opt, args.repeats, args.workers).describe(), flush=True)
    phases["noise"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    opt.enqueue(opt.base_config)
    opt.optimize(n_trials=args.trials, n_workers=args.workers)
    phases["search"] = time.perf_counter() - t0
    print(best_table(opt))
    if plotting_available():
        for path in save_plots(opt):
            print(f"wrote {path}")
    t0 = time.perf_counter()
    validation = validate(opt, args.validate, args.repeats, args.workers)
    phases["validation"] = time.perf_counter() - t0
    print(validation.table())
    print(compute_table(opt, args.repeats, opt.objective.full_cost))
    exported = export(opt, validation, args.out / f"exported_{args.start}.yaml")
    side = training_path(exported)
    print(f"wrote {exported}" + (f" and {side}" if side.exists() else ""))
    verdict = validation.verdict(exported)
    if not args.no_report:
        t0 = time.perf_counter()
        print(report(opt, validation, args))
        phases["report"] = time.perf_counter() - t0
    print("wall time (this run; a resumed run skips what is stored): "
          + ", ".join(f"{k} {v / 60:.1f} min" for k, v in phases.items())
          + f", total {(time.perf_counter() - start) / 60:.1f} min")
    print(verdict)


if __name__ == "__main__":
    main()
