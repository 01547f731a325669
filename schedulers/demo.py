"""The main job (``make demo``): why learning matters when replicas slow down and recover.

On the ``slowdowns`` setup (configs/envs/slowdowns.yaml: 4 replicas, each slowed to 35-45% of its
speed for 30-50 s about every two minutes, unannounced), least_prefill (which ignores speed) is
cloned once (``<out>/clone``, with request_ttft.yaml's critic targets), and two PPO routers start
from that same clone (``bc.from_policy``: the same weights, so their learning curves start at the
same point) and train with the same budget, seeds and settings (configs/ppo_slowdowns_request.yaml);
only the reward differs:

- ``ppo_hybrid``: the seed system's per-step hybrid reward (configs/rewards/vidur_hybrid.yaml,
  absolute, delta and balance terms; ``gamma`` 0.995 as per-step rewards need);
- ``ppo_request``: per-request credit (configs/rewards/request_ttft.yaml: each decision is judged by
  its own request's TTFT; ``gamma`` 0).

Both are then evaluated beside the heuristics on fresh seeds (341-348 by default: no seed any
selection in this project used: 101-105, 201-208 and 301-320 chose configs and checkpoints; the
optimizer's seeds are 400-999; training episodes start at 1000). It prints the comparison table,
ratios to the warm start and to adaptive with paired 90% intervals, and writes two plots: TTFT p99
per router and the learning curves (TTFT p99 on two curve seeds, 351-352, every few updates). The
clone has its own progress bar (a heuristic's demonstrations collected, then each epoch fitted);
the two trainings run side by side (two processes); an interrupted demo resumes from its checkpoints.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .cli import describe_seeds, evaluation_seeds

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / "configs" / "ppo_slowdowns_request.yaml"
#: the two trainings: reward file and the discount its credit needs; everything else is shared.
RUNS = {
    "ppo_hybrid": {"reward": ROOT / "configs" / "rewards" / "vidur_hybrid.yaml", "gamma": 0.995},
    "ppo_request": {"reward": ROOT / "configs" / "rewards" / "request_ttft.yaml", "gamma": 0.0},
}
HEURISTICS = ("round_robin", "lor", "least_prefill", "adaptive")
#: seeds that chose configs or checkpoints somewhere in this project (docs): never evaluation seeds here.
SELECTION_SEEDS = frozenset([*range(101, 106), *range(201, 209), *range(301, 321), *range(400, 1000)])
CURVE_FILE = "curve.csv"


CLONE = "clone"
#: the run whose reward and discount the clone's critic is fitted with
CLONE_FROM = "ppo_request"


def training_config(base: Path, reward: Path, gamma: float, updates: int, clone: Path | None = None) -> dict[str, Any]:
    """``base`` with the run's reward and discount and a budget of ``updates`` PPO updates (0: the
    behaviour cloning alone), starting from the behaviour-cloned policy ``clone`` when given."""
    from rewardkit.config import load_yaml

    raw = load_yaml(base)
    raw["reward"] = str(reward)
    if raw.get("env") is not None and not Path(raw["env"]).is_absolute():
        raw["env"] = str((ROOT / raw["env"]) if (ROOT / raw["env"]).exists() else (base.parent / raw["env"]))
    ppo = raw["ppo"]
    ppo["gamma"] = gamma
    ppo["total_timesteps"] = steps = updates * int(ppo["n_envs"]) * int(ppo["n_steps"])
    raw["entropy"] = {**raw.get("entropy", {}),
                      "coef": {"schedule": "linear", "start": 0.01, "end": 0.0, "steps": max(steps, 1)}}
    raw["logging"] = {**raw.get("logging", {}), "progress": False, "plots": True, "tensorboard": False}
    if clone is not None:
        raw["bc"] = {**raw.get("bc", {}), "enabled": True, "from_policy": str(clone)}
    return raw


def clone_once(cfg: dict[str, Any], out: Path) -> Path:
    """Behaviour-clone the base config's heuristic once, with a progress bar; return its ``bc_policy.pt``
    (reused when an earlier demo wrote it)."""
    from tqdm import tqdm

    from .train.trainer import train

    path = out / "bc_policy.pt"
    if path.exists():
        return path
    # stages: each heuristic's demonstrations collected (most of the time), then each epoch fitted
    bar = tqdm(total=len(cfg["bc"]["heuristics"]) + cfg["bc"]["epochs"],
               desc=f"clone {', '.join(cfg['bc']['heuristics'])} (behaviour cloning)", unit="stage",
               file=sys.stderr, dynamic_ncols=True)

    def advance(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        train(cfg, out, resume=True, bc_callback=advance)
    finally:
        bar.close()
    return path


def _curve_rows(path: Path) -> dict[int, float]:
    if not path.exists():
        return {}
    with open(path, newline="", encoding="utf-8") as fh:
        return {int(r["update"]): float(r["ttft_p99"]) for r in csv.DictReader(fh)}


def _ttft_p99(env_cfg: Any, routers: dict[str, Any], seeds: list[int]) -> dict[str, list[float]]:
    """Each router's TTFT p99 per seed (no baseline added, no files written)."""
    from .evaluate.paired import evaluate_policies

    first = next(iter(routers))
    res = evaluate_policies(env_cfg, routers, seeds, baseline=first, log=lambda msg: None)
    return {name: [float(v) for v in res.values(name, "ttft_p99")] for name in routers}


def _train_run(job: tuple[str, dict[str, Any], Path, list[int], int]) -> Path:
    """One training (in a worker process), with its learning curve: TTFT p99 on the curve seeds of
    the warm start (update 0) and of every ``every``-th checkpoint, appended to ``curve.csv``."""
    import torch

    from .rl.ppo_router import PPORouter
    from .sim.env_config import load_env_config
    from .train.checkpoints import latest_checkpoint
    from .train.trainer import train

    torch.set_num_threads(1)
    name, cfg, out, curve_seeds, every = job
    env_cfg = load_env_config(cfg["env"])
    curve = out / CURVE_FILE
    done = _curve_rows(curve)

    def record(update: int, policy: Path) -> None:
        if update in done:
            return
        value = sum(_ttft_p99(env_cfg, {name: PPORouter.from_checkpoint(policy)}, curve_seeds)[name]) / len(curve_seeds)
        new = not curve.exists()
        with open(curve, "a", newline="", encoding="utf-8") as fh:
            if new:
                fh.write("update,ttft_p99\n")
            fh.write(f"{update},{value}\n")
        done[update] = value

    def on_update(row: dict[str, Any]) -> None:
        update = int(row.get("update", 0))
        if (out / "bc_policy.pt").exists():
            record(0, out / "bc_policy.pt")
        if update % every == 0 and (ckpt := latest_checkpoint(out)) is not None:
            record(update, ckpt)

    result = train(cfg, out, resume=True, callback=on_update)
    record(result.updates, result.policy_path)
    return result.policy_path


def _evaluate_seed(job: tuple[str, dict[str, str | None], int]) -> Any:
    """Every router on one seed (in a worker process): the evaluation's rows and latency samples."""
    import torch

    from .routing.policy import make_policy
    from .evaluate.paired import evaluate_policies
    from .sim.env_config import load_env_config

    torch.set_num_threads(1)
    env_path, specs, seed = job
    routers = {name: make_policy(name) if path is None else make_policy("ppo", path) for name, path in specs.items()}
    return evaluate_policies(load_env_config(env_path), routers, [seed], baseline="round_robin", log=lambda msg: None)


def _metrics_rows(path: Path) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            return max(sum(1 for _ in fh) - 1, 0)
    except OSError:
        return 0


def train_both(cfgs: dict[str, dict[str, Any]], out: Path, curve_seeds: list[int], every: int, updates: int,
               workers: int) -> dict[str, Path]:
    """Train every run, ``workers`` at a time, with a progress bar per run (PPO updates done)."""
    from tqdm import tqdm

    ctx = multiprocessing.get_context("spawn")
    bars = {name: tqdm(total=updates, desc=f"train {name}", unit="update", position=i, file=sys.stderr,
                       dynamic_ncols=True) for i, name in enumerate(cfgs)}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures: dict[str, Future] = {name: pool.submit(_train_run, (name, cfg, out / name, curve_seeds, every))
                                      for name, cfg in cfgs.items()}
        while not all(f.done() for f in futures.values()):
            for name, bar in bars.items():
                bar.update(min(_metrics_rows(out / name / "metrics.csv"), updates) - bar.n)
            time.sleep(1.0)
        paths = {name: f.result() for name, f in futures.items()}
    for bar in bars.values():
        bar.update(updates - bar.n)
        bar.close()
    return paths


def evaluate_all(env_path: str, specs: dict[str, str | None], seeds: list[int], workers: int, out_dir: Path) -> Any:
    """Every router on every seed, one seed per task over ``workers`` processes, with a progress bar;
    the merged results are saved to ``out_dir`` (CSV, JSON, latency plot)."""
    import numpy as np
    from tqdm import tqdm

    from .evaluate.evaluation_results import EvaluationResults

    ctx = multiprocessing.get_context("spawn")
    parts = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(_evaluate_seed, (env_path, specs, seed)): seed for seed in seeds}
        with tqdm(total=len(seeds), desc="evaluate", unit="seed", file=sys.stderr, dynamic_ncols=True) as bar:
            for future in _as_completed(futures):
                parts[futures[future]] = future.result()
                bar.update(1)
    first = parts[seeds[0]]
    merged = EvaluationResults(first.env_name, list(seeds), list(first.routers), list(first.heuristics), first.baseline)
    for seed in seeds:
        merged.episodes.extend(parts[seed].episodes)
    merged.samples = {r: {k: np.concatenate([parts[s].samples[r][k] for s in seeds]) for k in ("e2e", "ttft")}
                      for r in merged.routers}
    merged.save(out_dir)
    return merged


def _as_completed(futures: dict[Future, int]) -> Any:
    from concurrent.futures import as_completed

    return as_completed(futures)


def story_table(results: Any, warm_start: str = "warm_start", reference: str = "adaptive") -> str:
    """TTFT p99 per router with its ratio to the warm start and to ``reference`` (paired 90% intervals)."""
    from .evaluate.evaluation_results import paired_ratio_interval

    ttft = {name: results.values(name, "ttft_p99") for name in results.routers}
    rows = [["router", "TTFT p99 (s)", f"/ {warm_start}", "90% interval", f"/ {reference}", "90% interval"]]
    for name, values in ttft.items():
        row = [name, f"{values.mean():.3f}"]
        for other in (warm_start, reference):
            low, high = paired_ratio_interval(values, ttft[other])
            row += [f"{values.mean() / ttft[other].mean():.3f}", f"{low:.3f}-{high:.3f}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def save_plots(results: Any, out: Path, runs: list[str], heuristic_curve: dict[str, float]) -> list[Path]:
    """``ttft_p99.png`` (mean and per-seed points per router) and ``learning_curve.png`` (each run's
    TTFT p99 on the curve seeds against PPO updates, the heuristics on the same seeds as lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(results.routers)
    fig, ax = plt.subplots(figsize=(9, 4.5), constrained_layout=True)
    means = [results.values(n, "ttft_p99").mean() for n in names]
    colors = ["tab:orange" if n.startswith("ppo") else "tab:green" if n == "warm_start" else "tab:blue" for n in names]
    ax.bar(names, means, color=colors, alpha=0.8)
    for i, n in enumerate(names):
        vals = results.values(n, "ttft_p99")
        ax.scatter(np.full(len(vals), i), vals, color="black", s=10, zorder=3)
    ax.set_ylabel("TTFT p99 (s), mean over seeds (dots: each seed)")
    ax.set_title(f"slowdowns setup, seeds {describe_seeds(results.seeds)}")
    ax.tick_params(axis="x", rotation=20)
    bars = out / "ttft_p99.png"
    fig.savefig(bars, dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for run in runs:
        points = sorted(_curve_rows(out / run / CURVE_FILE).items())
        if points:
            ax.plot([u for u, _ in points], [v for _, v in points], marker="o", label=run)
    for (name, value), style in zip(heuristic_curve.items(), ("--", ":", "-."), strict=False):
        ax.axhline(value, linestyle=style, color="gray", label=name)
    ax.set_xlabel("PPO updates (0: the least_prefill clone)")
    ax.set_ylabel("TTFT p99 (s) on the curve seeds")
    ax.set_title("learning curves: same warm start, same budget, different reward")
    ax.legend()
    curve = out / "learning_curve.png"
    fig.savefig(curve, dpi=120)
    plt.close(fig)
    return [bars, curve]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/demo", help="run folder (an interrupted demo resumes from it)")
    parser.add_argument("--updates", type=int, default=24, help="PPO updates per training (2,000 decisions each)")
    parser.add_argument("--seeds", default="341-348", help="evaluation seeds (fresh: see the module doc)")
    parser.add_argument("--curve-seeds", default="351,352", help="seeds of the learning curve")
    parser.add_argument("--curve-every", type=int, default=6, help="updates between learning-curve points")
    parser.add_argument("--workers", type=int, default=2, help="processes for training and evaluation")
    parser.add_argument("--base-config", default=str(BASE_CONFIG), help="training config both runs start from")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        seeds, curve_seeds = evaluation_seeds(args.seeds), evaluation_seeds(args.curve_seeds)
        if args.updates < 1 or args.curve_every < 1 or args.workers < 1:
            raise ValueError(f"--updates, --curve-every and --workers: expected integers >= 1, got "
                             f"{args.updates}, {args.curve_every}, {args.workers}")
        reused = sorted((set(seeds) & SELECTION_SEEDS) | (set(seeds) & set(curve_seeds)))
        if reused:
            raise ValueError(f"--seeds: expected seeds no selection used (not 101-105, 201-208, 301-320, 400-999 "
                             f"nor the curve seeds), got {reused}")
        from .train.config import load_config

        out = Path(args.out)
        clone_cfg = training_config(Path(args.base_config), RUNS[CLONE_FROM]["reward"], RUNS[CLONE_FROM]["gamma"], 0)
        clone_cfg = load_config(clone_cfg)[0]  # with every default filled in
        clone_path = out / CLONE / "bc_policy.pt"
        cfgs = {name: training_config(Path(args.base_config), run["reward"], run["gamma"], args.updates, clone_path)
                for name, run in RUNS.items()}
        checked = {name: load_config(cfg)[0] for name, cfg in cfgs.items()}
    except Exception as exc:  # noqa: BLE001 - bad flags or configs: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    train_start = min(c["seeds"]["train_start"] for c in checked.values())
    if max(seeds + curve_seeds) >= train_start:
        print(f"error: --seeds: expected seeds below the training seeds ({train_start} onwards)", file=sys.stderr)
        return 2
    env_path = checked["ppo_request"]["env"]
    print(f"[demo] slowdowns setup ({env_path}); least_prefill cloned once ({clone_path}), two PPO routers "
          "started from that same clone, "
          f"{args.updates} updates each, rewards: " + ", ".join(f"{n} = {Path(r['reward']).name} (gamma {r['gamma']})"
                                                                for n, r in RUNS.items()), flush=True)
    print(f"[demo] evaluation seeds: {describe_seeds(seeds)}, fresh: no selection in this project used them "
          f"(101-105, 201-208, 301-320 and the optimizer's 400-999 did), and training episodes start at "
          f"{train_start}; learning-curve seeds: {describe_seeds(curve_seeds)}", flush=True)
    from rewardkit.errors import ConfigError

    try:
        clone_once(clone_cfg, out / CLONE)
        policies = train_both(cfgs, out, curve_seeds, args.curve_every, args.updates, args.workers)
    except ConfigError as exc:  # raised in a training process: a setting the trainer refuses
        print(f"error: {exc}", file=sys.stderr)
        return 2
    specs: dict[str, str | None] = {name: None for name in HEURISTICS}
    specs["warm_start"] = str(clone_path)  # both runs started from this clone
    specs.update({name: str(path) for name, path in policies.items()})
    results = evaluate_all(env_path, specs, seeds, args.workers, out / "eval")
    heuristic_curve = {name: sum(v) / len(v) for name, v in
                       _ttft_p99(env_path, {n: _heuristic(n) for n in ("least_prefill", "adaptive")}, curve_seeds).items()}
    print(results.format_table())
    print(story_table(results))
    plots = save_plots(results, out, list(RUNS), heuristic_curve)
    print(f"[demo] plots: {plots[0]} (TTFT p99 per router), {plots[1]} (learning curves); tables and CSV in {out / 'eval'}")
    print(f"[demo] done in {(time.perf_counter() - start) / 60:.1f} min", flush=True)
    return 0


def _heuristic(name: str) -> Any:
    from .routing.policy import make_policy

    return make_policy(name)


if __name__ == "__main__":
    sys.exit(main())
