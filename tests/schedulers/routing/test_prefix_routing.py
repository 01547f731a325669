"""Prefix-cache-aware routing: the router's prefix index, the prefix_aware heuristic, the opt-in observation feature."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from schedulers.routing.policies.load import jsq
from schedulers.routing.policies.prefix import load_imbalanced, prefix_aware
from schedulers.routing.observation import (
    FEATURE_NAMES,
    ObservationConfig,
    build_observation,
    feature_names,
    observation_bounds,
)
from schedulers.routing.prefix_index import PrefixIndex
from schedulers.routing.policy import make_policy, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


# ---- PrefixIndex ---------------------------------------------------------------------------------
def test_match_is_the_share_of_the_prompt_in_the_longest_remembered_prefix() -> None:
    index = PrefixIndex(3, block_size=4)
    system = list(range(100, 116))  # 4 blocks
    index.insert(1, system + [1, 2, 3, 4])
    match = index.match(system + [9, 9, 9, 9, 9, 9, 9, 9])
    np.testing.assert_allclose(match, [0.0, 16 / 24, 0.0])
    # the whole earlier prompt is a prefix of the next turn: 5 blocks of 28 tokens
    np.testing.assert_allclose(index.match(system + [1, 2, 3, 4] + [7, 7, 7, 7, 7, 7, 7, 7])[1], 20 / 28)


def test_blocks_are_chained_so_a_block_matches_only_after_the_same_prefix() -> None:
    index = PrefixIndex(1, block_size=2)
    index.insert(0, [1, 2, 3, 4])
    assert index.match([3, 4, 1, 2])[0] == 0.0  # same blocks, other order: no prefix in common
    assert index.match([1, 2, 5, 6])[0] == 0.5
    assert index.match([1])[0] == 0.0  # a partial block is not cached
    assert index.match([])[0] == 0.0


def test_capacity_evicts_least_recently_used_blocks_and_forget_empties_a_replica() -> None:
    index = PrefixIndex(2, block_size=1, capacity_blocks=3)
    index.insert(0, [1, 2, 3])
    index.insert(0, [9])  # a different first block: a new chain; the oldest block ([1]) goes
    assert index.size(0) == 3
    assert index.match([1, 2, 3])[0] == 0.0  # its first block was evicted, so nothing matches from the start
    assert index.match([9])[0] == 1.0
    index.forget(0)
    assert index.size(0) == 0 and index.match([9])[0] == 0.0


def test_text_prompts_are_indexed_by_characters() -> None:
    index = PrefixIndex(2, block_size=8)
    index.insert(0, "You are a helpful assistant. Question one?")
    assert index.match("You are a helpful assistant. Another one")[0] == pytest.approx(24 / 40)
    assert index.match("You are a helpful assistant. Another one")[1] == 0.0


def test_prefix_index_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="block_size"):
        PrefixIndex(2, block_size=0)


# ---- prefix_aware --------------------------------------------------------------------------------
def snap(load, match) -> ReplicaSnapshot:
    return ReplicaSnapshot.build(waiting=np.zeros(len(load)), running=np.asarray(load, float), prefix_match=match)


def test_prefix_aware_follows_the_cache_while_load_is_balanced() -> None:
    rng = np.random.default_rng(0)
    assert prefix_aware(snap([3, 1, 2], [0.8, 0.0, 0.1]), rng) == 0  # not the least loaded (1): the cache
    assert prefix_aware(snap([3, 1, 2], [0.8, 0.0, 0.8]), rng) == 2  # equal matches: the less loaded


def test_prefix_aware_falls_back_to_least_loaded_below_the_match_threshold_or_when_imbalanced() -> None:
    rng = np.random.default_rng(0)
    assert prefix_aware(snap([3, 1, 2], [0.2, 0.0, 0.1]), rng) == 1  # weak matches
    assert load_imbalanced(np.array([9.0, 1.0, 2.0]))
    assert prefix_aware(snap([9, 1, 2], [0.9, 0.0, 0.0]), rng) == 1  # imbalanced: load wins over the cache
    assert not load_imbalanced(np.array([9.0, 7.0]))  # gap 2 <= 4 requests
    assert not load_imbalanced(np.array([30.0, 24.0]))  # gap 6 but only 1.25x
    assert prefix_aware(snap([30, 24], [0.9, 0.0]), rng) == 0


def test_prefix_aware_without_prefix_information_is_join_the_shortest_queue() -> None:
    s = ReplicaSnapshot.build(waiting=[2, 0, 1, 0], running=[1, 1, 0, 3])
    for seed in range(20):
        assert make_policy("prefix_aware", seed=seed).decide(s) == jsq(s, np.random.default_rng(seed))


def test_prefix_aware_is_a_router_name() -> None:
    assert "prefix_aware" in policy_names(simulated=False)
    assert make_policy("prefix_aware").name == "prefix_aware"


# ---- observation ---------------------------------------------------------------------------------
def test_observation_keeps_its_columns_unless_the_prefix_feature_is_asked_for() -> None:
    s = snap([1, 2], [0.25, 1.0])
    plain = build_observation(s, 100, ObservationConfig())
    assert plain.shape == (2, len(FEATURE_NAMES)) == (2, 20)
    cfg = ObservationConfig(prefix_match=True)
    rows = build_observation(s, 100, cfg)
    assert feature_names(cfg)[-1] == "prefix_match"
    assert rows.shape == (2, len(feature_names(cfg)))
    np.testing.assert_array_equal(rows[:, :-1], plain)
    np.testing.assert_allclose(rows[:, -1], [0.25, 1.0])
    low, high = observation_bounds(cfg, 10, 100)
    assert low.shape == high.shape == (21,) and high[-1] == 1.0 and low[-1] == 0.0


def _save_policy(tmp_path, n_features: int, observation: dict | None):
    from schedulers.rl.scorer_network import ReplicaScorerPolicy

    data = ReplicaScorerPolicy(n_features).to_checkpoint()
    if observation is not None:
        data["observation"] = observation
    path = tmp_path / f"policy{n_features}.pt"
    torch.save(data, path)
    return path


def test_existing_checkpoints_keep_their_observation_size(tmp_path) -> None:
    from schedulers.rl.ppo_router import PPORouter

    old = PPORouter.from_checkpoint(_save_policy(tmp_path, len(FEATURE_NAMES), None))
    assert old.observation == ObservationConfig()
    obs = build_observation(snap([1, 2], [0.5, 0.0]), 64, old.observation)
    assert obs.shape[1] == 20 and old.decide(None, rows=obs) in (0, 1)
    inferred = PPORouter.from_checkpoint(_save_policy(tmp_path, len(FEATURE_NAMES) + 1, None))
    assert inferred.observation.prefix_match
    recorded = PPORouter.from_checkpoint(
        _save_policy(tmp_path, 21, {"prefix_match": True, "token_scale": 2048.0, "count_scale": 8.0,
                                    "recent_window_s": 5.0, "speed_tau_s": 1.0}))
    assert recorded.observation == ObservationConfig(5.0, 8.0, 2048.0, 1.0, True)
    rows = build_observation(snap([1, 2], [0.5, 0.0]), 64, recorded.observation)
    assert rows.shape == (2, 21) and recorded.decide(None, rows=rows) in (0, 1)


def test_env_yaml_prefix_flag_is_checked(tmp_path) -> None:
    pytest.importorskip("vidur")
    from rewardkit.errors import ConfigError
    from schedulers.sim.env_config import load_env_config

    bad = tmp_path / "env.yaml"
    bad.write_text("num_replicas: 2\nobservation: {prefix_match: 'yes'}\n")
    with pytest.raises(ConfigError, match=r"observation\.prefix_match: expected true or false"):
        load_env_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text("num_replicas: 2\nobservation: {prefix_match: true}\n")
    assert load_env_config(good).observation.prefix_match is True


def test_each_replica_evicts_at_its_own_capacity():
    from schedulers.routing.prefix_index import PrefixIndex

    index = PrefixIndex(2, block_size=4, capacity_blocks=[2, 8])
    prompt = list(range(24))  # six blocks
    index.insert(0, prompt)
    index.insert(1, prompt)
    assert (index.size(0), index.size(1)) == (2, 6)
    with pytest.raises(ValueError, match="one per replica"):
        PrefixIndex(2, block_size=4, capacity_blocks=[2])
