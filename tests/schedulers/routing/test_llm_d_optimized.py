"""llm-d's optimized baseline (schedulers/routing/policies/llm_d_optimized.py): the prefix-cache affinity filter
at its current defaults, then the token-load scorer, on constructed snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from schedulers.routing.policies.llm_d_optimized import LlmDOptimized, LlmDOptimizedParams
from schedulers.routing.policies.prefix import AffinityTokenLoadParams
from schedulers.routing.policy import make_policy, parse_router_spec, policy_class, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


def picks(spec: str, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, seeds=range(30)) -> set[int]:
    """The replicas router ``spec`` picks over ``seeds``."""
    return {make_policy(spec, seed=s).decide(snapshot, prompt_tokens) for s in seeds}


def test_it_is_a_live_router_name_with_llm_ds_current_defaults() -> None:
    assert "llm_d_optimized" in policy_names(simulated=False)
    assert policy_class("llm_d_optimized") is LlmDOptimized
    p = make_policy("llm_d_optimized").params
    assert p == LlmDOptimizedParams() == LlmDOptimized().params
    assert (p.affinity_threshold, p.exploration_probability, p.max_ttft_penalty_ms) == (0.80, 0.0, 18000.0)
    assert (p.peak_prefill_tokens_per_s, p.queue_threshold_tokens) == (15928.0, 4194304.0)
    # the README-example values stay with affinity_token_load: the two differ in those two defaults only
    old = AffinityTokenLoadParams()
    assert (old.exploration_probability, old.max_ttft_penalty_ms) == (0.01, 5000.0)
    assert (old.affinity_threshold, old.peak_prefill_tokens_per_s, old.queue_threshold_tokens) == (
        p.affinity_threshold, p.peak_prefill_tokens_per_s, p.queue_threshold_tokens)


def test_the_ttft_gate_opens_past_18_s_of_estimated_prefill() -> None:
    # 100,000 tokens in flight: 6,278 ms at 15,928 tokens/s, past the old 5,000 ms but far under 18,000
    holder = ReplicaSnapshot.build(prefill_tokens=[100_000, 0], prefix_match=[1.0, 0.0])
    assert picks("llm_d_optimized", holder, prompt_tokens=500) == {0}
    assert picks("affinity_token_load:exploration_probability=0", holder, prompt_tokens=500) == {1}
    # 286,000 tokens: 17,956 ms, still sticky; 288,000 tokens: 18,081 ms, the gate opens to every replica
    # and the least token load (the idle replica) wins
    assert picks("llm_d_optimized", ReplicaSnapshot.build(prefill_tokens=[286_000, 0], prefix_match=[1.0, 0.0]), 500) == {0}
    assert picks("llm_d_optimized", ReplicaSnapshot.build(prefill_tokens=[288_000, 0], prefix_match=[1.0, 0.0]), 500) == {1}
    # the estimate is tokens in flight over the peak prefill rate: at half the rate 150,000 tokens is 18,835 ms
    slow = ReplicaSnapshot.build(prefill_tokens=[150_000, 0], prefix_match=[1.0, 0.0])
    assert picks("llm_d_optimized:peak_prefill_tokens_per_s=7964", slow, 500) == {1}
    assert picks("llm_d_optimized:max_ttft_penalty_ms=0", ReplicaSnapshot.build(
        prefill_tokens=[10**7, 0], prefix_match=[1.0, 0.0]), 500) == {0}  # 0: always stick


def test_it_never_explores_by_default() -> None:
    s = ReplicaSnapshot.build(prefill_tokens=[5000, 0], prefix_match=[1.0, 0.0])
    policy = make_policy("llm_d_optimized", seed=0)
    assert {policy.decide(s, 100) for _ in range(5000)} == {0}
    old = make_policy("affinity_token_load", seed=0)
    assert 0 < np.mean([old.decide(s, 100) for _ in range(5000)]) < 0.03  # 1 % explores to the idle replica


def test_the_token_load_scorer_counts_the_uncached_prompt_and_caps_at_the_threshold() -> None:
    # nobody at 0.80: the least of prompt tokens in flight + the prompt's uncached tokens, 300 + 2000 x 0.25 < 2000
    s = ReplicaSnapshot.build(prefill_tokens=[300, 0], prefix_match=[0.75, 0.0])
    assert picks("llm_d_optimized", s, prompt_tokens=2000) == {0}
    assert picks("llm_d_optimized", s, prompt_tokens=200) == {1}  # 300 + 50 > 200
    # two sticky replicas: the less loaded of them, not the idle non-sticky one
    two = ReplicaSnapshot.build(prefill_tokens=[900, 400, 0], prefix_match=[0.8, 1.0, 0.0])
    assert picks("llm_d_optimized", two, prompt_tokens=200) == {1}
    # loads past queueThresholdTokens all score 0: a tie, broken at random as the max-score picker shuffles
    full = ReplicaSnapshot.build(prefill_tokens=[5_000_000, 6_000_000])
    assert picks("llm_d_optimized", full, prompt_tokens=100) == {0, 1}
    assert picks("llm_d_optimized:queue_threshold_tokens=10000000", full, prompt_tokens=100) == {0}


def test_bad_parameters_name_the_key() -> None:
    assert parse_router_spec("llm_d_optimized:affinity_threshold=0.65") == ("llm_d_optimized", {"affinity_threshold": 0.65})
    for spec, message in [
        ("llm_d_optimized:exploration_probability=2", r"exploration_probability: expected a number >= 0 and <= 1, got 2"),
        ("llm_d_optimized:max_ttft_penalty_ms=-1", r"max_ttft_penalty_ms: expected a number >= 0, got -1"),
        ("llm_d_optimized:peak_prefill_tokens_per_s=0", r"peak_prefill_tokens_per_s: expected a number >= 1e-09"),
        ("llm_d_optimized:affinity=0.5", r"expected key=value with a key among affinity_threshold, exploration_probability"),
    ]:
        with pytest.raises(ValueError, match=message):
            make_policy(spec)
