"""rewardkit.integrations.sb3 with Stable-Baselines3's own PPO, VecEnvs, logger and checkpoints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("stable_baselines3")  # the optional extra "sb3"

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.logger import configure  # noqa: E402

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.gym import Transition  # noqa: E402
from rewardkit.integrations.sb3 import (ComposedRewardVecEnv, RewardCheckpointCallback,  # noqa: E402
                                        RewardTermsCallback)

ROOT = Path(__file__).resolve().parents[3]
GAMMA = 0.9
CONFIG = {
    "version": 1,
    "components": {
        "upright": {"type": "linear", "inputs": {"value": "upright"}, "weight": 0.5},
        "shaping": {"type": "potential_shaping", "params": {"gamma": GAMMA}, "inputs": {"potential": "phi"},
                    "normalize": "running_zscore"},
    },
}


def ctx(t: Transition) -> dict:
    return {"upright": 1.0 - np.abs(t.obs[:, 2]) / 0.2095, "phi": -np.abs(t.obs[:, 0].astype(np.float64))}


def test_rewards_are_composed_on_terminal_observations_and_episode_stats_are_kept():
    venv = ComposedRewardVecEnv(make_vec_env("CartPole-v1", n_envs=3, seed=0), RewardComposer.from_dict(CONFIG), ctx)
    check = RewardComposer.from_dict(CONFIG)
    obs = venv.reset()
    check.eval()
    check(ctx(Transition(None, None, obs, None, None, None, {})))
    check.train()
    episodes = 0
    for _ in range(80):
        actions = np.array([venv.action_space.sample() for _ in range(3)])
        new_obs, rewards, dones, infos = venv.step(actions)
        final = new_obs.copy()
        for i in np.flatnonzero(dones):
            final[i] = infos[i]["terminal_observation"]
        trunc = np.array([info.get("TimeLimit.truncated", False) for info in infos]) & dones
        expected = check(ctx(Transition(None, None, final, None, None, None, {})),
                         terminated=dones & ~trunc, truncated=trunc)
        np.testing.assert_allclose(rewards, expected.total, rtol=1e-6, atol=1e-6)
        assert rewards.dtype == np.float32
        for i, info in enumerate(infos):
            assert info["env_reward"] == 1.0 and info["reward_terms"]["total"] == pytest.approx(rewards[i], abs=1e-6)
            if "episode" in info:  # SB3's Monitor statistics: the env's own return, untouched
                episodes += 1
                assert info["episode"]["r"] == info["episode"]["l"]
        obs = new_obs
    assert episodes >= 3


def test_callback_logs_terms_through_sb3_logger_and_checkpoints_the_composer(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    venv = ComposedRewardVecEnv(make_vec_env("CartPole-v1", n_envs=2, seed=1), composer, ctx)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=1, verbose=0)
    model.set_logger(configure(str(tmp_path / "logs"), ["csv"]))
    checkpoints = RewardCheckpointCallback(save_freq=32, save_path=str(tmp_path / "ckpt"), name_prefix="rl_model")
    model.learn(total_timesteps=128, callback=[RewardTermsCallback(), checkpoints])
    progress = (tmp_path / "logs" / "progress.csv").read_text().splitlines()
    header = progress[0].split(",")
    for key in ("reward_terms/upright/raw", "reward_terms/upright/weight", "reward_terms/upright/contribution",
                "reward_terms/shaping/contribution", "reward_terms/total"):
        assert key in header
    rows = [dict(zip(header, line.split(","), strict=True)) for line in progress[1:]]
    assert all(float(r["reward_terms/upright/weight"]) == 0.5 for r in rows) and len(rows) == 2
    saved = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert saved == ["rl_model_128_steps.zip", "rl_model_64_steps.zip",
                     "rl_model_reward_state_128_steps.json", "rl_model_reward_state_64_steps.json"]
    state = json.loads((tmp_path / "ckpt" / "rl_model_reward_state_128_steps.json").read_text())
    assert state["step"] == composer.step == 128

    resumed = ComposedRewardVecEnv(make_vec_env("CartPole-v1", n_envs=2, seed=1), RewardComposer.from_dict(CONFIG), ctx)
    resumed.load_state(tmp_path / "ckpt" / "rl_model_reward_state_128_steps.json")
    assert resumed.composer.state_dict() == json.loads(json.dumps(composer.state_dict()))


def _mountaincar_example():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import sb3_mountaincar
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return sb3_mountaincar


def test_mountaincar_shaped_reward_is_env_reward_plus_energy_potential_difference():
    example = _mountaincar_example()
    venv = example.make_env(seed=3, shaped=True)
    plain = example.make_env(seed=3, shaped=False)
    venv.reset(), plain.reset()
    raw = venv.get_original_obs()

    def energy(obs):
        return 0.0025 / 3.0 * np.sin(3.0 * obs[:, 0].astype(np.float64)) + 0.5 * obs[:, 1].astype(np.float64) ** 2

    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.uniform(-1.0, 1.0, size=(example.N_ENVS, 1)).astype(np.float32)
        _, rewards, dones, infos = venv.step(actions)
        _, plain_rewards, _, _ = plain.step(actions)
        new_raw = venv.get_original_obs()
        assert not dones.any()  # 40 steps from rest cannot reach the flag nor the time limit
        env_reward = np.array([info["env_reward"] for info in infos])
        np.testing.assert_allclose(env_reward, plain_rewards, rtol=1e-6)  # the same env, the same actions
        expected = env_reward + 30000.0 * (example.PPO_KWARGS["gamma"] * energy(new_raw) - energy(raw))
        np.testing.assert_allclose(rewards, expected, rtol=1e-4, atol=1e-5)
        raw = new_raw
    shaping = yaml.safe_load(example.CONFIG.read_text())["components"]["energy_shaping"]
    assert shaping["params"]["gamma"] == example.PPO_KWARGS["gamma"]  # policy invariance needs PPO's gamma


def test_mountaincar_example_runs_at_a_tiny_budget(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "sb3_mountaincar.py"), "--steps", "1024",
                             "--seeds", "0", "--episodes", "1", "--eval-every", "1024", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    row = re.search(r"^\s+0\s+(\d)/1\s+([-\d.]+)\s+(\d+|never)\s+(\d)/1\s+([-\d.]+)\s+(\d+|never)\s+[\d.]+$",
                    result.stdout, re.M)
    assert row, result.stdout
    for flags, ret in ((row[1], row[2]), (row[4], row[5])):  # env returns: action cost, +100 at the flag
        assert -200.0 <= float(ret) <= 100.0 and (float(ret) > 0) == (flags == "1")
    assert re.search(r"flag reached \(most evaluation episodes\): env reward \d/1 seeds, shaped \d/1 seeds",
                     result.stdout)
    assert (tmp_path / "sb3_mountaincar.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for arm in ("env", "shaped"):  # SB3's EvalCallback file: one learning-curve point (1024 steps: one rollout) per arm
        assert list(np.load(tmp_path / f"{arm}_seed0" / "evaluations.npz")["timesteps"]) == [1024]
    state = json.loads((tmp_path / "shaped_seed0_reward_state_1024_steps.json").read_text())
    assert state["step"] == 1024 and len(state["components"]["energy_shaping"]["phi"]) == 4
    assert not list(tmp_path.glob("env_seed0_reward_state_*"))  # the env-reward arm has no composer
