"""examples/torch_reach.py: a batched torch environment whose rewards rewardkit
computes in torch, through the Gymnasium vector wrapper, with the same numbers as NumPy."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rewardkit import RewardComposer

torch = pytest.importorskip("torch", reason="the example is a torch environment (torch extra)")
pytest.importorskip("gymnasium", reason="the vector wrapper needs the gym extra")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch_reach.py"


def _example():
    spec = importlib.util.spec_from_file_location("torch_reach", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rewards_stay_torch_and_equal_the_same_config_in_numpy() -> None:
    ex = _example()
    env = ex.make_env(64, seed=3)
    reference = RewardComposer.from_yaml(ex.CONFIG)  # the same reward computed in NumPy float32
    obs, info = env.reset(seed=3)
    ctx0 = ex.context_fn(ex.Transition(None, None, obs, None, None, None, info))
    reference.eval()
    reference({k: v.numpy() for k, v in ctx0.items()})
    reference.train()
    previous_done = np.zeros(64, dtype=bool)
    ended = 0
    for _ in range(80):
        actions = ex.policy(obs)
        before = obs
        obs, reward, terminated, truncated, info = env.step(actions)
        assert isinstance(reward, torch.Tensor) and reward.dtype == torch.float32 and reward.shape == (64,)
        assert isinstance(info["reward_terms"]["progress/raw"], torch.Tensor)
        ctx = ex.context_fn(ex.Transition(before, actions, obs, None, terminated, truncated, info))
        want = np.array(reference({k: v.numpy() for k, v in ctx.items()}, terminated=terminated.numpy(),
                                  truncated=truncated.numpy()).total)
        want[previous_done] = 0.0  # next-step autoreset: the first step of a new episode is no transition
        np.testing.assert_allclose(reward.numpy(), want, rtol=1e-5, atol=1e-6)
        assert np.all(reward.numpy()[previous_done] == 0.0)
        previous_done = (terminated | truncated).numpy()
        ended += int(previous_done.sum())
    assert ended > 0  # episodes did end (and restart) within the run


def test_the_script_runs_and_reports_torch_rewards_and_env_steps_per_second() -> None:
    result = subprocess.run([sys.executable, str(EXAMPLE), "--envs", "256", "--steps", "50"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "reward type: torch.Tensor torch.float32 on cpu" in result.stdout
    assert "env-steps/s" in result.stdout and "progress/contribution" in result.stdout
