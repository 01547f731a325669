"""The load-aware and Vidur policies (schedulers/routing/policies/load.py, vidur.py) on crafted replica
states: each rule, tie-breaking, seeding."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from schedulers.routing.policies.load import jsq, least_kv, least_prefill, least_tokens, power_of_two
from schedulers.routing.policies.vidur import lor, random_choice, round_robin
from schedulers.routing.policy import make_policy, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot
from schedulers.routing.ties import argmin_random


@pytest.fixture
def crafted() -> ReplicaSnapshot:
    """Four replicas on which each heuristic has a different unique answer."""
    return ReplicaSnapshot.build(
        waiting=[0, 2, 1, 0],
        running=[5, 0, 2, 1],  # outstanding requests [5, 2, 3, 1] -> jsq: 3
        kv_blocks=[60, 10, 40, 90],  # least_kv: 1
        prefill_tokens=[0, 3000, 100, 2000],  # least_prefill: 0
        decoded_tokens=[900, 0, 700, 50],  # outstanding tokens [900, 3000, 800, 2050] -> least_tokens: 2
    )


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_each_heuristic_on_a_crafted_state(crafted):
    assert jsq(crafted, rng()) == 3
    assert least_kv(crafted, rng()) == 1
    assert least_tokens(crafted, rng()) == 2
    assert least_prefill(crafted, rng()) == 0
    assert lor(crafted) == 0  # waiting [0, 2, 1, 0]: tie between 0 and 3 goes to the lowest index
    assert [round_robin(k, 4) for k in range(6)] == [0, 1, 2, 3, 0, 1]
    policies = {name: make_policy(name, seed=0) for name in ("round_robin", "jsq", "least_kv")}
    for policy in policies.values():
        policy.decisions = 5  # the sixth decision of the episode
    assert {name: policy.decide(crafted) for name, policy in policies.items()} == {
        "round_robin": 1,
        "jsq": 3,
        "least_kv": 1,
    }


def test_least_tokens_counts_generated_output_not_future_output():
    # replica 0: a long prompt still to prefill; replica 1: many tokens already generated
    snap = ReplicaSnapshot.build(prefill_tokens=[1500, 0], decoded_tokens=[0, 1600])
    assert least_tokens(snap, rng()) == 0
    assert least_prefill(snap, rng()) == 1
    assert np.array_equal(snap.outstanding_tokens, [1500, 1600])


def test_ties_are_broken_uniformly_and_reproducibly():
    snap = ReplicaSnapshot.build(waiting=[1, 0, 1, 0], running=[0, 1, 0, 1], kv_blocks=[5, 9, 5, 5])
    picks = Counter(jsq(snap, g) for g in [rng(7)] for _ in range(4000))
    assert set(picks) == {0, 1, 2, 3} and all(abs(c / 4000 - 0.25) < 0.03 for c in picks.values())
    kv = Counter(least_kv(snap, g) for g in [rng(7)] for _ in range(3000))
    assert set(kv) == {0, 2, 3} and all(abs(c / 3000 - 1 / 3) < 0.04 for c in kv.values())
    g1, g2 = rng(3), rng(3)
    assert [jsq(snap, g1) for _ in range(50)] == [jsq(snap, g2) for _ in range(50)]
    unique = ReplicaSnapshot.build(waiting=[3, 2, 1, 4])
    assert all(argmin_random(unique.waiting, rng(s)) == 2 for s in range(20))


def test_power_of_two_picks_the_less_loaded_of_a_random_pair():
    snap = ReplicaSnapshot.build(waiting=[0, 1, 2, 3])
    g = rng(11)
    counts = Counter(power_of_two(snap, g) for _ in range(6000))
    # pairs {0,x}: 3 of 6 -> 0 wins half the time; {1,2},{1,3}: 1/3; {2,3}: 1/6; 3 never wins
    assert counts[3] == 0
    for replica, share in ((0, 1 / 2), (1, 1 / 3), (2, 1 / 6)):
        assert abs(counts[replica] / 6000 - share) < 0.03
    assert power_of_two(ReplicaSnapshot.build(waiting=[9, 0]), rng()) == 1
    assert power_of_two(ReplicaSnapshot.build(waiting=[4]), rng()) == 0


def test_random_choice_is_uniform_and_seeded():
    g = rng(5)
    counts = Counter(random_choice(3, g) for _ in range(3000))
    assert set(counts) == {0, 1, 2} and all(abs(c / 3000 - 1 / 3) < 0.04 for c in counts.values())
    assert [random_choice(3, rng(1)) for _ in range(5)] == [random_choice(3, rng(1)) for _ in range(5)]


def test_unknown_policy_and_the_names_list(crafted):
    with pytest.raises(ValueError, match="unknown router 'fastest'"):
        make_policy("fastest")
    assert {"round_robin", "random", "lor", "jsq", "least_kv", "least_tokens", "least_prefill",
            "power_of_two"} <= set(policy_names())
