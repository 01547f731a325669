"""bench_cpu_gaps: pieces of work meet the recorded gaps where they fall, and the script prints its table."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cpu_gaps  # noqa: E402


def test_work_is_late_exactly_when_a_gap_falls_inside_it() -> None:
    """One 0.15 ms gap every 4 ms: 0.1 ms of work is over 0.2 ms exactly when a gap starts within it
    (a share of 0.1 / 4); with no gaps nothing is late; work that alone exceeds the target always is."""
    starts = np.arange(0.0, 1.0, 0.004)
    gaps = np.column_stack([starts, np.full_like(starts, 150e-6), np.full_like(starts, 150e-6), np.zeros_like(starts)])
    rng = np.random.default_rng(0)
    share = bench_cpu_gaps.over_target_share(gaps, 0.0, 1.0, 100e-6, 200e-6, 40_000, rng)
    assert abs(share - 0.1 / 4) < 0.004
    assert bench_cpu_gaps.over_target_share(gaps, 0.0, 1.0, 40e-6, 200e-6, 5_000, rng) == 0.0  # 40 + 150 < 200
    assert bench_cpu_gaps.over_target_share(np.zeros((0, 4)), 0.0, 1.0, 100e-6, 200e-6, 1_000, rng) == 0.0
    assert bench_cpu_gaps.over_target_share(gaps, 0.0, 1.0, 250e-6, 200e-6, 1_000, rng) == 1.0


def test_a_spinning_thread_records_the_gaps_it_meets() -> None:
    """While another thread holds the GIL (Python hands it over every 5 ms), the spinning thread waits:
    each wait is a gap of milliseconds, and none of it is charged as the spinner's CPU time."""
    import threading

    out: dict = {}
    spinner = threading.Thread(target=lambda: out.setdefault("run", bench_cpu_gaps.record_gaps(0.2, 1e-3)))
    spinner.start()
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        pass
    spinner.join()
    gaps, start, stop = out["run"]
    assert stop - start >= 0.2 and gaps.shape[1] == 4
    waits = gaps[gaps[:, 1] > 2e-3]
    assert len(waits) >= 3 and (waits[:, 2] < 0.5 * waits[:, 1]).all()
    assert (waits[:, 3] == 1).all()  # waiting for the GIL, the spinner slept: a switch of its own


def test_the_script_prints_its_table() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_cpu_gaps.py"), "--seconds", "0.2",
                          "--samples", "2000"], capture_output=True, text=True, check=True, timeout=60).stdout
    header, rule, *rows = [line for line in out.splitlines() if line.startswith("|")]
    assert len(rows) == 2 and header.count("|") == rule.count("|") == 10
    assert all(row.count("|") == 10 and all(cell.strip() for cell in row.strip("|").split("|")) for row in rows)
