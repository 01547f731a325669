"""``ray_prefix_affinity`` (schedulers/routing/policies/ray_prefix.py): Ray Serve LLM's
``PrefixCacheAffinityRouter`` rule on constructed snapshots: imbalance -> power of two choices,
a long enough match -> the matching replica, a short one -> the smallest prefix tree."""

from __future__ import annotations

import pytest

from schedulers.routing.policies.ray_prefix import RayPrefixAffinityParams
from schedulers.routing.policy import make_policy, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


def picks(spec: str, snapshot: ReplicaSnapshot, seeds=range(40)) -> set[int]:
    """The replicas the policy named by ``spec`` picks over ``seeds``."""
    return {make_policy(spec, seed=s).decide(snapshot) for s in seeds}


def test_defaults_are_rays_and_the_name_is_a_router_everywhere() -> None:
    assert RayPrefixAffinityParams() == RayPrefixAffinityParams(float("inf"), 0.1)
    assert "ray_prefix_affinity" in policy_names(simulated=False)
    spec = "ray_prefix_affinity:imbalanced_threshold=2:match_rate_threshold=0.5"
    assert make_policy(spec).params == RayPrefixAffinityParams(2.0, 0.5)


def test_imbalance_routes_by_load_with_two_replicas() -> None:
    # replica 0 holds the whole prompt but carries 6 more requests than replica 1
    s = ReplicaSnapshot.build(waiting=[5, 0], running=[3, 2], prefix_match=[1.0, 0.0], prefix_blocks=[40, 10])
    assert picks("ray_prefix_affinity", s) == {0}  # Ray's default threshold (inf): never imbalanced
    assert picks("ray_prefix_affinity:imbalanced_threshold=8", s) == {0}  # a gap of 6 is not above 8
    assert picks("ray_prefix_affinity:imbalanced_threshold=4", s) == {1}  # 6 > 4: the less loaded


def test_imbalance_is_power_of_two_choices_not_the_global_least_loaded() -> None:
    s = ReplicaSnapshot.build(waiting=[9, 1, 4], prefix_match=[1.0, 0.0, 0.0])
    chosen = picks("ray_prefix_affinity:imbalanced_threshold=2", s, seeds=range(200))
    # pairs {0,1} and {1,2} give 1, the pair {0,2} gives 2; never the most loaded
    assert chosen == {1, 2}


def test_the_gap_must_exceed_the_threshold() -> None:
    s = ReplicaSnapshot.build(waiting=[3, 0], prefix_match=[0.9, 0.0])
    assert picks("ray_prefix_affinity:imbalanced_threshold=3", s) == {0}  # 3 is not above 3
    assert picks("ray_prefix_affinity:imbalanced_threshold=2.5", s) == {1}


def test_a_match_at_the_threshold_goes_to_the_matching_replica() -> None:
    s = ReplicaSnapshot.build(waiting=[2, 0, 0], prefix_match=[0.5, 0.2, 0.0], prefix_blocks=[90, 50, 5])
    assert picks("ray_prefix_affinity:match_rate_threshold=0.5", s) == {0}  # >= (Ray), not >
    assert picks("ray_prefix_affinity", s) == {0}


def test_a_low_match_goes_to_the_smallest_tree() -> None:
    s = ReplicaSnapshot.build(waiting=[0, 3, 5], prefix_match=[0.4, 0.1, 0.0], prefix_blocks=[50, 70, 10])
    assert picks("ray_prefix_affinity:match_rate_threshold=0.5", s) == {2}  # fewest cached blocks, though busiest
    assert picks("ray_prefix_affinity:match_rate_threshold=0.9", s) == {2}
    assert picks("ray_prefix_affinity", s) == {0}  # 0.4 >= 0.1: the match wins


def test_ties_among_candidates_go_to_the_shorter_queue_then_at_random() -> None:
    matched = ReplicaSnapshot.build(waiting=[4, 1, 0], prefix_match=[0.8, 0.8, 0.0])
    assert picks("ray_prefix_affinity", matched) == {1}
    small_trees = ReplicaSnapshot.build(waiting=[2, 2, 0], prefix_match=[0.0, 0.0, 0.0], prefix_blocks=[0, 0, 9])
    assert picks("ray_prefix_affinity", small_trees) == {0, 1}


@pytest.mark.parametrize("params", [{"imbalanced_threshold": -1.0}, {"match_rate_threshold": 1.5},
                                    {"match_rate_threshold": "high"}])
def test_bad_thresholds_are_named(params: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(params))):
        RayPrefixAffinityParams(**params)
