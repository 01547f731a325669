"""What a live router's decision costs after the CPU idled: elementary operations and whole decisions, by pause.

A router inside Ray Serve decides once per request; between requests its CPU idles or runs other
code. On the 2-core test machine (a Firecracker VM) the first instructions after a pause run many
times slower than in a back-to-back loop: caches, branch history and the virtual CPU itself go cold.
This prints how much, so the live decision times of ``bench_ray_serve.py`` can be read against the
machine:

1. elementary operations (an empty call, ten Python calls, one small NumPy call, ...), each timed
   alone after a pause of 0, 1, 5, 20 and 167 ms (167 ms: one request at the live benchmark's 6 req/s);
2. ``PolicyRequestRouter.choose_replicas`` of each policy (two replicas, no Ray transport, as
   ``bench_ray_serve.decision_times``) after the same pauses.

Both as p50 / p99 in microseconds (operations) and milliseconds (decisions). Run::

    PYTHONPATH=$PWD python benchmarks/bench_cold_cpu.py --checkpoint runs/ppo_prefix_live/policy.pt
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ray_serve import decision_times  # noqa: E402


def _identity(x: int) -> int:
    return x


_PAIR = np.array([1.0, 2.0])
_PAIR_LIST = [1.0, 2.0]

#: small operations of the kind a decision is made of
OPERATIONS: dict[str, Callable[[], object]] = {
    "an empty call": lambda: None,
    "ten Python calls": lambda: [_identity(k) for k in range(10)],
    "np.array of two floats": lambda: np.array(_PAIR_LIST),
    "ndarray.tolist, two floats": _PAIR.tolist,
    "np.argmin, two floats": lambda: int(np.argmin(_PAIR)),
    "min in Python, two floats": lambda: min(range(2), key=_PAIR_LIST.__getitem__),
    "time.thread_time": time.thread_time,
}


def operation_times(pause_s: float, repeats: int) -> dict[str, tuple[float, float]]:
    """Per operation, p50 and p99 (microseconds) of one call right after a pause of ``pause_s``."""
    out = {}
    for name, op in OPERATIONS.items():
        times = []
        for _ in range(repeats + repeats // 5):
            time.sleep(pause_s)
            start = time.perf_counter()
            op()
            times.append(time.perf_counter() - start)
        kept = sorted(times[repeats // 5:])  # the first fifth warms the interpreter's caches up
        out[name] = (1e6 * statistics.median(kept), 1e6 * float(np.percentile(kept, 99)))
    return out


def table(title: str, columns: list[str], rows: dict[str, list[tuple[float, float]]], digits: int) -> str:
    """A markdown table: one row per name, ``p50 / p99`` per column."""
    lines = [title, "", "| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(f"{a:.{digits}f} / {b:.{digits}f}" for a, b in cells) + " |"
              for name, cells in rows.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pauses-ms", default="0,1,5,20,167", help="comma-separated pauses before each timed call (ms)")
    p.add_argument("--repeats", type=int, default=100, help="timed calls per operation and pause")
    p.add_argument("--decisions", type=int, default=150, help="timed decisions per policy and pause")
    p.add_argument("--policies", default="least_prefill,cache_aware:balance_abs_threshold=2,llm_d_default,"
                   "affinity_token_load:affinity_threshold=0.65,ppo")
    p.add_argument("--checkpoint", default=str(ROOT / "runs" / "ppo_prefix_live" / "policy.pt"),
                   help="the learned policy (ppo)")
    args = p.parse_args(argv)
    try:
        pauses = [float(x) / 1000.0 for x in args.pauses_ms.split(",") if x.strip()]
    except ValueError:
        print(f"error: --pauses-ms: expected comma-separated numbers, got {args.pauses_ms!r}", file=sys.stderr)
        return 2
    if not pauses or any(x < 0 for x in pauses) or args.repeats < 5 or args.decisions < 10:
        print("error: expected pauses >= 0, --repeats >= 5 and --decisions >= 10", file=sys.stderr)
        return 2
    policies = [s.strip() for s in args.policies.split(",") if s.strip()]
    if "ppo" in policies and not Path(args.checkpoint).is_file():
        print(f"error: --checkpoint {args.checkpoint}: no such file (or leave ppo out of --policies)", file=sys.stderr)
        return 2
    columns = [f"after {1000 * x:g} ms" for x in pauses]
    ops: dict[str, list[tuple[float, float]]] = {name: [] for name in OPERATIONS}
    decisions: dict[str, list[tuple[float, float]]] = {f"`{s}`": [] for s in policies}
    for k, pause in enumerate(pauses):
        print(f"[cold-cpu] pause {1000 * pause:g} ms ({k + 1}/{len(pauses)}): operations, then "
              f"{len(policies)} policies x {args.decisions} decisions", file=sys.stderr, flush=True)
        for name, cell in operation_times(pause, args.repeats).items():
            ops[name].append(cell)
        timed = decision_times(policies, args.checkpoint, decisions=args.decisions, gap_s=pause)
        for spec in policies:
            decisions[f"`{spec}`"].append((timed[spec]["p50"], timed[spec]["p99"]))
    print(table("One operation right after a pause (microseconds, p50 / p99):", columns, ops, 1))
    print()
    print(table("One `PolicyRequestRouter.choose_replicas` decision right after a pause (two replicas, no Ray "
                "transport; ms, p50 / p99):", columns, decisions, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
