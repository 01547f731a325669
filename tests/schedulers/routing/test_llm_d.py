"""``llm_d_default`` (schedulers/routing/policies/llm_d.py): llm-d's router with no configuration, its three
scorers normalized as llm-d computes them, weighted 2/2/3, the highest score taken, ties at random."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulers.routing.policies.llm_d import LlmDDefaultParams, llm_d_scores, queue_scores
from schedulers.routing.policy import make_policy
from schedulers.routing.snapshot import ReplicaSnapshot


def picks(snapshot: ReplicaSnapshot, name: str = "llm_d_default", seeds=range(40)) -> set[int]:
    return {make_policy(name, seed=s).decide(snapshot) for s in seeds}


def test_the_default_weights_are_llm_ds():
    assert LlmDDefaultParams() == LlmDDefaultParams(queue_weight=2, kv_cache_weight=2, prefix_weight=3)


def test_the_queue_score_is_min_max_normalized_waiting_and_neutral_when_all_wait_alike():
    np.testing.assert_allclose(queue_scores(np.array([0.0, 2.0, 4.0])), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(queue_scores(np.array([3.0, 3.0])), [1.0, 1.0])
    np.testing.assert_allclose(queue_scores(np.array([5.0, 9.0])), [1.0, 0.0])  # running requests do not count


def test_the_weighted_score_of_each_replica():
    snap = ReplicaSnapshot.build(waiting=[4, 0, 2], running=[9, 0, 0], kv_blocks=[900, 0, 500],
                                 kv_capacity=[1000, 1000, 1000], prefix_match=[1.0, 0.0, 0.5])
    # queue [0, 1, 0.5], KV free [0.1, 1, 0.5], prefix [1, 0, 0.5]
    np.testing.assert_allclose(llm_d_scores(snap), [2 * 0 + 2 * 0.1 + 3 * 1.0, 2 + 2, 2 * 0.5 + 2 * 0.5 + 3 * 0.5])
    assert picks(snap) == {1}  # 4.0 beats the cache holder's 3.2
    assert picks(snap, "llm_d_default:prefix_weight=5") == {0}  # 5.2 now


def test_scores_are_clamped_to_the_unit_range_as_llm_d_enforces():
    over = ReplicaSnapshot.build(waiting=[0, 0], kv_blocks=[1500, 0], kv_capacity=[1000, 1000],
                                 prefix_match=[1.0, 0.0])
    np.testing.assert_allclose(llm_d_scores(over), [2 + 0 + 3, 2 + 2 + 0])  # KV use past 100%: score 0, not -1


def test_ties_are_broken_at_random():
    snap = ReplicaSnapshot.build(waiting=[1, 1, 3], kv_blocks=[100, 100, 100], prefix_match=[0.5, 0.5, 0.5])
    assert picks(snap) == {0, 1}


def test_weights_are_parameters_checked_like_any_other():
    with pytest.raises(ValueError, match="queue_weight: expected a number >= 0"):
        make_policy("llm_d_default:queue_weight=-1")
    assert make_policy("llm_d_default", kv_cache_weight=0).params == LlmDDefaultParams(kv_cache_weight=0)


@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0, 5000), st.floats(0, 2000), st.floats(0, 1)),
                min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_the_plain_python_scores_are_the_numpy_formulas_to_the_bit(replicas):
    """The scores a decision computes over lists equal llm-d's formulas written in NumPy over the
    snapshot's arrays (the queue scorer's min-max, ``kv_fraction``, the clamps), bit for bit."""
    waiting, kv_blocks, capacity, match = (np.array(v, dtype=float) for v in zip(*replicas, strict=True))
    snap = ReplicaSnapshot.build(waiting=waiting, kv_blocks=kv_blocks, kv_capacity=capacity, prefix_match=match)
    spread = waiting.max() - waiting.min()
    queue = np.ones(len(waiting)) if spread == 0 else (waiting.max() - waiting) / spread
    expected = 2 * np.clip(queue, 0, 1) + 2 * np.clip(1 - snap.kv_fraction, 0, 1) + 3 * np.clip(match, 0, 1)
    assert llm_d_scores(snap).tolist() == expected.tolist()
