"""``StateStore``: calls from several threads are each counted (its lock), and the state's
fingerprint holds what decides the reward's meaning, not where a remote scorer lives."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from rewardkit import RewardComposer

CHEAP = {"version": 1, "components": {
    "speed": {"type": "throughput_sigmoid", "params": {"target": 0.05, "scale": 0.05},
              "normalize": {"type": "running_zscore"}},
    "late": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "weight": -0.5,
             "normalize": {"type": "running_zscore"}},
}}


def hammer(call: Any, threads: int = 8, calls: int = 10) -> None:
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        for _ in range(calls):
            call()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)


@pytest.mark.parametrize("batched", [True, False])
def test_calls_from_several_threads_are_each_counted(batched: bool) -> None:
    composer = RewardComposer.from_dict(CHEAP)
    if batched:
        ctx = {"throughput": np.array([0.01, 0.09]), "latency": np.array([0.5, 2.0])}
        hammer(lambda: composer(ctx), calls=10)
        expected = 8 * 10 * 2
    else:
        ctx = {"throughput": 0.01, "latency": 2.0}
        hammer(lambda: composer(ctx), calls=2000)
        expected = 8 * 2000
    assert composer.step == expected
    state = composer.state_dict()
    assert state["normalizers"]["speed"]["count"] == expected
    assert state["normalizers"]["late"]["count"] == expected
