"""bench_serving's shared-prefix report: the learned router paired with every other router by round, and
the pooled p99's paired interval over rounds."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from serving_report import pooled_p99_interval, pooled_paired  # noqa: E402


def rounds(scale: float, seed: int, k: int = 5) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(scale * rng.lognormal(4.0, 0.5, size=240)) for _ in range(k)]


def summary(name: str, per_round: list[list[float]]) -> dict:
    return {"router": name, "ttft_ms": {"p99": float(np.percentile(np.concatenate(per_round), 99))},
            "rounds": [{"ttft_p99": float(np.percentile(r, 99)), "ttft_all_ms": r} for r in per_round]}


def test_the_pooled_ratio_is_the_pooled_p99s_and_its_interval_brackets_it() -> None:
    faster, slower = rounds(0.8, 1), rounds(1.0, 1)  # the same requests, 20% faster
    ratio, low, high = pooled_p99_interval(faster, slower)
    assert ratio == pytest.approx(0.8)
    assert low == pytest.approx(0.8) and high == pytest.approx(0.8)  # paired: every draw keeps the 0.8
    ratio, low, high = pooled_p99_interval(rounds(1.0, 2), rounds(1.0, 3))
    assert low < ratio < high and low < 1.0 < high  # unpaired noise: the interval spans the ratio and 1


def test_the_report_pairs_each_learned_router_with_every_other_one() -> None:
    prefix = [summary("least_prefill", rounds(1.0, 1)), summary("cache_aware", rounds(1.3, 1)),
              summary("ppo_live", rounds(0.9, 1))]
    lines = pooled_paired(prefix)
    rows = [line for line in lines if line.startswith("| ppo_live")]
    assert [row.split(" | ")[1] for row in rows] == ["least_prefill", "cache_aware"]  # best pooled p99 first
    assert "5/5" in rows[0] and "0.90x [0.90, 0.90]" in rows[0]
    assert pooled_paired(prefix[:2]) == []  # no learned router, no table
