"""Learning from a decision log: cloning reproduces the logged router; reward-weighted fine-tuning moves
the policy toward the decisions whose requests fared better; bad logs are located errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from rewardkit.errors import ConfigError
from schedulers.live.decision_log import Decision, DecisionLogWriter
from schedulers.rl.ppo_router import PPORouter
from schedulers.routing.observation import feature_names
from schedulers.shared.observation_config import ObservationConfig
from schedulers.train.offline import train_from_log

FEATURES = list(feature_names(ObservationConfig()))
REPLICAS = 3


def rows(rng: np.random.Generator) -> np.ndarray:
    x = rng.random((REPLICAS, len(FEATURES)))
    return x


def write_log(path, n: int, choose, reward=None, seed: int = 0, features=FEATURES) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    writer = DecisionLogWriter(path, router="test", replicas=[f"http://r{i}" for i in range(REPLICAS)],
                               observation=dataclasses.asdict(ObservationConfig()), features=features, reward=None)
    seen = []
    for i in range(n):
        obs = rows(rng)
        action = int(choose(obs, rng))
        r = None if reward is None else float(reward(obs, action, rng))
        writer.write(Decision(f"r{i}", "test", action, obs.tolist(), 100, 10, 0.1, 1.0, reward=r))
        seen.append(obs)
    writer.close()
    return seen


def agreement(policy_path, target, seed: int = 99, n: int = 400) -> float:
    router = PPORouter.from_checkpoint(policy_path)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        obs = rows(rng)
        hits += router.decide(None, rows=obs) == target(obs)
    return hits / n


def least_first_feature(obs: np.ndarray) -> int:
    return int(np.argmin(obs[:, 0]))


def test_cloning_reproduces_the_logged_routers_choices(tmp_path):
    log = tmp_path / "d.jsonl"
    write_log(log, 1500, lambda obs, rng: least_first_feature(obs))
    path = train_from_log(log, tmp_path / "out", mode="clone", epochs=30, lr=3e-3)
    assert agreement(path, least_first_feature) > 0.9  # on fresh observations, not the log's


def test_reward_weighted_fine_tuning_moves_toward_better_rewarded_actions(tmp_path):
    """The logged router chose at random; requests fared better (reward 0 vs -1) on the replica with the
    least first feature. Fine-tuning a random policy on that log makes it pick that replica."""
    log = tmp_path / "d.jsonl"
    write_log(log, 3000, lambda obs, rng: int(rng.integers(REPLICAS)),
              reward=lambda obs, a, rng: (0.0 if a == least_first_feature(obs) else -1.0) + rng.normal(0, 0.1))
    start = tmp_path / "start"
    init = train_from_log(log, start, mode="clone", epochs=1, lr=1e-6)  # a near-uniform policy
    assert agreement(init, least_first_feature) < 0.5
    tuned = train_from_log(log, tmp_path / "tuned", mode="reward", init=str(init), epochs=30, lr=3e-3)
    assert agreement(tuned, least_first_feature) > 0.8
    assert torch.load(tuned, weights_only=True)["kind"] == "offline_reward"


def test_several_logs_are_learned_from_together(tmp_path):
    """Two gateways' logs: one router always chose replica 0, the other the least first feature; only the
    second's requests fared well. Fine-tuning on both logs together picks the second router's rule."""
    always_zero, smart = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_log(always_zero, 1500, lambda obs, rng: 0,
              reward=lambda obs, a, rng: (0.0 if a == least_first_feature(obs) else -1.0), seed=1)
    write_log(smart, 1500, lambda obs, rng: least_first_feature(obs), reward=lambda obs, a, rng: 0.0, seed=2)
    init = train_from_log([always_zero, smart], tmp_path / "start", mode="clone", epochs=1, lr=1e-6)
    tuned = train_from_log([always_zero, smart], tmp_path / "tuned", mode="reward", init=str(init), epochs=30, lr=3e-3)
    assert agreement(tuned, least_first_feature) > 0.8
    assert torch.load(tuned, weights_only=True)["decision_logs"] == [str(always_zero), str(smart)]
    other = tmp_path / "other.jsonl"
    writer = DecisionLogWriter(other, router="t", replicas=["http://r"] * REPLICAS,
                               observation={**dataclasses.asdict(ObservationConfig()), "token_scale": 1.0},
                               features=FEATURES, reward=None)
    writer.close()
    with pytest.raises(ConfigError, match=r"other\.jsonl:1: observation: expected the settings of"):
        train_from_log([smart, other], tmp_path / "o", mode="clone")


def test_bad_logs_are_located_errors(tmp_path):
    other = tmp_path / "other.jsonl"
    write_log(other, 5, lambda obs, rng: 0, features=["a", "b"])
    with pytest.raises(ConfigError, match=r"other\.jsonl:1: features: expected"):
        train_from_log(other, tmp_path / "o", mode="clone")
    no_reward = tmp_path / "noreward.jsonl"
    write_log(no_reward, 5, lambda obs, rng: 0)
    with pytest.raises(ConfigError, match="with a reward"):
        train_from_log(no_reward, tmp_path / "o", mode="reward")


def test_train_from_log_through_the_cli(tmp_path, capsys):
    from rewardkit.cli import main

    log = tmp_path / "d.jsonl"
    write_log(log, 200, lambda obs, rng: least_first_feature(obs))
    assert main(["train", "--from-log", str(log), "--mode", "clone", "--epochs", "2", "--out", str(tmp_path / "o")]) == 0
    assert "policy:" in capsys.readouterr().out and (tmp_path / "o" / "policy.pt").exists()
    assert main(["train", "--from-log", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o2")]) == 2
    assert "no such decision log" in capsys.readouterr().err
