"""How the search-space check scales with the base config's size (linear, was quadratic).

``SearchSpace.check_against`` builds each probe (both ends of every range, every choice) into the
base config. Built one probe at a time, the check costs (probes x config size): 19 s for 1,000
tuned weights over 1,000 terms. Built in rounds (every low at once, every high, ...), it costs
(rounds x config size). This times both, side by side in one run, for configs of N linear terms
each with its weight tuned, and prints a Markdown table with the time per term.
Run: ``.venv/bin/python benchmarks/bench_search_space.py [--sizes 100 300 1000] [--skip-per-probe-above 300]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.optimize import SearchSpace  # noqa: E402


def base_and_space(n: int) -> tuple[dict, dict]:
    base = {"version": 1, "components": {f"t{i}": {"type": "linear", "inputs": {"value": f"x{i}"}, "weight": 1.0}
                                         for i in range(n)}}
    space = {f"components.t{i}.weight": {"type": "float", "low": 0.0, "high": 2.0} for i in range(n)}
    return base, space


def per_probe(space: SearchSpace, base: dict) -> None:
    """The former check: one build per probe (for comparison only)."""
    for dim in space.dimensions:
        for _, value in dim.probes():
            RewardComposer.from_dict(space.apply(base, {dim.path: value}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--skip-per-probe-above", type=int, default=300,
                        help="the per-probe check is quadratic: skip it above this size")
    args = parser.parse_args()
    print("| terms (each weight tuned) | check_against (s) | ms per term | one build per probe (s) |")
    print("|---|---|---|---|")
    for n in args.sizes:
        base, raw = base_and_space(n)
        space = SearchSpace.from_dict(raw)
        start = time.perf_counter()
        space.check_against(base)
        rounds = time.perf_counter() - start
        old = "skipped"
        if n <= args.skip_per_probe_above:
            start = time.perf_counter()
            per_probe(space, base)
            old = f"{time.perf_counter() - start:.2f}"
        print(f"| {n} | {rounds:.2f} | {1000 * rounds / n:.2f} | {old} |")


if __name__ == "__main__":
    main()
