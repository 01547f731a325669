"""More settings that cannot run, refused at load with the limit in the message: the simulator's
predictor grid and parallelism, observation scales (a scale of 0 divides into inf), training threads,
demonstrations and seeds, and a checkpoint's own observation settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from rewardkit.errors import ConfigError
from schedulers.bounds import MAX_SEED
from schedulers.sim.env_config import load_env_config

ROOT = Path(__file__).resolve().parents[2]
BASE_ENV = yaml.safe_load((ROOT / "configs" / "envs" / "codellama34b_tp2_4r.yaml").read_text())


@pytest.mark.parametrize(("section", "changes", "where", "expected"), [
    ("predictor", {"prediction_max_tokens_per_request": 10**9}, "predictor.prediction_max_tokens_per_request",
     "from 1 to 32768"),
    ("predictor", {"prediction_max_prefill_chunk_size": 10**9}, "predictor.prediction_max_prefill_chunk_size",
     "from 32 to 32768"),
    ("predictor", {"prediction_max_batch_size": 10**8}, "predictor.prediction_max_batch_size", "from 1 to 1024"),
    ("predictor", {"num_estimators": [10**8]}, "predictor.num_estimators", "from 1 to 5000"),
    ("predictor", {"max_depth": list(range(1, 100))}, "predictor.max_depth", "a list of 1 to 16 of them"),
    ("predictor", {"min_samples_split": 1}, "predictor.min_samples_split", "from 2 to"),  # scikit-learn refuses 1
    ("predictor", {"k_fold_cv_splits": 1}, "predictor.k_fold_cv_splits", "from 2 to 100"),
    ("observation", {"token_scale": 5e-324}, "observation.token_scale", "a number >= 0.001"),
    ("observation", {"recent_window_s": 1e-300}, "observation.recent_window_s", "a number >= 0.001"),
    (None, {"tensor_parallel_size": 10**8}, "tensor_parallel_size", "from 1 to 64"),
    (None, {"num_pipeline_stages": 10**8}, "num_pipeline_stages", "from 1 to 64"),
])
def test_env_values_beyond_the_limits_are_refused_with_the_limit(tmp_path, section, changes, where, expected):
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE_ENV.items()}
    if section:
        data[section] = {**data.get(section, {}), **changes}
    else:
        data.update(changes)
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_env_config(path)
    text = str(err.value)
    assert f"{path}: {where}: expected" in text and expected in text, text


def training_config(tmp_path: Path, **sections) -> Path:
    raw = yaml.safe_load((ROOT / "configs" / "ppo_demo.yaml").read_text())
    raw["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(("sections", "where", "expected"), [
    ({"torch_threads": 10**8}, "torch_threads", "from 1 to 256"),
    ({"bc": {"demo_steps": 10**10}}, "bc.demo_steps", "from 1 to 1000000"),
    ({"seeds": {"torch": 2**64}}, "seeds.torch", f"from 0 to {MAX_SEED}"),
    ({"seeds": {"eval": list(range(10_001))}}, "seeds.eval", "at most 10000 of them"),
    ({"seeds": {"eval": [2**40]}}, "seeds.eval", f"from 0 to {MAX_SEED}"),
    # the last training episodes would get seeds past 2^32 - 1, which pandas' shuffle refuses mid-run
    ({"seeds": {"train_start": MAX_SEED - 10}}, "seeds.train_start", f"at most {MAX_SEED} (the limit: 32-bit seeds)"),
])
def test_training_values_beyond_the_limits_are_refused(tmp_path, sections, where, expected):
    from schedulers.train.config import load_config

    path = training_config(tmp_path, **sections)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert f"{path}: {where}: expected" in text and expected in text, text


@pytest.mark.parametrize(("observation", "expected"), [
    ({"token_scale": 0}, "observation.token_scale: expected a number >= 0.001, got 0"),
    ({"count_scale": "x"}, "observation.count_scale: expected a number >= 0.001, got 'x'"),
    ({"prefix_match": True}, "policy_kwargs.n_features: expected 21 (the observation's columns, prefix_match: true), "
                             "got 20"),
])
def test_a_checkpoints_observation_settings_are_checked(tmp_path, observation, expected):
    """A checkpoint's observation scales built observations without a check (a scale of 0: inf features)."""
    from schedulers.rl.checkpoint_file import CheckpointError
    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.rl.ppo_router import PPORouter

    path = tmp_path / "policy.pt"
    torch.save({**ReplicaScorerPolicy(20).to_checkpoint(), "observation": observation}, path)
    with pytest.raises(CheckpointError) as err:
        PPORouter.from_checkpoint(path)
    assert str(err.value) == f"{path}: {expected}"


def test_shipped_configs_stay_within_the_limits():
    from schedulers.train.config import load_config

    from schedulers.environments import load_any_env_config

    for env in sorted((ROOT / "configs" / "envs").glob("*.yaml")):
        load_any_env_config(env)  # a live env's workload part has the same checks
    for config in sorted((ROOT / "configs").glob("*.yaml")):
        load_config(config)
