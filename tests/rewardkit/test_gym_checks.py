"""The Gymnasium wrappers check what ``context_fn`` returns before any state moves."""

from __future__ import annotations

import copy

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.gym import ComposedReward, Transition, VectorComposedReward  # noqa: E402

CONFIG = {
    "version": 1,
    "components": {
        "upright": {"type": "linear", "inputs": {"value": "upright"}, "weight": 0.5,
                    "normalize": {"type": "running_zscore"}},
        "shaping": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "phi"}},
    },
}


def ctx_vector(t: Transition) -> dict:
    return {"upright": 1.0 - np.abs(t.obs[:, 2]) / 0.2095, "phi": -np.abs(t.obs[:, 0])}


def snapshot(composer: RewardComposer) -> dict:
    return copy.deepcopy(composer.state_dict())


def test_single_env_refuses_a_batch_before_the_composer_moves() -> None:
    composer = RewardComposer.from_dict(CONFIG)
    batch = {"upright": np.ones(3), "phi": np.zeros(3)}
    env = ComposedReward(gym.make("CartPole-v1"), composer,
                         lambda t: {"upright": 1.0, "phi": 0.0} if t.action is None else batch)
    env.reset(seed=0)
    before = snapshot(composer)
    with pytest.raises(ValueError, match="batch of 3 environments"):
        env.step(0)
    assert snapshot(composer) == before


def test_vector_env_refuses_a_wrong_batch_before_the_composer_moves() -> None:
    composer = RewardComposer.from_dict(CONFIG)
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    wrong = {"upright": np.ones(3), "phi": np.zeros(3)}
    env = VectorComposedReward(envs, composer, lambda t: ctx_vector(t) if t.action is None else wrong)
    env.reset(seed=0)
    before = snapshot(composer)
    with pytest.raises(ValueError, match="leading axis of 4 environments"):
        env.step(np.zeros(4, dtype=int))
    assert snapshot(composer) == before


def test_vector_env_with_one_per_env_vector_is_refused_before_the_composer_moves() -> None:
    """A key that holds one vector for all environments is not a batch: refused before state moves."""
    config = {"version": 1, "components": {"balance": {"type": "load_imbalance", "inputs": {"replica_loads": "loads"},
                                                       "normalize": {"type": "running_zscore"}}}}
    composer = RewardComposer.from_dict(config)
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    env = VectorComposedReward(envs, composer, lambda t: {"loads": np.arange(4.0)}, prime_on_reset=False)
    env.reset(seed=0)
    before = snapshot(composer)
    with pytest.raises(ValueError, match="one environment's values"):
        env.step(np.zeros(4, dtype=int))
    assert snapshot(composer) == before


def test_vector_env_accepts_lists_with_the_leading_axis() -> None:
    composer = RewardComposer.from_dict(CONFIG)
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    env = VectorComposedReward(envs, composer, lambda t: {k: v.tolist() for k, v in ctx_vector(t).items()})
    env.reset(seed=0)
    _, rewards, *_ = env.step(np.zeros(4, dtype=int))
    assert rewards.shape == (4,)


@pytest.mark.parametrize("returned, message", [(None, "got None"), ([1.0, 2.0, 3.0, 4.0], "got a list")])
def test_vector_env_names_a_context_fn_that_returns_no_mapping(returned, message) -> None:
    composer = RewardComposer.from_dict(CONFIG)
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    env = VectorComposedReward(envs, composer, lambda t: ctx_vector(t) if t.action is None else returned)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=f"context_fn must return a mapping.*{message}"):
        env.step(np.zeros(4, dtype=int))


def test_single_env_names_a_context_fn_that_returns_none() -> None:
    composer = RewardComposer.from_dict(CONFIG)
    env = ComposedReward(gym.make("CartPole-v1"), composer, lambda t: None, prime_on_reset=False)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="context_fn must return a mapping.*got None"):
        env.step(0)
