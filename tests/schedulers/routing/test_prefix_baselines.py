"""The industry's prefix-cache routers (schedulers/routing/policies/prefix.py): their decision rules on
constructed snapshots, and their parameters."""

from __future__ import annotations

import pytest

from schedulers.routing.policies.prefix import AffinityTokenLoadParams, CacheAwareParams
from schedulers.routing.policy import make_policy, parse_router_spec, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


def snap(**fields) -> ReplicaSnapshot:
    return ReplicaSnapshot.build(**fields)


def picks(name: str, snapshot: ReplicaSnapshot, seeds=range(30), prompt_tokens: float = 0.0, **params) -> set[int]:
    """The replicas policy ``name`` (with ``params``) picks over ``seeds``."""
    return {make_policy(name, seed=s, **params).decide(snapshot, prompt_tokens) for s in seeds}


def test_both_are_router_names_everywhere() -> None:
    assert {"cache_aware", "affinity_token_load"} <= set(policy_names(simulated=False))
    assert make_policy("cache_aware").name == "cache_aware"
    assert CacheAwareParams() == CacheAwareParams(0.3, 64, 1.5)  # SGLang's defaults


def test_cache_aware_follows_the_longest_match_while_load_is_balanced() -> None:
    s = snap(waiting=[30, 0, 0], running=[10, 0, 0], prefix_match=[0.8, 0.2, 0.0])
    # 40 vs 0 in flight is a gap under 64 requests: still "balanced" for SGLang's defaults
    assert picks("cache_aware", s) == {0}
    # the same gap with a threshold of 8 is imbalanced: the least loaded (1 or 2) wins
    assert picks("cache_aware", s, balance_abs_threshold=8) == {1, 2}


def test_cache_aware_needs_both_gaps_to_call_load_imbalanced() -> None:
    s = snap(waiting=[100, 80], prefix_match=[0.9, 0.0])
    assert picks("cache_aware", s, balance_abs_threshold=8) == {0}  # 100 < 1.5 x 80: not imbalanced
    assert picks("cache_aware", s, balance_abs_threshold=8, balance_rel_threshold=1.2) == {1}


def test_cache_aware_below_the_match_threshold_goes_to_the_smallest_tree() -> None:
    s = snap(waiting=[0, 3, 5], prefix_match=[0.3, 0.1, 0.0], prefix_blocks=[50, 70, 10])
    assert picks("cache_aware", s) == {2}  # 0.3 is not above 0.3; replica 2 has cached least
    assert picks("cache_aware", s, cache_threshold=0.25) == {0}


def test_affinity_token_load_sticks_to_the_prefix_until_the_replica_saturates() -> None:
    busy_holder = snap(waiting=[4, 0], prefill_tokens=[3000, 0], prefix_match=[0.9, 0.0], kv_capacity=[100, 100])
    assert picks("affinity_token_load", busy_holder, prompt_tokens=500) == {0}  # sticky despite 3000 queued tokens
    saturated = snap(waiting=[5, 0], prefill_tokens=[3000, 0], prefix_match=[0.9, 0.0], kv_capacity=[100, 100])
    assert picks("affinity_token_load", saturated, prompt_tokens=500) == {1}  # 5 waiting: saturated
    full_kv = snap(waiting=[0, 0], kv_blocks=[80, 0], kv_capacity=[100, 100], prefix_match=[0.9, 0.0],
                   prefill_tokens=[1000, 100])
    assert picks("affinity_token_load", full_kv, prompt_tokens=500) == {1}  # 80% of its KV cache in use
    assert picks("affinity_token_load", saturated, prompt_tokens=500, queue_threshold=10) == {0}


def test_affinity_token_load_scores_uncached_prompt_tokens_in_flight() -> None:
    # nobody holds the prefix: least uncached tokens in flight plus the new prompt's uncached part
    s = snap(prefill_tokens=[100, 300, 50], prefix_match=[0.0, 0.0, 0.0])
    assert picks("affinity_token_load", s, prompt_tokens=200) == {2}
    # two replicas hold the same longest prefix: the less loaded of them, not the emptiest overall
    s = snap(prefill_tokens=[900, 400, 0], prefix_match=[0.5, 0.5, 0.1])
    assert picks("affinity_token_load", s, prompt_tokens=200) == {1}
    assert picks("affinity_token_load", s, prompt_tokens=200, min_match=0.6) == {2}


def test_parameters_are_checked_and_travel_with_the_router_name() -> None:
    assert parse_router_spec("cache_aware:balance_abs_threshold=8:cache_threshold=0.5") == (
        "cache_aware", {"balance_abs_threshold": 8.0, "cache_threshold": 0.5})
    policy = make_policy("affinity_token_load:queue_threshold=2")
    assert (policy.name, policy.params) == ("affinity_token_load:queue_threshold=2",
                                            AffinityTokenLoadParams(queue_threshold=2.0))
    assert make_policy("cache_aware", balance_abs_threshold=8).params == CacheAwareParams(balance_abs_threshold=8)
    with pytest.raises(ValueError, match="balance_abs_threshold: expected a number >= 0"):
        make_policy("cache_aware", balance_abs_threshold=-1)
    s = snap(waiting=[30, 0], prefix_match=[0.8, 0.0])
    assert make_policy("cache_aware", seed=0, balance_abs_threshold=8).decide(s) == 1
    for spec, message in [
        ("cache_aware:cache_treshold=0.5", r"key among cache_threshold, balance_abs_threshold"),
        ("cache_aware:cache_threshold=2", r"cache_threshold: expected a number >= 0 and <= 1, got 2"),
        ("cache_aware:cache_threshold=high", r"cache_threshold: expected a number, got 'high'"),
        ("jsq:x=1", r"jsq takes no parameters; only cache_aware, affinity_token_load, llm_d_default do"),
        ("cache_aware:cache_threshold=0.5:cache_threshold=0.9", r"cache_threshold is given twice"),
        ("affinity_token_load:kv_threshold=nan", r"kv_threshold: expected a number"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_router_spec(spec)
    with pytest.raises(ValueError, match="router 'jsq' is a heuristic: expected no checkpoint or options, got x"):
        make_policy("jsq", x=1)
    assert AffinityTokenLoadParams().queue_threshold == 5
