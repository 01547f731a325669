"""What the machine takes from a busy thread: the gaps between its consecutive clock reads.

A thread that never blocks still loses the CPU now and then without being switched out: the
kernel's timer tick (every 1/HZ s while the CPU is busy) and the softirq work done at its end, other
interrupts, and in a virtual machine the host's exits. Linux charges that time to whatever thread it
interrupted unless the kernel accounts interrupt time apart (``CONFIG_IRQ_TIME_ACCOUNTING``), so it
shows up in the thread's CPU time as well as its wall time. A routing decision that spans such a gap
pays it. This script spins one thread reading ``time.perf_counter`` and ``time.thread_time`` for
``--seconds``, records every gap above ``--min-us``, and prints:

- for every gap, and for those in which the thread was not switched out (interrupts, the tick, the
  host: what a thread under ``SCHED_FIFO`` still meets), how many per second exceed 20, 50, 100 and
  200 us, their p50/p99/max, the share of them charged as the thread's CPU time, and how they are
  spaced (a tick every 4 ms at HZ=250 shows as a median near 4 ms);
- for decisions that need D ms of the CPU, the share that take longer than ``--target-ms`` on the
  wall once the gaps met on the way are added (D placed at random along the recorded timeline).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_cpu_gaps.py [--seconds 5] [--target-ms 0.2]

Run it on an otherwise idle machine to see the machine's own share; beside a workload (engines,
Ray) it shows what that load adds. The thread is an ordinary one: spun for seconds under
``SCHED_FIFO`` it would meet the kernel's real-time throttling (50 ms of every second by default),
which no decision lasts long enough to meet.
"""

from __future__ import annotations

import argparse
import bisect
import resource
import time

import numpy as np


def record_gaps(seconds: float, min_s: float) -> tuple[np.ndarray, float, float]:
    """Spin for ``seconds``: the gaps above ``min_s`` as rows (start, wall length, CPU-time length, 1 if the
    thread was switched out in it else 0), and the run's start and end (perf_counter)."""
    clock, cpu_clock = time.perf_counter, time.thread_time
    gaps: list[tuple[float, float, float, int]] = []
    switches = _switches()
    start = last = clock()
    last_cpu = cpu_clock()
    end = start + seconds
    while last < end:
        now, now_cpu = clock(), cpu_clock()
        if now - last > min_s:
            switched, switches = _switches(), switches  # read after the gap: a switch shows as one
            gaps.append((last, now - last, now_cpu - last_cpu, int(switched > switches)))
            switches = switched
            now, now_cpu = clock(), cpu_clock()  # the read itself is not the next gap
        last, last_cpu = now, now_cpu
    return np.array(gaps, dtype=np.float64).reshape(-1, 4), start, last


def _switches() -> int:
    """Context switches of this thread so far (voluntary and not; 0 where the system does not say)."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return 0
    usage = resource.getrusage(who)
    return usage.ru_nvcsw + usage.ru_nivcsw


def over_target_share(gaps: np.ndarray, start: float, end: float, work_s: float, target_s: float,
                      samples: int, rng: np.random.Generator) -> float:
    """The share of ``work_s``-long pieces of work, started at random along the run, that end more than
    ``target_s`` after they started once every gap met on the way is added."""
    starts = gaps[:, 0].tolist()
    lengths = gaps[:, 1].tolist()
    over = 0
    for s in rng.uniform(start, end - work_s - 0.01, samples).tolist():
        i = bisect.bisect_left(starts, s)
        t, left = s, work_s
        while i < len(starts) and starts[i] < t + left:
            left -= starts[i] - t
            t = starts[i] + lengths[i]
            i += 1
        over += (t + left - s) > target_s
    return over / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="spin this long per setting")
    parser.add_argument("--min-us", type=float, default=10.0, help="record gaps above this (us)")
    parser.add_argument("--target-ms", type=float, default=0.2, help="the decision-time target (ms)")
    parser.add_argument("--work-ms", default="0.05,0.08,0.1,0.15", help="decision lengths to place (ms of CPU)")
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
    if args.seconds <= 0 or args.min_us <= 0 or args.target_ms <= 0 or args.samples < 1:
        parser.error("--seconds, --min-us, --target-ms and --samples: expected positive numbers")
    works = [float(w) for w in args.work_ms.split(",")]
    rng = np.random.default_rng(0)
    gaps, start, end = record_gaps(args.seconds, args.min_us / 1e6)
    span = end - start
    print(f"{len(gaps)} gaps above {args.min_us:g} us in {span:.1f} s of spinning, {int(gaps[:, 3].sum())} with a "
          "context switch")
    print("| gaps | per s > 20 / 50 / 100 / 200 us | p50 / p99 / max (us) | charged as CPU time | spacing p50 (ms) | "
          + " | ".join(f"{w:g} ms of work: > {args.target_ms:g} ms" for w in works) + " |")
    print("|---|---|---|---|---|" + "---|" * len(works))
    for label, rows in (("every one", gaps), ("without a switch (what a real-time thread meets)", gaps[gaps[:, 3] == 0])):
        wall = rows[:, 1] * 1e6
        rates = " / ".join(f"{(wall > t).sum() / span:.0f}" for t in (20, 50, 100, 200))
        spread = f"{np.percentile(wall, 50):.0f} / {np.percentile(wall, 99):.0f} / {wall.max():.0f}" if len(wall) else "-"
        charged = f"{rows[:, 2].sum() / rows[:, 1].sum():.0%}" if len(wall) else "-"
        spacing = f"{np.median(np.diff(rows[:, 0])) * 1e3:.2f}" if len(wall) > 2 else "-"
        shares = [over_target_share(rows, start, end, w / 1e3, args.target_ms / 1e3, args.samples, rng) for w in works]
        print(f"| {label} | {rates} | {spread} | {charged} | {spacing} | " + " | ".join(f"{x:.2%}" for x in shares) + " |")

if __name__ == "__main__":
    main()
