"""A threshold grid of ``bench_prefix.py`` as one Markdown table: each router's TTFT p99 (s, mean over
the seeds) per variant of the mix, the mean over variants, and its ratio to its family's default (the
router named without parameters) with a 90% paired bootstrap interval over the (variant, seed)
episodes; lowest mean first.

Usage::

    python benchmarks/prefix_grid_table.py runs/grid_ray_prefix_affinity_live_train [--only ray_prefix_affinity]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grid_rows(table: dict) -> list[tuple[str, list[float], float]]:
    """(router, TTFT p99 per variant, mean over variants) for every router of a ``table.json``, lowest mean first."""
    variants = list(table)
    routers = [row["router"] for row in table[variants[0]]["rows"] if row["router"] != "bound"]
    rows = []
    for router in routers:
        per = [next(r["ttft_p99"] for r in table[v]["rows"] if r["router"] == router) for v in variants]
        rows.append((router, per, sum(per) / len(per)))
    return sorted(rows, key=lambda row: row[2])


def episode_p99(out: Path, variants: list[str]) -> dict[str, list[float]]:
    """Per router, its TTFT p99 of every (variant, seed) episode, in one order for all routers."""
    found: dict[str, dict[tuple[str, int], float]] = {}
    for variant in variants:
        for ep in json.loads((out / variant / "results.json").read_text())["episodes"]:
            found.setdefault(ep["router"], {})[(variant, ep["seed"])] = ep["ttft_p99"]
    return {router: [v for _, v in sorted(eps.items())] for router, eps in found.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="a bench_prefix.py --out directory (its table.json)")
    p.add_argument("--only", default=None, help="keep routers whose name starts with this (and least_prefill)")
    args = p.parse_args(argv)
    out = Path(args.out)
    path = out / "table.json"
    if not path.is_file():
        print(f"error: {path}: no such file (run benchmarks/bench_prefix.py --out {args.out} first)", file=sys.stderr)
        return 2
    from schedulers.evaluate.evaluation_results import paired_ratio_interval

    table = json.loads(path.read_text())
    variants = list(table)
    episodes = episode_p99(out, variants)
    print("| rule | " + " | ".join(variants) + " | mean | / its default [90% paired] |")
    print("|---" * (len(variants) + 3) + "|")
    for router, per, mean in grid_rows(table):
        if args.only and not (router.startswith(args.only) or router == "least_prefill"):
            continue
        default = router.partition(":")[0]
        versus = "-"
        if default != router and default in episodes:
            mine, theirs = episodes[router], episodes[default]
            low, high = paired_ratio_interval(mine, theirs)
            versus = f"{sum(mine) / sum(theirs):.2f} [{low:.2f}, {high:.2f}]"
        print(f"| `{router}` | " + " | ".join(f"{x:.3f}" for x in per) + f" | {mean:.3f} | {versus} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
