"""SGLang gateway's ``least_load`` (schedulers/routing/policies/least_load.py): the expected-wait score on
constructed snapshots, its defaults and its parameters."""

from __future__ import annotations

import pytest

from schedulers.routing.policies.least_load import LeastLoad, LeastLoadParams, least_load_scores
from schedulers.routing.policy import make_policy, policy_class, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


def picks(spec: str, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, seeds=range(30)) -> set[int]:
    """The replicas router ``spec`` picks over ``seeds``."""
    return {make_policy(spec, seed=s).decide(snapshot, prompt_tokens) for s in seeds}


def test_it_is_a_live_router_name_with_smgs_defaults() -> None:
    assert "least_load" in policy_names(simulated=False)
    assert policy_class("least_load") is LeastLoad
    p = make_policy("least_load").params
    assert p == LeastLoadParams() == LeastLoad().params
    assert (p.kv_pressure_weight, p.default_throughput, p.mean_prefill_tokens, p.measured_throughput) == (
        0.15, 2000.0, 1024.0, 1.0)


def test_the_score_is_queued_tokens_over_throughput_plus_the_kv_barrier() -> None:
    s = ReplicaSnapshot.build(waiting_prefill_tokens=[4000, 1000], waiting=[2, 1], tokens_per_s=[0, 500],
                              kv_blocks=[500, 800], kv_capacity=[1000, 1000])
    # replica 0 reports no rate: 4000 / 2000 + 0.15 x 0.5 / 0.5; replica 1: 1000 / 500 + 0.15 x 0.8 / 0.2
    assert least_load_scores(s) == pytest.approx([2.15, 2.6])
    assert picks("least_load", s) == {0}
    # a weight of 0 leaves drain time alone: both 2.0, a tie broken at random
    assert least_load_scores(s, LeastLoadParams(kv_pressure_weight=0.0)) == pytest.approx([2.0, 2.0])
    assert picks("least_load:kv_pressure_weight=0", s) == {0, 1}
    # the barrier is evaluated at k = 0.999 at most, so a full cache costs 0.15 x 999 s, not infinity
    full = ReplicaSnapshot.build(kv_blocks=[1000, 2000], kv_capacity=[1000, 1000])
    assert least_load_scores(full) == pytest.approx([149.85, 149.85])


def test_waiting_requests_without_token_counts_count_the_mean_prefill() -> None:
    # replica 0: 3 waiting requests whose tokens nobody reported, 3 x 1024 / 2000 = 1.536 s; replica 1: 2.5 s
    s = ReplicaSnapshot.build(waiting=[3, 1], waiting_prefill_tokens=[0, 5000])
    assert least_load_scores(s) == pytest.approx([1.536, 2.5])
    assert picks("least_load", s) == {0}
    assert picks("least_load:mean_prefill_tokens=2048", s) == {1}  # 3.072 s


def test_the_measured_rate_or_the_default_for_every_replica() -> None:
    s = ReplicaSnapshot.build(waiting_prefill_tokens=[4000, 1000], tokens_per_s=[4000, 100])
    assert least_load_scores(s) == pytest.approx([1.0, 10.0])  # each replica's own rate
    assert picks("least_load", s) == {0}
    assert least_load_scores(s, LeastLoadParams(measured_throughput=0)) == pytest.approx([2.0, 0.5])
    assert picks("least_load:measured_throughput=0", s) == {1}
    assert least_load_scores(s, LeastLoadParams(measured_throughput=0, default_throughput=500)) == pytest.approx([8.0, 2.0])


def test_the_arriving_prompt_does_not_change_the_choice() -> None:
    s = ReplicaSnapshot.build(waiting_prefill_tokens=[100, 200])
    assert picks("least_load", s, prompt_tokens=0) == picks("least_load", s, prompt_tokens=10**6) == {0}


def test_bad_parameters_name_the_key() -> None:
    for spec, message in [
        ("least_load:kv_pressure_weight=-1", r"kv_pressure_weight: expected a number >= 0, got -1"),
        ("least_load:default_throughput=0", r"default_throughput: expected a number >= 1e-09, got 0"),
        ("least_load:mean_prefill_tokens=0.5", r"mean_prefill_tokens: expected a number >= 1, got 0.5"),
        ("least_load:measured_throughput=0.5", r"measured_throughput: expected 0 or 1, got 0.5"),
        ("least_load:lambda=0.3", r"expected key=value with a key among kv_pressure_weight, default_throughput"),
    ]:
        with pytest.raises(ValueError, match=message):
            make_policy(spec)
