"""A threshold grid of ``bench_prefix.py`` as one Markdown table: each router's TTFT p99 (s, mean over
the seeds) per variant of the mix and the mean over variants, lowest mean first.

Usage::

    python benchmarks/prefix_grid_table.py runs/grid_ray_prefix_affinity_live_train [--only ray_prefix_affinity]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def grid_rows(table: dict) -> list[tuple[str, list[float], float]]:
    """(router, TTFT p99 per variant, mean over variants) for every router of a ``table.json``, lowest mean first."""
    variants = list(table)
    routers = [row["router"] for row in table[variants[0]]["rows"] if row["router"] != "bound"]
    rows = []
    for router in routers:
        per = [next(r["ttft_p99"] for r in table[v]["rows"] if r["router"] == router) for v in variants]
        rows.append((router, per, sum(per) / len(per)))
    return sorted(rows, key=lambda row: row[2])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="a bench_prefix.py --out directory (its table.json)")
    p.add_argument("--only", default=None, help="keep routers whose name starts with this (and least_prefill)")
    args = p.parse_args(argv)
    path = Path(args.out) / "table.json"
    if not path.is_file():
        print(f"error: {path}: no such file (run benchmarks/bench_prefix.py --out {args.out} first)", file=sys.stderr)
        return 2
    table = json.loads(path.read_text())
    variants = list(table)
    print("| rule | " + " | ".join(variants) + " | mean |")
    print("|---" * (len(variants) + 2) + "|")
    for router, per, mean in grid_rows(table):
        if args.only and not (router.startswith(args.only) or router == "least_prefill"):
            continue
        print(f"| `{router}` | " + " | ".join(f"{x:.3f}" for x in per) + f" | {mean:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
