"""``ClusterTracker``: replica snapshots, completions, first tokens and in-system area from Vidur's objects."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from schedulers.routing.snapshot import ReplicaSnapshot

def _request(prompt: int, output: int, arrived_at: float = 0.0):
    from vidur.entities import Request

    return Request(arrived_at=arrived_at, num_prefill_tokens=prompt, num_decode_tokens=output)


def _replica(queue=(), allocated=None, blocks=0, capacity=1000, batches=0):
    return SimpleNamespace(
        _request_queue=list(queue),
        _allocation_map=dict(allocated or {}),
        _num_allocated_blocks=blocks,
        _cache_config=SimpleNamespace(num_blocks=capacity),
        _num_running_batches=batches,
    )


@pytest.mark.vidur
def test_tracker_snapshot_from_vidur_requests():
    from schedulers.sim.tracker import ClusterTracker

    waiting = _request(300, 50)  # queued on replica 0
    partial = _request(100, 10)  # replica 0: 40 of 100 prompt tokens processed
    partial._num_processed_tokens = 40
    decoding = _request(50, 999)  # replica 1: prefill done (+1 first token) and 4 more generated
    decoding._num_processed_tokens = 55
    decoding._is_prefill_complete = True
    restarted = _request(30, 20)  # replica 1: preempted after generating 8 tokens
    replicas = [
        _replica(queue=[waiting], allocated={partial.id: 7}, blocks=7, batches=1),
        _replica(queue=[restarted], allocated={decoding.id: 4}, blocks=4),
    ]
    tracker = ClusterTracker(replicas, recent_window_s=10.0)
    for req, replica in ((waiting, 0), (partial, 0), (decoding, 1), (restarted, 1)):
        tracker.assign(req, replica)
    restarted._num_processed_tokens = 38
    restarted.restart()  # Vidur folds the 38 processed tokens into the prompt
    snap = tracker.snapshot()
    assert list(snap.waiting) == [1, 1] and list(snap.running) == [1, 1]
    assert list(snap.kv_blocks) == [7, 4] and list(snap.busy) == [1, 0]
    assert list(snap.prefill_tokens) == [300 + 60, 0 + 38]
    assert list(snap.decoded_tokens) == [0, 5 + 8]
    assert list(snap.waiting_prefill_tokens) == [300, 38]
    # the future output length is never read
    for req in (waiting, partial, decoding, restarted):
        req._num_decode_tokens += 1000
    again = tracker.snapshot()
    for name in ReplicaSnapshot.__dataclass_fields__:
        assert np.array_equal(getattr(again, name), getattr(snap, name)), name


@pytest.mark.vidur
def test_tracker_completions_first_tokens_and_area():
    from schedulers.sim.tracker import ClusterTracker

    a, b = _request(10, 5, arrived_at=1.0), _request(10, 5, arrived_at=2.0)
    tracker = ClusterTracker([_replica(), _replica()], recent_window_s=5.0)
    tracker.sync(1.0)
    tracker.assign(a, 0)
    tracker.sync(2.0)
    tracker.assign(b, 1)
    a._prefill_completed_at, a._completed, a._completed_at = 2.5, True, 3.0
    b._prefill_completed_at = 3.5
    result = tracker.sync(4.0)
    assert result.completed == [a] and result.first_tokens == [a, b]
    assert result.dt == 2.0
    assert result.in_system_area == pytest.approx((3.0 - 2.0) + (4.0 - 2.0))
    assert tracker.in_system == 1 and tracker.num_completed == 1
    assert list(tracker.snapshot().recent_completions) == [1, 0]
    assert list(tracker.recent_ttft) == [(2.5, 1.5), (3.5, 1.5)]
    tracker.sync(8.5)  # a completed at 3.0, now outside the 5 s window
    assert list(tracker.snapshot().recent_completions) == [0, 0]
    assert not tracker.recent_e2e
