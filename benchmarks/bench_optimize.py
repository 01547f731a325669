"""Tuned reward against the hand-set ones: a Bayesian study with the Vidur objective, then a fair final.

1. A study of ``--trials`` trials (default 20) tunes ``--base`` (configs/rewards/request_ttft.yaml,
   the per-request reward) over ``--space`` (configs/tune/request_ttft_space.yaml) with the Vidur
   objective: each trial trains the router with ``--train-config`` (short:
   configs/tune/ppo_tune_slowdowns.yaml, 8 updates) and is scored on paired tuning seeds (TTFT p99
   relative to round_robin), median pruning on, ``--workers`` processes sharing the study's journal.
   The base config is enqueued first.
2. The best ``--top`` tuned configs, the untuned base and the hand-set vidur_hybrid.yaml and
   vidur_ttft.yaml are each trained with the full budget (``--full-config``, default
   configs/ppo_slowdowns_request.yaml: least_prefill warm start, 60k PPO decisions) and evaluated
   together on the full config's ``seeds.eval`` (101-105), never used by the study. The hand-set
   rewards are per-step rewards (Little's law), whose returns must look ahead: they train with
   ``ppo.gamma = --step-gamma`` (0.995, as in their shipped configs), everything else equal.

Prints the study's table, what pruning saved (trials pruned, simulated requests avoided), the final
table (TTFT p99, mean e2e, each relative to the best hand-set reward) with the target (tuned TTFT
p99 at least 5% lower than the best hand-set, mean e2e no worse), what tuning adds over the untuned
base, and the wall time.

Env: ``--env`` (default configs/envs/slowdowns.yaml when it exists, else the homogeneous
configs/envs/codellama34b_tp2_4r.yaml; the run says which). The study resumes when re-run.
Run: ``.venv/bin/python benchmarks/bench_optimize.py [--trials 20] [--out runs/bench_optimize]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import yaml
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit.optimize import BayesianRewardOptimizer  # noqa: E402
from rewardkit.optimize.optimizer import counted_trials  # noqa: E402
from rewardkit.optimize.results import best_table, format_table, save_plots  # noqa: E402
from schedulers.evaluate.paired import evaluate_policies  # noqa: E402
from schedulers.rl.ppo_router import PPORouter  # noqa: E402
from schedulers.routing.router import HeuristicRouter  # noqa: E402
from schedulers.train.config import load_config  # noqa: E402
from schedulers.train.trainer import train  # noqa: E402
from schedulers.tune.vidur_objective import VidurObjective  # noqa: E402

SLOWDOWNS = ROOT / "configs" / "envs" / "slowdowns.yaml"
HOMOGENEOUS = ROOT / "configs" / "envs" / "codellama34b_tp2_4r.yaml"
HAND_SET = {"vidur_hybrid": ROOT / "configs" / "rewards" / "vidur_hybrid.yaml",
            "vidur_ttft": ROOT / "configs" / "rewards" / "vidur_ttft.yaml"}
BASE = ROOT / "configs" / "rewards" / "request_ttft.yaml"


def default_env() -> Path:
    return SLOWDOWNS if SLOWDOWNS.exists() else HOMOGENEOUS


def run_study(args: argparse.Namespace, env: Path, out: Path) -> BayesianRewardOptimizer:
    objective = VidurObjective(train_config=args.train_config, env_config=env, n_seeds=args.tune_seeds,
                               eval_every=args.eval_every, quiet=True)
    opt = BayesianRewardOptimizer(args.base, args.space, objective, study_name="bench_optimize",
                                  storage=str(out / "bench_optimize.journal"), pruner="median", seed=0,
                                  n_seeds=args.tune_seeds)
    opt.enqueue(args.base)  # once: a resumed study already holds it
    opt.optimize(n_trials=args.trials, n_workers=args.workers)
    return opt


def pruning_savings(opt: BayesianRewardOptimizer, train_config: Path) -> tuple[int, int, int]:
    """(pruned trials, simulated requests avoided, simulated requests spent) over the study."""
    cfg, _ = load_config(train_config)
    budget = int(cfg["ppo"]["total_timesteps"])
    finished = counted_trials(opt.study)
    pruned = [t for t in finished if t.state == TrialState.PRUNED]
    avoided = sum(max(0, budget - int(t.user_attrs.get("steps_trained", 0))) for t in pruned)
    spent = sum(int(t.user_attrs.get("steps_trained", 0)) + int(t.user_attrs.get("eval_requests", 0))
                for t in finished)
    return len(pruned), avoided, spent


def train_policy(job: tuple[str, dict[str, Any], Path]) -> Path:
    """Train one final candidate (resuming); its policy path. Runs in a worker process."""
    import torch

    torch.set_num_threads(1)
    _, cfg, out = job
    return train(cfg, out, resume=True).policy_path


def study_wall_time(opt: BayesianRewardOptimizer) -> float:
    """Seconds from the study's first trial start to its last trial end (also right for a resumed study)."""
    times = [(t.datetime_start, t.datetime_complete) for t in opt.study.trials if t.datetime_start and t.datetime_complete]
    if not times:
        return 0.0
    return (max(end for _, end in times) - min(begin for begin, _ in times)).total_seconds()


def final_comparison(opt: BayesianRewardOptimizer, args: argparse.Namespace, env: Path, out: Path) -> str:
    candidates: dict[str, Path] = {}
    # sampled trials only: an enqueued config (the base) is what tuning starts from, not its result
    sampled = [t for t in opt.best_trials() if "rewardkit.enqueued_from" not in t.user_attrs]
    for t in sampled[: args.top]:
        path = out / "final" / f"tuned_trial{t.number}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(opt.config_of(t), sort_keys=False))
        candidates[f"tuned_trial{t.number}"] = path
    candidates["untuned_base"] = args.base
    candidates.update(HAND_SET)
    full = VidurObjective(train_config=args.full_config, env_config=env, quiet=False)
    routers: dict[str, Any] = {"round_robin": HeuristicRouter("round_robin"),
                               "least_prefill": HeuristicRouter("least_prefill"),
                               "adaptive": HeuristicRouter("adaptive")}
    jobs = []
    for name, reward in candidates.items():
        cfg = full.training_config(reward.resolve())
        note = ""
        if name in HAND_SET:
            cfg["ppo"] = {**cfg["ppo"], "gamma": args.step_gamma}
            note = f", ppo.gamma {args.step_gamma} (a per-step reward)"
        print(f"[final] training {name} with the full budget ({args.full_config}{note})", flush=True)
        jobs.append((name, cfg, out / "final" / name))
    # independent runs, each resuming from its own checkpoints: args.workers at a time
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for name, policy in zip(candidates, pool.map(train_policy, jobs), strict=True):
            print(f"[final] {name}: {policy}", flush=True)
            routers[name] = PPORouter.from_checkpoint(policy)
    seeds = list(load_config(args.full_config)[0]["seeds"]["eval"])[: args.final_seeds]
    res = evaluate_policies(full.env(full.training_config(HAND_SET["vidur_ttft"].resolve())), routers, seeds,
                            out_dir=out / "final" / "evaluation")
    metric: dict[str, dict[str, float]] = {}
    for name in routers:
        rows = [r for r in res.episodes if r["router"] == name]
        metric[name] = {"ttft_p99": float(np.mean([r["ttft_p99"] for r in rows])),
                        "e2e_mean": float(np.mean([r["e2e_mean"] for r in rows]))}
    best_hand = min(HAND_SET, key=lambda n: metric[n]["ttft_p99"])
    ref = metric[best_hand]
    rows = [[name, f"{m['ttft_p99']:.4f}", f"{m['e2e_mean']:.4f}", f"{m['ttft_p99'] / ref['ttft_p99']:.4f}",
             f"{m['e2e_mean'] / ref['e2e_mean']:.4f}"] for name, m in metric.items()]
    table = format_table(["policy", "TTFT p99 (s)", "e2e mean (s)", f"TTFT p99 / {best_hand}",
                          f"e2e mean / {best_hand}"], rows)
    tuned = [n for n in metric if n.startswith("tuned_")]
    best_tuned = min(tuned, key=lambda n: metric[n]["ttft_p99"])
    gain = 1 - metric[best_tuned]["ttft_p99"] / ref["ttft_p99"]
    e2e_ok = metric[best_tuned]["e2e_mean"] <= ref["e2e_mean"]
    verdict = (f"target: {best_tuned} TTFT p99 {-gain:+.1%} vs {best_hand} (need <= -5.0%): "
               f"{'met' if gain >= 0.05 else 'NOT met'}; mean e2e no worse: {'met' if e2e_ok else 'NOT met'}\n"
               f"tuning alone: {best_tuned} TTFT p99 "
               f"{metric[best_tuned]['ttft_p99'] / metric['untuned_base']['ttft_p99'] - 1:+.1%} vs the untuned base "
               f"(same per-request credit), e2e {metric[best_tuned]['e2e_mean'] / metric['untuned_base']['e2e_mean'] - 1:+.1%}")
    return f"final, seeds {seeds} (never used by the study):\n{table}\n{verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, default=None, help="env config (default: slowdowns if present)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--base", type=Path, default=BASE, help="reward config the study tunes")
    parser.add_argument("--space", type=Path, default=ROOT / "configs" / "tune" / "request_ttft_space.yaml")
    parser.add_argument("--train-config", type=Path, default=ROOT / "configs" / "tune" / "ppo_tune_slowdowns.yaml")
    parser.add_argument("--full-config", type=Path, default=ROOT / "configs" / "ppo_slowdowns_request.yaml")
    parser.add_argument("--step-gamma", type=float, default=0.995, help="ppo.gamma for the hand-set per-step rewards")
    parser.add_argument("--tune-seeds", type=int, default=3)
    parser.add_argument("--eval-every", type=int, default=4, help="PPO updates between reported evaluations")
    parser.add_argument("--workers", type=int, default=2, help="processes sharing the study (journal file)")
    parser.add_argument("--top", type=int, default=3, help="tuned configs trained with the full budget")
    parser.add_argument("--final-seeds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_optimize")
    args = parser.parse_args()
    start = time.perf_counter()
    env = args.env or default_env()
    note = "" if args.env else (" (slowdowns setup)" if env == SLOWDOWNS else
                                " (configs/envs/slowdowns.yaml not found: the homogeneous setup instead)")
    print(f"env: {env}{note}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    opt = run_study(args, env, args.out)
    print(best_table(opt))
    for path in save_plots(opt):
        print(f"wrote {path}")
    pruned, avoided, spent = pruning_savings(opt, args.train_config)
    print(f"pruning: {pruned} of {opt.finished_count()} trials pruned; {avoided} simulated training requests "
          f"avoided ({spent} simulated in training and evaluation)")
    study_wall = study_wall_time(opt)
    print(final_comparison(opt, args, env, args.out))
    print(f"wall time: study {study_wall / 60:.1f} min (first trial start to last trial end), "
          f"this run {(time.perf_counter() - start) / 60:.1f} min")


if __name__ == "__main__":
    main()
