"""The routing seam: ``make_policy`` is the one place a router name is checked; ``register_policy`` adds one."""

from __future__ import annotations

import numpy as np
import pytest

from schedulers.routing.policy import HeuristicPolicy, Policy, make_policy, policy_names, register_policy
from schedulers.routing.snapshot import ReplicaSnapshot


def test_heuristics_are_policies_by_name_and_reset_reproduces_them():
    router = make_policy("power_of_two", seed=5)
    assert isinstance(router, HeuristicPolicy) and isinstance(router, Policy) and router.observation is None
    snap = ReplicaSnapshot.build(waiting=[1, 1, 1, 1])
    first = [router.decide(snap) for _ in range(20)]
    router.reset(5)
    assert [router.decide(snap) for _ in range(20)] == first and len(set(first)) > 1
    rr = make_policy("round_robin")
    assert [rr.decide(snap) for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    rr.reset(0)
    assert rr.decide(snap) == 0
    assert "ppo" in policy_names() and "oracle" not in policy_names(simulated=False)


def test_the_oracle_says_it_needs_true_speeds():
    oracle = make_policy("oracle")
    assert oracle.needs_true_speed
    snap = ReplicaSnapshot.build(prefill_tokens=[100, 100])
    assert oracle.decide(snap, 10, true_speed=np.array([0.1, 1.0])) == 1
    with pytest.raises(ValueError, match="true current speeds"):
        oracle.decide(snap, 10)


def test_registered_policies_and_bad_names():
    class Fixed(Policy):
        name = "fixed"

        def __init__(self, replica):
            self.replica = replica

        def decide(self, snapshot, prompt_tokens=0.0, *, rows=None, true_speed=None):
            return self.replica

    register_policy("fixed_test", Fixed, replace=True)
    assert make_policy("fixed_test", replica=1).decide(None) == 1
    with pytest.raises(ValueError, match="unknown router 'nope'; expected one of: round_robin"):
        make_policy("nope")
    with pytest.raises(ValueError, match="router 'jsq' is a heuristic: expected no checkpoint or options, got checkpoint"):
        make_policy("jsq", checkpoint="x")
    with pytest.raises(ValueError, match="router 'ppo' needs a checkpoint"):
        make_policy("ppo")
    with pytest.raises(ValueError, match="only the simulator knows"):
        make_policy("oracle", simulated=False)
    with pytest.raises(ValueError, match="a policy is already registered under 'jsq'"):
        register_policy("jsq", Fixed)
