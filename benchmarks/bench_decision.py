"""In-process routing decision time of the gateway: ``LiveClusterView.snapshot`` plus ``Policy.decide``.

Compares, side by side in one run, the snapshot as routers get it (fields computed on first read)
with the same snapshot completed up front (every field built, as before snapshots were lazy), for a
few routers, on a 4-replica view with requests in flight and a fresh engine scrape. Prints the
median per decision (µs) and the ratio.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_decision.py [--decisions 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time

from schedulers.live.view import LiveClusterView
from schedulers.routing.policy import make_policy
from schedulers.routing.snapshot import ReplicaSnapshot


def busy_view(replicas: int = 4) -> LiveClusterView:
    """A view with waiting and running requests, a completion and an engine scrape."""
    view = LiveClusterView(replicas, engine_stale_s=1e9)
    keys = [view.sent(i % replicas, 50 + i) for i in range(2 * replicas)]
    view.token(keys[0], 3)
    view.token(keys[1], 2)
    view.finished(keys[1])
    view.engine_reported(replicas - 1, {"vllm:num_requests_waiting": 1.0, "vllm:kv_cache_usage_perc": 0.1})
    return view


def completed(view: LiveClusterView) -> ReplicaSnapshot:
    """A snapshot with every field built."""
    snap = view.snapshot()
    snap.complete()
    return snap


def per_decision_us(view: LiveClusterView, router: str, complete: bool, decisions: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean time (µs) of one snapshot and decision."""
    policy = make_policy(router, seed=0, simulated=False)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(decisions):  # no snapshot outlives its decision (as in the gateway: the view
            # completes one still referenced when it takes the next)
            policy.decide(completed(view) if complete else view.snapshot(), 100)
        times.append((time.perf_counter() - start) / decisions * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--routers", default="least_prefill,jsq,least_kv,adaptive")
    args = parser.parse_args()
    if args.decisions < 1 or args.repeats < 1:
        parser.error("--decisions and --repeats: expected positive integers")
    print(f"{'router':<16}{'every field (µs)':>18}{'on read (µs)':>14}{'ratio':>8}")
    for router in args.routers.split(","):
        view = busy_view()
        eager = per_decision_us(view, router, True, args.decisions, args.repeats)
        lazy = per_decision_us(view, router, False, args.decisions, args.repeats)
        print(f"{router:<16}{eager:>18.1f}{lazy:>14.1f}{lazy / eager:>8.2f}")


if __name__ == "__main__":
    main()
