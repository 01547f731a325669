"""``ReplicaSnapshot``: derived loads, assignment, validation."""

from __future__ import annotations

import numpy as np
import pytest

from schedulers.routing.snapshot import ReplicaSnapshot


@pytest.fixture
def crafted() -> ReplicaSnapshot:
    """Four replicas with distinct loads."""
    return ReplicaSnapshot.build(
        waiting=[0, 2, 1, 0],
        running=[5, 0, 2, 1],
        kv_blocks=[60, 10, 40, 90],
        prefill_tokens=[0, 3000, 100, 2000],
        decoded_tokens=[900, 0, 700, 50],
    )


def test_snapshot_helpers_and_validation(crafted):
    after = crafted.with_assignment(1, 700)
    assert after.waiting[1] == crafted.waiting[1] + 1
    assert after.prefill_tokens[1] == crafted.prefill_tokens[1] + 700
    assert after.waiting_prefill_tokens[1] == crafted.waiting_prefill_tokens[1] + 700
    assert crafted.waiting[1] == 2  # the original is unchanged
    assert np.allclose(crafted.kv_fraction, np.array([60, 10, 40, 90]) / 1000)
    with pytest.raises(ValueError, match="expected shape"):
        ReplicaSnapshot.build(waiting=[1, 2], running=[1, 2, 3])
    with pytest.raises(TypeError, match="unknown snapshot fields"):
        ReplicaSnapshot.build(waiting=[1], future_output=[3])
