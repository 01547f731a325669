"""The industry's prefix-cache routers (schedulers/routing/policies/prefix.py): their decision rules on
constructed snapshots, and their parameters."""

from __future__ import annotations

import numpy as np
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


def test_affinity_token_load_has_llm_ds_affinity_filter_settings() -> None:
    p = AffinityTokenLoadParams()
    assert (p.affinity_threshold, p.exploration_probability, p.max_ttft_penalty_ms) == (0.80, 0.01, 5000.0)
    assert (p.peak_prefill_tokens_per_s, p.queue_threshold_tokens) == (15928.0, 4194304.0)


def test_affinity_token_load_sticks_to_replicas_that_cached_at_least_the_threshold() -> None:
    no_explore = {"exploration_probability": 0.0}
    busy_holder = snap(waiting=[9, 0, 0], prefill_tokens=[3000, 0, 0], prefix_match=[0.9, 0.5, 0.0])
    # 3,000 queued tokens is ~188 ms of prefill at 15,928 tokens/s: far under the 5,000 ms penalty
    assert picks("affinity_token_load", busy_holder, prompt_tokens=500, **no_explore) == {0}
    # a match of 0.79 is under the threshold: nobody is sticky, the least token load wins
    weak = snap(prefill_tokens=[3000, 0, 0], prefix_match=[0.79, 0.5, 0.0])
    assert picks("affinity_token_load", weak, prompt_tokens=500, **no_explore) == {1}  # 250 uncached vs 500
    # two sticky replicas: the less loaded of them, not the emptiest overall
    two = snap(prefill_tokens=[900, 400, 0], prefix_match=[0.8, 1.0, 0.0])
    assert picks("affinity_token_load", two, prompt_tokens=200, **no_explore) == {1}


def test_affinity_token_load_drops_stickiness_when_the_holders_ttft_is_5_s_worse() -> None:
    no_explore = {"exploration_probability": 0.0}
    # 100,000 queued tokens at 15,928 tokens/s: ~6,278 ms more than the idle replica
    swamped = snap(prefill_tokens=[100_000, 0], prefix_match=[1.0, 0.0])
    assert picks("affinity_token_load", swamped, prompt_tokens=500, **no_explore) == {1}
    # ~4,395 ms worse stays sticky; a larger penalty or 0 (always stick) keeps it too
    loaded = snap(prefill_tokens=[70_000, 0], prefix_match=[1.0, 0.0])
    assert picks("affinity_token_load", loaded, prompt_tokens=500, **no_explore) == {0}
    assert picks("affinity_token_load", swamped, prompt_tokens=500, max_ttft_penalty_ms=0, **no_explore) == {0}
    assert picks("affinity_token_load", swamped, prompt_tokens=500, peak_prefill_tokens_per_s=40000, **no_explore) == {0}


def test_affinity_token_load_explores_with_its_probability() -> None:
    s = snap(prefill_tokens=[5000, 0], prefix_match=[1.0, 0.0])
    policy = make_policy("affinity_token_load", seed=0)
    share = np.mean([policy.decide(s, 100) for _ in range(20000)])
    assert 0.006 < share < 0.014  # 1 % of decisions skip the filter and go to the idle replica
    everyone = make_policy("affinity_token_load:exploration_probability=1", seed=0)
    assert {everyone.decide(s, 100) for _ in range(50)} == {1}


def test_parameters_are_checked_and_travel_with_the_router_name() -> None:
    assert parse_router_spec("cache_aware:balance_abs_threshold=8:cache_threshold=0.5") == (
        "cache_aware", {"balance_abs_threshold": 8.0, "cache_threshold": 0.5})
    policy = make_policy("affinity_token_load:affinity_threshold=0.5")
    assert (policy.name, policy.params) == ("affinity_token_load:affinity_threshold=0.5",
                                            AffinityTokenLoadParams(affinity_threshold=0.5))
    assert make_policy("cache_aware", balance_abs_threshold=8).params == CacheAwareParams(balance_abs_threshold=8)
    with pytest.raises(ValueError, match="balance_abs_threshold: expected a number >= 0"):
        make_policy("cache_aware", balance_abs_threshold=-1)
    s = snap(waiting=[30, 0], prefix_match=[0.8, 0.0])
    assert make_policy("cache_aware", seed=0, balance_abs_threshold=8).decide(s) == 1
    for spec, message in [
        ("cache_aware:cache_treshold=0.5", r"key among cache_threshold, balance_abs_threshold"),
        ("cache_aware:cache_threshold=2", r"cache_threshold: expected a number >= 0 and <= 1, got 2"),
        ("cache_aware:cache_threshold=high", r"cache_threshold: expected a number, got 'high'"),
        ("jsq:x=1", r"jsq takes no parameters; only cache_aware, affinity_token_load, llm_d_default, ray_prefix_affinity, "
                    r"llm_d_optimized, least_load, dynamo_kv do"),
        ("cache_aware:cache_threshold=0.5:cache_threshold=0.9", r"cache_threshold is given twice"),
        ("affinity_token_load:exploration_probability=nan", r"exploration_probability: expected a number"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_router_spec(spec)
    with pytest.raises(ValueError, match="router 'jsq' is a heuristic: expected no checkpoint or options, got x"):
        make_policy("jsq", x=1)
