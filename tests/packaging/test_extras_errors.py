"""Optional extras and adapters under bad use: a missing extra names what to install, and the SB3
wrapper refuses a context of the wrong batch size before any state moves."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rewardkit import RewardComposer


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("rewardkit.gym", "gymnasium", "rewardkit[gym]"),
    ("rewardkit.integrations.sb3", "stable_baselines3", "rewardkit[sb3]"),
])
def test_a_missing_extra_names_the_install_command(module, blocked, extra):
    """The module's dependency made unimportable (as in an install without the extra)."""
    code = f"import sys; sys.modules[{blocked!r}] = None\nimport {module}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and f"pip install '{extra}'" in last


def test_sb3_wrapper_checks_the_batch_before_any_state_changes():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    from rewardkit.integrations.sb3 import ComposedRewardVecEnv

    config = {"version": 1, "components": {"upright": {"type": "linear", "inputs": {"value": "upright"},
                                                       "normalize": "running_zscore"}}}
    wrong = {"size": 4}

    def context(t):
        return {"upright": np.ones(wrong["size"])}

    env = ComposedRewardVecEnv(make_vec_env("CartPole-v1", n_envs=2, seed=0), RewardComposer.from_dict(config), context)
    with pytest.raises(ValueError, match="leading axis of 2 environments.*a batch of 4"):
        env.reset()  # priming checks the batch too
    wrong["size"] = 2
    env.reset()
    wrong["size"] = 4
    before = env.composer.state_dict()
    env.step_async(np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="leading axis of 2 environments.*a batch of 4"):
        env.step_wait()
    assert env.composer.state_dict() == before  # nothing moved: step count, normalizer statistics
    wrong["size"] = 2
    env.step_async(np.zeros(2, dtype=int))
    _, rewards, _, _ = env.step_wait()
    assert rewards.shape == (2,)
