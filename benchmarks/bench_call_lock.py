"""What the composer's state lock costs a one-environment call, measured side by side in one run.

Every call holds the composer's state lock (calls from several threads are each counted); the
compiled one-environment function takes it with one list ``pop`` and frees it in a ``finally``
(an ``append`` and a check for waiters). This compares that function with the same generated function compiled without the lock,
on the RLlama workload shape (six ``info_value`` terms, each on its own linear schedule), in
alternation (best of ``--repeats`` each), and prints a table.
Run: ``.venv/bin/python benchmarks/bench_call_lock.py [--calls N] [--repeats R]``.
"""
from __future__ import annotations

import argparse
import timeit

from rewardkit import RewardComposer

SIX = {"version": 1, "components": {
    f"c{i}": {"type": "info_value", "params": {"key": f"s{i}"},
              "weight": {"schedule": "linear", "start": 1.0 - 0.1 * i, "end": 0.1, "steps": 100_000}}
    for i in range(6)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    composer = RewardComposer.from_dict(SIX).eval()  # the step stays put: both give the same numbers
    ctx = {f"s{i}": 0.5 for i in range(6)}
    locked = composer.plan.single_env
    unlocked = composer.plan.build_single_env("<unlocked>", locked=False)  # the same code minus the lock
    assert unlocked(ctx).total == locked(ctx).total
    best = {"locked": float("inf"), "unlocked": float("inf")}
    for _ in range(args.repeats):
        for name, fn in (("locked", locked), ("unlocked", unlocked)):
            best[name] = min(best[name], timeit.timeit(lambda fn=fn: fn(ctx), number=args.calls) / args.calls)
    print("| one-environment call | ns per call |")
    print("|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds * 1e9:.0f} |")
    print(f"\nthe lock costs {(best['locked'] / best['unlocked'] - 1) * 100:+.1f}% of a call")


if __name__ == "__main__":
    main()
