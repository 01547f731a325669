"""Prefix-cache routing in Vidur: routers against the industry's defaults on shared-prefix workloads.

For every variant of a workload mix (``configs/mixes/*.yaml``: the training mix or the held-out one),
every router runs on the same seeds (same arrivals and prompts per seed) through the simulator with
per-replica prefix caches (:mod:`schedulers.sim.prefix_cache`). Printed per variant: TTFT p50/p99,
e2e mean and prefix hit rate per router, and each router's TTFT p99 over the *best* of the industry
baselines (``BASELINES``: SGLang's ``cache_aware`` and ``least_load``, llm-d's ``affinity_token_load``
and ``llm_d_optimized``, Dynamo's ``dynamo_kv``; best = lower mean TTFT p99 over the seeds) with a
90% paired bootstrap interval and paired wins. Every baseline runs whatever ``--routers`` says.

The bound: a grid of two baselines' thresholds is run too, and for every seed the best TTFT p99 any
of these fixed rules (the heuristics and the grid) reached, chosen in hindsight per episode, is
taken. It is what a router that knew in advance which fixed rule suits each episode would get: a
learned router below it does something no rule of the family does; the gap between the better
baseline and the bound is the room a better choice of rule (or of thresholds) leaves.

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_prefix.py --mix configs/mixes/prefix_heldout.yaml \\
        --seeds 101-105 --policy ppo=runs/ppo_prefix/policy.pt --out runs/bench_prefix_heldout

Writes ``<out>/<variant>/`` (evaluate's summary.csv, results.json, latency.png), ``<out>/table.json``
and ``<out>/prefix_routing.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.cli import evaluation_seeds  # noqa: E402

#: the industry's routers as they ship (docs/prefix-routing.md has the source and version each follows).
BASELINES = ("cache_aware", "affinity_token_load", "llm_d_optimized", "least_load", "dynamo_kv")
ROUTERS = "least_prefill,adaptive,prefix_aware," + ",".join(BASELINES)
#: the rule family of the bound: two of the baselines over a grid of their thresholds (defaults included above).
BOUND_GRID = ("cache_aware:balance_abs_threshold=8", "affinity_token_load:max_ttft_penalty_ms=1000")


def build_routers(specs: list[str], policies: dict[str, str]) -> dict[str, Any]:
    from schedulers.routing.policy import make_policy

    routers: dict[str, Any] = {spec: make_policy(spec) for spec in specs}
    routers.update({name: make_policy("ppo", path, threads=1) for name, path in policies.items()})
    return routers


def reused_episodes(dirs: list[str], variant: str, seeds: list[int], wanted: list[str]) -> dict[str, list[dict]]:
    """Per router of ``wanted`` (and ``round_robin``), its episodes on every seed in an earlier run's results."""
    found: dict[str, list[dict]] = {}
    for folder in dirs:
        path = Path(folder) / variant / "results.json"
        if not path.is_file():
            continue
        episodes = json.loads(path.read_text())["episodes"]
        for router in ["round_robin"] + [w for w in wanted if w != "round_robin"]:
            rows = {row["seed"]: row for row in episodes if row["router"] == router}
            if router not in found and all(seed in rows for seed in seeds):
                found[router] = [rows[seed] for seed in seeds]
    return found


def add_reused(results: Any, reused: dict[str, list[dict]], routers: dict[str, Any]) -> None:
    """Put reused episodes into ``results`` (heuristics counted as heuristics, as evaluate does)."""
    from schedulers.routing.policy import is_heuristic, parse_router_spec, policy_class

    for router, rows in reused.items():
        if router in results.routers:
            continue
        results.routers.append(router)
        results.episodes.extend(rows)
        policy = routers.get(router)
        if policy is None:  # a router of an earlier run: its registered class, if it names one
            try:
                policy = policy_class(parse_router_spec(router)[0])
            except ValueError:
                continue  # a trained policy's label
        if is_heuristic(policy):
            results.heuristics.append(router)


def compare(results: Any, learned: list[str], bound_rules: list[str]) -> dict[str, Any]:
    """Per router: means, and TTFT p99 over the best industry baseline with a 90% paired interval."""
    from schedulers.evaluate.evaluation_results import paired_ratio_interval

    p99 = {r: results.values(r, "ttft_p99") for r in results.routers}
    better = min(BASELINES, key=lambda b: float(np.mean(p99[b])))
    ref = p99[better]
    bound = np.min(np.stack([p99[r] for r in bound_rules]), axis=0)
    best_rule = min(bound_rules, key=lambda r: float(np.mean(p99[r])))
    rows = []
    for router in list(results.routers) + ["bound"]:
        mine = bound if router == "bound" else p99[router]
        row = {"router": router, "ttft_p99": float(np.mean(mine)), "vs_better_baseline": float(np.mean(mine) / np.mean(ref)),
               "interval": paired_ratio_interval(mine, ref), "wins": int(np.sum(mine < ref)),
               "vs_best_rule": float(np.mean(mine) / np.mean(p99[best_rule])),
               "best_rule_interval": paired_ratio_interval(mine, p99[best_rule])}
        if router != "bound":
            for key in ("ttft_p50", "e2e_mean", "prefix_hit_rate"):
                row[key] = float(np.mean(results.values(router, key)))
        rows.append(row)
    return {"better_baseline": better, "best_rule": best_rule, "rows": rows, "seeds": results.seeds, "learned": learned}


def format_variant(name: str, table: dict[str, Any]) -> str:
    head = (f"{'router':48s} {'TTFT p50':>9s} {'TTFT p99':>9s} {'e2e mean':>9s} {'hit rate':>9s}  "
            f"p99 / {table['better_baseline']} [90% paired]  wins")
    lines = [f"== {name} (seeds {table['seeds']})", head]
    n = len(table["seeds"])
    for row in table["rows"]:
        lo, hi = row["interval"]
        cells = (f"{row.get('ttft_p50', float('nan')):9.3f} {row['ttft_p99']:9.3f} {row.get('e2e_mean', float('nan')):9.3f} "
                 f"{row.get('prefix_hit_rate', float('nan')):9.3f}")
        label = "bound (best rule per seed)" if row["router"] == "bound" else row["router"]
        lines.append(f"{label:48s} {cells}  {row['vs_better_baseline']:.3f} [{lo:.3f}, {hi:.3f}]  {row['wins']}/{n}")
    return "\n".join(lines)


def markdown_variant(name: str, table: dict[str, Any]) -> str:
    """The variant's table in Markdown (for docs/prefix-routing.md)."""
    n = len(table["seeds"])
    lines = [f"**{name}**", "", f"| router | TTFT p50 (s) | TTFT p99 (s) | e2e mean (s) | prefix hit rate | "
             f"p99 / {table['better_baseline']} [90% paired] | lower on | p99 / best fixed rule ({table['best_rule']}) |",
             "|---|---|---|---|---|---|---|---|"]
    for row in table["rows"]:
        lo, hi = row["interval"]
        label = "bound (best fixed rule per seed)" if row["router"] == "bound" else f"`{row['router']}`"
        cells = [f"{row[k]:.3f}" if k in row else "" for k in ("ttft_p50", "ttft_p99", "e2e_mean", "prefix_hit_rate")]
        blo, bhi = row["best_rule_interval"]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {row['vs_better_baseline']:.2f} [{lo:.2f}, {hi:.2f}] | "
                     f"{row['wins']}/{n} | {row['vs_best_rule']:.2f} [{blo:.2f}, {bhi:.2f}] |")
    return "\n".join(lines)


def plot(tables: dict[str, dict[str, Any]], path: Path, show: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8))
    names = list(tables)
    width = 0.8 / max(len(show), 1)
    for i, router in enumerate(show):
        ratios, lo, hi = [], [], []
        for name in names:
            row = next(r for r in tables[name]["rows"] if r["router"] == router)
            ratios.append(row["vs_better_baseline"])
            lo.append(row["vs_better_baseline"] - row["interval"][0])
            hi.append(row["interval"][1] - row["vs_better_baseline"])
        axes[0].bar(np.arange(len(names)) + i * width, ratios, width, yerr=[lo, hi], capsize=2, label=router)
    axes[0].axhline(1.0, color="k", lw=0.8)
    axes[0].axhline(0.9, color="k", lw=0.8, ls=":")
    axes[0].set_xticks(np.arange(len(names)) + width * (len(show) - 1) / 2, names, fontsize=8)
    axes[0].set(ylabel="TTFT p99 / best industry baseline", title="TTFT p99 (90% paired interval)", yscale="log")
    axes[0].legend(fontsize=7)
    for router in show:
        if router == "bound":
            continue
        xs = [next(r for r in tables[n]["rows"] if r["router"] == router)["prefix_hit_rate"] for n in names]
        ys = [next(r for r in tables[n]["rows"] if r["router"] == router)["ttft_p99"] for n in names]
        axes[1].scatter(xs, ys, label=router, s=25)
    axes[1].set(xlabel="prefix hit rate (cached / all prompt tokens)", ylabel="TTFT p99 (s)", yscale="log",
                title="cache hits against tail latency, one point per workload")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mix", default="configs/mixes/prefix_heldout.yaml")
    p.add_argument("--variants", default=None, help="comma-separated variant names (default: all)")
    p.add_argument("--routers", default=ROUTERS)
    p.add_argument("--policy", action="append", default=[], metavar="NAME=PATH", help="a PPO checkpoint to evaluate")
    p.add_argument("--no-bound", action="store_true", help="skip the threshold grid of the bound")
    p.add_argument("--seeds", default="101-105")
    p.add_argument("--requests", type=int, default=None, help="override requests per episode")
    p.add_argument("--reuse", action="append", default=[], metavar="DIR",
                   help="an earlier run's --out: routers it ran on every seed are taken from it, not rerun "
                        "(the simulator is deterministic per seed)")
    p.add_argument("--out", default="runs/bench_prefix")
    args = p.parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "disabled")
    from schedulers.evaluate.paired import evaluate_policies
    from schedulers.sim.env_config import with_overrides
    from schedulers.sim.workload_mix import load_workload_mix

    try:
        seeds = evaluation_seeds(args.seeds)
        mix = load_workload_mix(args.mix)
        policies = dict(item.split("=", 1) for item in args.policy)
        for name, path in policies.items():
            if not Path(path).is_file():
                raise ValueError(f"--policy: expected NAME=PATH of an existing checkpoint, got {name}={path}")
        variants = args.variants.split(",") if args.variants else list(mix.variants)
        unknown = [v for v in variants if v not in mix.variants]
        if unknown:
            raise ValueError(f"--variants: expected names among {', '.join(mix.variants)}, got {', '.join(unknown)}")
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    specs = [s for s in args.routers.split(",") if s]
    for b in BASELINES:
        if b not in specs:
            specs.append(b)
    grid = [] if args.no_bound else [g for g in BOUND_GRID if g not in specs]
    routers = build_routers(specs + grid, policies)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict[str, Any]] = {}
    for name in variants:
        cfg = mix.variants[name]
        if args.requests:
            cfg = with_overrides(cfg, requests_per_episode=args.requests)
        reused = reused_episodes(args.reuse, name, seeds, list(routers))
        to_run = {k: r for k, r in routers.items() if k not in reused}
        if to_run:
            results = evaluate_policies(cfg, to_run, seeds, out_dir=out / name)
        else:
            from schedulers.evaluate.evaluation_results import EvaluationResults

            results = EvaluationResults(cfg.name, seeds, [], [], "round_robin")
        add_reused(results, reused, routers)
        bound_rules = [r for r in routers if r not in policies]
        tables[name] = compare(results, list(policies), bound_rules)
        print(format_variant(name, tables[name]), flush=True)
        (out / "table.json").write_text(json.dumps(tables, indent=1))
        (out / "table.md").write_text("\n\n".join(markdown_variant(k, v) for k, v in tables.items()) + "\n")
    show = [s for s in specs if s not in ("round_robin",)] + list(policies) + ["bound"]
    plot(tables, out / "prefix_routing.png", show)
    print(f"tables in {out / 'table.json'}, plot {out / 'prefix_routing.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
