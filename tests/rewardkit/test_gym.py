"""Tests of rewardkit.gym on CartPole: rewards replaced, breakdown in info, episode state handled.

The shaping tests rely on potential-based shaping telescoping over an episode:
sum_t gamma^t F_t = gamma^T phi(s_T) - phi(s_0), with phi(s_T) = 0 on termination. That holds
only if the wrapper resets the composer's state at each episode and shows it the first state.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")  # an optional extra ("gym"); installed in the dev venv

from gymnasium.vector import AutoresetMode  # noqa: E402

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.gym import ComposedReward, Transition, VectorComposedReward  # noqa: E402

GAMMA = 0.9
CONFIG = {
    "version": 1,
    "components": {
        "upright": {"type": "linear", "inputs": {"value": "upright"}, "weight": 0.5},
        "shaping": {"type": "potential_shaping", "params": {"gamma": GAMMA}, "inputs": {"potential": "phi"}},
    },
}


def phi_of(obs: np.ndarray) -> np.ndarray | float:
    """Potential: minus the cart's distance from the centre (in float64, as the composer computes)."""
    return -np.abs(np.asarray(obs[..., 0], dtype=np.float64))


def ctx_single(t: Transition) -> dict:
    return {"upright": 1.0 - abs(float(t.obs[2])) / 0.2095, "phi": float(phi_of(t.obs))}


def ctx_vector(t: Transition) -> dict:
    return {"upright": 1.0 - np.abs(t.obs[:, 2]) / 0.2095, "phi": phi_of(t.obs)}


def at(obs, terminated=False, truncated=False, info=None) -> Transition:
    """A transition as the check composers see it (only the fields the context functions read)."""
    return Transition(None, None, obs, 0.0, terminated, truncated, {} if info is None else info)


def run_episode(env: ComposedReward, seed: int) -> dict:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    first_phi = float(phi_of(obs))
    shaped, rewards, t = 0.0, [], 0
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        shaped += GAMMA ** t * info["reward_terms"]["shaping/contribution"]
        rewards.append((reward, info))
        t += 1
        if terminated or truncated:
            return {"T": t, "terminated": terminated, "shaped": shaped, "phi0": first_phi,
                    "phiT": float(phi_of(obs)), "rewards": rewards}


def test_single_env_reward_is_composed_total_and_breakdown_is_in_info():
    composer = RewardComposer.from_dict(CONFIG)
    env = ComposedReward(gym.make("CartPole-v1"), composer, ctx_single)
    obs, _ = env.reset(seed=1)
    check = RewardComposer.from_dict(CONFIG)  # an independent composer fed the same contexts
    check.eval()
    check(ctx_single(at(obs)))
    check.train()
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(0)
        expected = check(ctx_single(at(obs, terminated, truncated, info)),
                         terminated=terminated, truncated=truncated)
        assert isinstance(reward, float)
        assert reward == pytest.approx(expected.total, abs=1e-12)
        terms = info["reward_terms"]
        assert terms["total"] == reward
        assert terms["upright/contribution"] + terms["shaping/contribution"] == pytest.approx(reward)
        assert terms["upright/weight"] == 0.5
        assert info["env_reward"] == 1.0  # CartPole's own reward is kept for reference
        if terminated or truncated:
            break
    assert composer.step == check.step  # priming at reset did not advance the step


def test_single_env_shaping_telescopes_on_terminated_episodes():
    env = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), ctx_single)
    for seed in range(3):  # several episodes through one wrapper: reset must clear state
        ep = run_episode(env, seed)
        assert ep["terminated"]  # random actions drop the pole well before 500 steps
        assert ep["shaped"] == pytest.approx(-ep["phi0"], abs=1e-9)


def test_single_env_shaping_telescopes_on_truncated_episodes():
    env = ComposedReward(gym.make("CartPole-v1", max_episode_steps=6), RewardComposer.from_dict(CONFIG), ctx_single)
    ep = run_episode(env, seed=3)
    assert not ep["terminated"] and ep["T"] == 6
    assert ep["shaped"] == pytest.approx(GAMMA ** 6 * ep["phiT"] - ep["phi0"], abs=1e-9)


def test_without_priming_the_first_shaping_term_is_zero():
    env = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), ctx_single,
                        prime_on_reset=False)
    env.reset(seed=0)
    _, _, _, _, info = env.step(1)
    assert info["reward_terms"]["shaping/contribution"] == 0.0
    primed = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), ctx_single)
    obs0, _ = primed.reset(seed=0)
    obs1, _, _, _, info = primed.step(1)
    assert info["reward_terms"]["shaping/contribution"] == pytest.approx(
        GAMMA * phi_of(obs1) - phi_of(obs0), abs=1e-12)


def test_reset_starts_a_new_episode_for_stateful_components():
    env = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), ctx_single)
    env.reset(seed=0)
    for _ in range(3):
        env.step(1)
    obs0, _ = env.reset(seed=5)  # mid-episode reset: the old phi must be forgotten
    obs1, _, _, _, info = env.step(0)
    assert info["reward_terms"]["shaping/raw"] == pytest.approx(GAMMA * phi_of(obs1) - phi_of(obs0), abs=1e-12)


def test_wrapper_rejects_a_batched_context_for_a_single_env():
    def batched(t):
        return {"upright": np.ones(2), "phi": np.zeros(2)}

    env = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), batched, prime_on_reset=False)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="VectorComposedReward"):
        env.step(0)


# ---- vector environments ---------------------------------------------------------------------
def test_vector_rewards_are_composed_per_env():
    composer = RewardComposer.from_dict(CONFIG)
    env = VectorComposedReward(gym.make_vec("CartPole-v1", num_envs=3), composer, ctx_vector)
    assert env.autoreset_mode == AutoresetMode.NEXT_STEP
    env.reset(seed=0)
    obs, rewards, term, trunc, info = env.step(np.array([0, 1, 0]))
    assert rewards.shape == (3,) and rewards.dtype == np.float64
    terms = info["reward_terms"]
    np.testing.assert_allclose(terms["total"], rewards)
    np.testing.assert_allclose(terms["upright/contribution"], 0.5 * (1.0 - np.abs(obs[:, 2]) / 0.2095), rtol=1e-12)
    np.testing.assert_array_equal(info["env_reward"], np.ones(3))
    assert composer.step == 3  # one call over three environments


def test_vector_next_step_autoreset_gives_zero_and_shaping_telescopes_per_env():
    env = VectorComposedReward(gym.make_vec("CartPole-v1", num_envs=3), RewardComposer.from_dict(CONFIG), ctx_vector)
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    phi0 = phi_of(obs)
    shaped = np.zeros(3)
    t = np.zeros(3, dtype=int)
    fresh = np.zeros(3, dtype=bool)  # environments whose previous step ended an episode
    checked, autoreset_steps = 0, 0
    for _ in range(150):
        obs, rewards, term, trunc, info = env.step(env.action_space.sample())
        contrib = info["reward_terms"]["shaping/contribution"]
        if fresh.any():
            autoreset_steps += 1
            assert np.all(rewards[fresh] == 0.0)
            assert np.all(info["reward_terms"]["upright/contribution"][fresh] == 0.0)
            assert np.all(info["reward_terms"]["total"][fresh] == 0.0)
            phi0[fresh] = phi_of(obs)[fresh]  # the new episode's first state
            shaped[fresh], t[fresh] = 0.0, 0
        live = ~fresh
        shaped[live] += GAMMA ** t[live] * contrib[live]
        t[live] += 1
        for i in np.flatnonzero(live & (term | trunc)):
            expected = -phi0[i] if term[i] else GAMMA ** t[i] * phi_of(obs)[i] - phi0[i]
            assert shaped[i] == pytest.approx(expected, abs=1e-9)
            checked += 1
        fresh = term | trunc
    assert checked >= 5 and autoreset_steps >= 5


def test_vector_same_step_mode_composes_on_final_observations():
    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    wrapped = VectorComposedReward(env, RewardComposer.from_dict(CONFIG), ctx_vector)
    assert wrapped.autoreset_mode == AutoresetMode.SAME_STEP
    check = RewardComposer.from_dict(CONFIG)  # fed the final observations by hand, nothing masked
    obs, info = wrapped.reset(seed=0)
    flags = np.zeros(2, dtype=bool)
    check.eval()
    check(ctx_vector(at(obs)), terminated=flags, truncated=flags)
    check.train()
    ended = 0
    for _ in range(60):
        obs, rewards, term, trunc, info = wrapped.step(np.array([0, 0]))
        final = obs.copy()
        for i in np.flatnonzero(term | trunc):
            final[i] = info["final_obs"][i]
            assert not np.array_equal(final[i], obs[i])  # obs already holds the next episode's start
        expected = check(ctx_vector(at(final)), terminated=term, truncated=trunc)
        np.testing.assert_allclose(rewards, expected.total, rtol=0, atol=1e-12)
        assert np.all(rewards != 0.0)  # no step is masked in same-step mode
        ended += int((term | trunc).sum())
    assert ended >= 2


def test_vector_same_step_mode_hands_final_info_to_context_fn():
    class EpisodeInfo(gym.Wrapper):
        """Reports the step number in info; reset reports -1 so a mix-up would show."""

        def reset(self, **kwargs):
            self.t = 0
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, "t": -1}

        def step(self, action):
            self.t += 1
            obs, r, term, trunc, info = self.env.step(action)
            return obs, r, term, trunc, {**info, "t": self.t}

    env = gym.vector.SyncVectorEnv([lambda: EpisodeInfo(gym.make("CartPole-v1")) for _ in range(2)],
                                   autoreset_mode=AutoresetMode.SAME_STEP)
    seen = []

    def ctx(t: Transition) -> dict:
        if t.action is not None:
            seen.append((t.info["t"].copy(), t.info["_t"].copy(), t.terminated | t.truncated))
        return ctx_vector(t)

    wrapped = VectorComposedReward(env, RewardComposer.from_dict(CONFIG), ctx)
    wrapped.reset(seed=0)
    steps = np.zeros(2, dtype=int)
    for _ in range(40):
        _, _, term, trunc, info = wrapped.step(np.array([1, 1]))
        steps += 1
        t, present, ended = seen[-1]
        np.testing.assert_array_equal(t, steps)  # the final step number, never the reset's -1
        assert present.all()
        if ended.any():
            assert np.all(info["t"][ended] == -1)  # the returned info is Gymnasium's, untouched
        steps[ended] = 0
    assert any(e.any() for _, _, e in seen)


def test_context_fn_sees_action_and_observations_before_and_after():
    seen: list[Transition] = []

    def ctx(t: Transition) -> dict:
        seen.append(t)
        return ctx_single(t)

    env = ComposedReward(gym.make("CartPole-v1"), RewardComposer.from_dict(CONFIG), ctx)
    obs0, _ = env.reset(seed=0)
    assert seen[-1].obs_before is None and seen[-1].action is None  # the priming call
    obs1, _, _, _, _ = env.step(1)
    obs2, _, _, _, _ = env.step(0)
    assert seen[1].action == 1 and seen[2].action == 0
    np.testing.assert_array_equal(seen[1].obs_before, obs0)
    np.testing.assert_array_equal(seen[1].obs, obs1)
    np.testing.assert_array_equal(seen[2].obs_before, obs1)
    np.testing.assert_array_equal(seen[2].obs, obs2)
    assert seen[2].reward == 1.0 and seen[2].terminated is False

    vseen: list[Transition] = []
    venv = VectorComposedReward(gym.make_vec("CartPole-v1", num_envs=2), RewardComposer.from_dict(CONFIG),
                                lambda t: vseen.append(t) or ctx_vector(t))
    vobs0, _ = venv.reset(seed=0)
    vobs1, _, _, _, _ = venv.step(np.array([0, 1]))
    np.testing.assert_array_equal(vseen[-1].action, [0, 1])
    np.testing.assert_array_equal(vseen[-1].obs_before, vobs0)
    np.testing.assert_array_equal(vseen[-1].obs, vobs1)


def test_wrapper_names_do_not_shadow_gymnasiums_base_classes():
    import rewardkit.gym as rkgym

    assert not hasattr(rkgym, "RewardWrapper") and not hasattr(rkgym, "VectorRewardWrapper")
    assert issubclass(ComposedReward, gym.Wrapper) and issubclass(VectorComposedReward, gym.vector.VectorWrapper)


def test_vector_disabled_mode_reset_mask_clears_only_masked_envs():
    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
    wrapped = VectorComposedReward(env, RewardComposer.from_dict(CONFIG), ctx_vector)
    wrapped.reset(seed=0)
    for _ in range(3):
        wrapped.step(np.array([1, 1]))
    mask = np.array([True, False])
    obs_reset, _ = wrapped.reset(options={"reset_mask": mask})
    obs, _, _, _, info = wrapped.step(np.array([0, 1]))
    contrib = info["reward_terms"]["shaping/contribution"]
    assert contrib[0] == 0.0  # state cleared: first call of env 0's new episode
    assert contrib[1] != 0.0  # env 1 is mid-episode and keeps its potential


def test_vector_context_without_env_axis_is_rejected():
    def scalar_ctx(t):
        return {"upright": 1.0, "phi": 0.0}

    env = VectorComposedReward(gym.make_vec("CartPole-v1", num_envs=2), RewardComposer.from_dict(CONFIG), scalar_ctx,
                              prime_on_reset=False)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="leading axis of 2 environments"):
        env.step(np.array([0, 1]))


def test_importing_rewardkit_does_not_import_gymnasium_or_torch():
    code = ("import sys, rewardkit, rewardkit.cli, rewardkit.breakdown_logger; "
            "bad = [m for m in ('gymnasium', 'torch', 'optuna', 'vidur') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
