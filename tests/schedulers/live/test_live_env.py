"""``LiveRoutingEnv`` over stub engines: the Gymnasium interface of the Vidur env, per-request credit, the
same arrivals as the simulator, train and evaluate through the CLI, and located errors for bad live YAML."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from rewardkit.errors import ConfigError
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.environments import load_any_env_config, make_env, policy_action
from schedulers.routing.policy import make_policy
from schedulers.live.config import LiveEnvConfig
from schedulers.live.env import LiveRoutingEnv
from schedulers.loadgen.sources import lengths_from_env
from schedulers.sim.env_config import EnvConfig

ROOT = Path(__file__).resolve().parents[3]
REQUESTS = 12


@pytest.fixture
def engines():
    """A fast and a slow stub engine (the slow one takes 10x per token)."""
    fast, slow = StubEngine("fast", ttft_s=0.005, per_token_s=0.001), StubEngine("slow", ttft_s=0.05, per_token_s=0.01)
    servers = [ServerThread(e.app(), free_port()).start() for e in (fast, slow)]
    yield (fast, slow), [s.url for s in servers]
    for s in servers:
        s.stop()


def live_yaml(tmp_path: Path, urls: list[str], **extra) -> Path:
    data = {
        "trace_file": str(ROOT.parent / "shared/vidur/traces/splitwise_conv.csv"),
        "qps": 40.0, "requests_per_episode": REQUESTS, "max_tokens": 4096,
        "reward_config": str(ROOT / "configs/rewards/request_ttft.yaml"),
        "live": {"backends": urls, "model": "stub-model", "length_scale": 0.01, "max_model_len": 64, "timeout_s": 20},
        **extra,
    }
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_episode(env: LiveRoutingEnv, seed: int, choose) -> tuple[list[np.ndarray], list[dict], float]:
    obs, info = env.reset(seed=seed)
    seen, infos, total = [obs], [], 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(choose(obs))
        total += reward
        seen.append(obs)
        infos.append(info)
        assert not terminated
        if truncated:
            return seen, infos, total


def test_a_live_yaml_opens_a_live_env_with_the_simulators_spaces(tmp_path, engines):
    _, urls = engines
    path = live_yaml(tmp_path, urls)
    cfg = load_any_env_config(path)
    assert isinstance(cfg, LiveEnvConfig) and cfg.num_replicas == 2
    assert isinstance(load_any_env_config(ROOT / "configs/envs/tiny.yaml"), EnvConfig)
    shipped = load_any_env_config(ROOT / "configs/envs/live_tiny.yaml")  # the documented example
    assert isinstance(shipped, LiveEnvConfig) and shipped.live.declared_speeds == (1.0, 0.5)
    env = make_env(cfg)
    try:
        assert env.observation_space.shape == (2, len(env.feature_names)) and env.action_space.n == 2
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs) and info["episode_seed"] == 3
    finally:
        env.close()


def test_every_decision_gets_its_requests_reward_and_the_episode_ends_drained(tmp_path, engines):
    (fast, slow), urls = engines
    env = LiveRoutingEnv(str(live_yaml(tmp_path, urls)))
    try:
        _, infos, total = run_episode(env, seed=5, choose=lambda obs: 0)
        credited = sorted(d for info in infos for d, _ in info["credits"])
        assert credited == list(range(REQUESTS))  # each decision once, all by the last step
        assert total == pytest.approx(sum(r for info in infos for _, r in info["credits"]))
        assert total < 0  # request_ttft penalises latency
        metrics = env.episode_metrics()
        assert metrics.complete and metrics.routed_per_replica.tolist() == [REQUESTS, 0]
        assert fast.served == REQUESTS and slow.served == 0
        # same arrivals and lengths as the simulator draws for the seed (scaled, fitted)
        lengths = lengths_from_env(str(live_yaml(tmp_path, urls)), 5).fitted(0.01, 64)
        assert sorted(len(p) for p in fast.prompts) == sorted(lengths.prompt_tokens.tolist())  # sent concurrently
        with pytest.raises(RuntimeError, match="reset"):
            env.step(0)
    finally:
        env.close()


RAW_TTFT = """\
version: 1
components:
  ttft: {type: threshold_penalty, inputs: {latency: ttft}, params: {threshold: 0.0, slope: 1.0}, weight: -1.0}
"""


def test_requests_on_the_slow_engine_get_lower_rewards_and_the_view_sees_its_load(tmp_path, engines):
    _, urls = engines
    reward = tmp_path / "ttft.yaml"
    reward.write_text(RAW_TTFT)  # reward = -TTFT, unnormalized
    env = LiveRoutingEnv(str(live_yaml(tmp_path, urls, reward_config=str(reward))))
    try:
        rewards = {0: [], 1: []}
        obs, _ = env.reset(seed=8)
        decision_replica = []
        for k in range(REQUESTS):
            action = k % 2
            decision_replica.append(action)
            obs, _, _, truncated, info = env.step(action)
            for d, r in info["credits"]:
                rewards[decision_replica[d]].append(r)
        assert truncated and len(rewards[0]) + len(rewards[1]) == REQUESTS
        # the slow engine's first tokens come 10x later (50 ms against 5 ms)
        assert np.mean(rewards[1]) < np.mean(rewards[0]) - 0.03
        # the heuristics run on the live view, as in Vidur

        obs, _ = env.reset(seed=9)
        assert policy_action(make_policy("least_prefill", seed=9), env, obs) in (0, 1)
        with pytest.raises(ValueError, match="oracle"):
            policy_action(make_policy("oracle"), env, obs)
        with pytest.raises(ValueError, match="only the simulator knows"):
            make_policy("oracle", simulated=False)
    finally:
        env.close()


def test_bad_live_yaml_is_a_located_error(tmp_path, engines):
    _, urls = engines
    with pytest.raises(ConfigError, match=r"live\.yaml: live\.backends: expected a non-empty list of http"):
        load_any_env_config(live_yaml(tmp_path, ["localhost:1"]))
    with pytest.raises(ConfigError, match=r"live\.declared_speeds: expected 2 speeds"):
        load_any_env_config(live_yaml(tmp_path, urls, live={"backends": urls, "declared_speeds": [1.0]}))
    with pytest.raises(ConfigError, match=r"live\.yaml: num_replicas: expected 2"):
        load_any_env_config(live_yaml(tmp_path, urls, num_replicas=3))
    with pytest.raises(ConfigError, match=r"live\.yaml: slowdowns: expected no simulated cluster"):
        load_any_env_config(live_yaml(tmp_path, urls, slowdowns={"events": []}))
    step_reward = tmp_path / "step.yaml"
    step_reward.write_text((ROOT / "configs/rewards/vidur_hybrid.yaml").read_text())
    with pytest.raises(ConfigError, match="reward_config: expected a reward of per-request keys only"):
        LiveRoutingEnv(str(live_yaml(tmp_path, urls, reward_config=str(step_reward))))


def test_train_and_evaluate_run_on_the_live_cluster_through_the_cli(tmp_path, engines, capsys):
    from rewardkit.cli import main

    (fast, slow), urls = engines
    env_path = live_yaml(tmp_path, urls)
    train_cfg = yaml.safe_load((ROOT / "configs/ppo_vidur.yaml").read_text())
    train_cfg.update({"env": str(env_path), "reward": None, "env_overrides": {}})
    train_cfg["ppo"].update({"n_envs": 1, "n_steps": REQUESTS, "total_timesteps": 2 * REQUESTS, "minibatch_size": REQUESTS,
                             "envs_per_seed": 1, "advantage_baseline": "critic"})
    train_cfg["bc"].update({"heuristics": ["least_prefill"], "demo_steps": REQUESTS, "epochs": 2, "minibatch_size": REQUESTS})
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(train_cfg))
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "policy.pt").exists()
    assert (tmp_path / "run" / "bc_policy.pt").exists()
    served = fast.served + slow.served
    assert served == 3 * REQUESTS  # one cloned episode of least_prefill, then two PPO updates of one episode each
    assert main(["evaluate", "--env", str(env_path), "--checkpoint", str(tmp_path / "run" / "policy.pt"),
                 "--baselines", "round_robin,least_prefill", "--seeds", "201", "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "ppo" in out and "least_prefill" in out and "warm_start" in out  # bc_policy.pt beside the checkpoint
    assert fast.served + slow.served == served + 4 * REQUESTS  # four routers, one episode each
    # a live env trains with one env only
    train_cfg["ppo"]["n_envs"] = 2
    config.write_text(yaml.safe_dump(train_cfg))
    assert main(["train", str(config), "--out", str(tmp_path / "run2")]) == 2
    assert "ppo.n_envs: expected 1 with a live env" in capsys.readouterr().err
