"""Training loop on the toy env: PPO beats random, BC warm start, resume, artifacts, config errors."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rewardkit.errors import ConfigError
from schedulers.rl.ppo_router import PPORouter
from schedulers.train.checkpoints import latest_checkpoint, load_checkpoint
from schedulers.train.trainer import train
from schedulers.train.config import load_config

sys.path.insert(0, str(Path(__file__).parent))
from toy_env import ToyRoutingEnv  # noqa: E402

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
EVAL_SEEDS = range(101, 109)


def toy_config(**sections) -> dict:
    """A small, fast config; sections override (merged one level deep)."""
    cfg = {
        "seeds": {"torch": 0, "train_start": 1000},
        "ppo": {"total_timesteps": 4096, "n_envs": 2, "n_steps": 64, "n_epochs": 4, "minibatch_size": 64,
                "learning_rate": 3e-3, "gamma": 0.95},
        "entropy": {"coef": 0.0},
        "bc": {"enabled": False},
        "kl_ref": {"coef": 0.0},
        "logging": {"tensorboard": False, "plots": False, "progress": False, "checkpoint_every": 100},
    }
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, dict) else value
    return cfg


def mean_return(act, seeds=EVAL_SEEDS) -> float:
    """Mean episode return of a router ``act(obs, env) -> int`` on the toy env over fixed seeds."""
    env = ToyRoutingEnv()
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs, env))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def heuristic(name: str):
    """``act(obs, env)`` routing as heuristic ``name`` (reset with each episode's seed)."""
    from schedulers.environments import policy_action
    from schedulers.routing.policy import make_policy

    policy = make_policy(name)
    return lambda obs, env: policy_action(policy, env, obs)


def random_return() -> float:
    rng = np.random.default_rng(0)
    return mean_return(lambda obs, env: int(rng.integers(env.num_replicas)))


def assert_closes_most_of_the_gap(policy_path: Path, label: str) -> None:
    """The trained router's toy-env return closes >= 70% of the gap from random to least-work routing."""
    router = PPORouter.from_checkpoint(policy_path)
    trained = mean_return(lambda obs, env: router.decide(None, rows=obs))
    rand, best = random_return(), mean_return(heuristic("cap_least_tokens"))
    print(f"{label}, toy env mean return over seeds 101-108: random {rand:.1f}, PPO {trained:.1f}, "
          f"least_work {best:.1f}")
    # Random routing is ~40% worse than least-work here; PPO must close most of that gap.
    assert trained > rand + 0.7 * (best - rand)


# ---- end to end --------------------------------------------------------------------------------
def test_ppo_from_scratch_beats_random_on_toy_env(tmp_path) -> None:
    result = train(toy_config(), tmp_path, env_factory=ToyRoutingEnv, resume=False)
    assert result.updates == 32 and result.global_step == 4096
    assert_closes_most_of_the_gap(result.policy_path, "per-step reward")
    first, last = result.metrics[0], result.metrics[-1]
    assert last["entropy_norm"] < first["entropy_norm"]
    assert last["explained_variance"] > 0.3


def test_behaviour_cloning_then_ppo_with_kl_and_entropy_target(tmp_path) -> None:
    cfg = toy_config(
        ppo={"total_timesteps": 1024},
        bc={"enabled": True, "heuristics": ["cap_least_tokens", "least_tokens"], "demo_steps": 1200, "epochs": 8},
        kl_ref={"coef": {"schedule": "linear", "start": 0.5, "end": 0.0, "steps": 1024}},
        entropy={"coef": 0.01, "target": 0.5, "controller": "temperature", "rate": 0.2},
        logging={"plots": True},
    )
    result = train(cfg, tmp_path, env_factory=ToyRoutingEnv, resume=False)
    bc = result.bc_metrics
    # the heuristics break ties (idle servers) at random, so the clone cannot match every choice (chance: 0.25)
    assert len(bc) == 8 and bc[-1]["ce_loss"] < bc[0]["ce_loss"] and bc[-1]["accuracy"] > 0.6
    bc_router = PPORouter.from_checkpoint(tmp_path / "bc_policy.pt")
    bc_return = mean_return(lambda obs, env: bc_router.decide(None, rows=obs))
    assert bc_return > random_return() + 30  # the clone already routes far better than random
    rows = result.metrics
    assert rows[0]["kl_coef"] == pytest.approx(0.5) and rows[-1]["kl_coef"] < rows[0]["kl_coef"]
    assert all(r["kl_ref"] >= 0 for r in rows)
    # After each update the controller scales the temperature by exp(rate * (target - H/log N) / target).
    previous = 1.0
    for r in rows:
        factor = np.exp(0.2 * (0.5 - r["entropy_norm"]) / 0.5)
        assert r["temperature"] == pytest.approx(previous * factor, rel=1e-5)
        previous = r["temperature"]
    assert len({round(r["temperature"], 6) for r in rows}) == len(rows)
    assert (tmp_path / "learning_curves.png").stat().st_size > 10_000
    assert (tmp_path / "bc_metrics.csv").exists()


def test_metrics_csv_and_checkpoint_contents(tmp_path) -> None:
    cfg = toy_config(ppo={"total_timesteps": 512}, logging={"checkpoint_every": 2, "keep_checkpoints": 2})
    train(cfg, tmp_path, env_factory=ToyRoutingEnv, resume=False)
    with open(tmp_path / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["update"]) for r in rows] == [1, 2, 3, 4]
    for column in ("approx_kl", "clip_fraction", "entropy", "explained_variance", "policy_loss", "value_loss",
                   "episode_return_mean", "wall_time", "env_steps_per_s", "time_share_policy", "time_share_env",
                   "action_share/0", "action_share/3", "reward_terms/time_in_system", "reward_terms/completed",
                   "learning_rate", "ent_coef"):
        assert column in rows[0], column
    shares = [float(rows[-1][f"action_share/{i}"]) for i in range(4)]
    assert sum(shares) == pytest.approx(1.0)
    # Learning rate anneals linearly to zero over the run.
    assert float(rows[0]["learning_rate"]) == pytest.approx(3e-3) and float(rows[-1]["learning_rate"]) == pytest.approx(3e-3 / 4)
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["update_000002.pt", "update_000004.pt"]  # older ones pruned, no temp files left
    ckpt = load_checkpoint(latest_checkpoint(tmp_path))
    assert ckpt["update"] == 4 and ckpt["global_step"] == 512
    assert ckpt["reward_composers"] == [{"step": 256}, {"step": 256}]
    assert ckpt["config"]["ppo"]["total_timesteps"] == 512
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["ppo"]["n_steps"] == 64


# ---- resume --------------------------------------------------------------------------------------
class Interrupt(Exception):
    pass


def test_interrupted_run_resumes_to_the_same_result(tmp_path) -> None:
    # Episodes (64 requests) end exactly at rollout boundaries, so a resumed run replays the same
    # seeds and, with RNG, optimizer, scaler, reference and composer states restored, must end
    # with bit-identical weights.
    cfg = toy_config(
        ppo={"total_timesteps": 512},
        bc={"enabled": True, "heuristics": ["cap_least_tokens"], "demo_steps": 256, "epochs": 2},
        kl_ref={"coef": 0.2},
        entropy={"coef": 0.01, "target": 0.6},
        logging={"checkpoint_every": 1},
    )
    straight = train(cfg, tmp_path / "straight", env_factory=ToyRoutingEnv)

    def stop_after_two(row: dict) -> None:
        if row["update"] == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        train(cfg, tmp_path / "resumed", env_factory=ToyRoutingEnv, callback=stop_after_two)
    saved = load_checkpoint(latest_checkpoint(tmp_path / "resumed"))
    assert saved["update"] == 2 and saved["global_step"] == 256 and saved["bc_done"]

    seen: list[tuple[int, int]] = []
    resumed = train(cfg, tmp_path / "resumed", env_factory=ToyRoutingEnv,
                    callback=lambda row: seen.append((row["update"], row["global_step"])))
    assert seen == [(3, 384), (4, 512)]  # counters continue; BC was not redone
    assert resumed.updates == 4 and resumed.global_step == 512
    a, b = load_checkpoint(straight.checkpoint_path), load_checkpoint(resumed.checkpoint_path)
    for key, tensor in a["policy_state"].items():
        assert torch.equal(tensor, b["policy_state"][key]), key
    assert a["reward_composers"] == b["reward_composers"]
    assert a["controller"] == b["controller"] and a["scaler"] == b["scaler"]
    with open(tmp_path / "resumed" / "metrics.csv", newline="") as fh:
        assert [int(r["update"]) for r in csv.DictReader(fh)] == [1, 2, 3, 4]
    assert [r["update"] for r in resumed.metrics] == [1, 2, 3, 4]


def test_resume_loads_saved_parameters_and_refuses_changed_settings(tmp_path) -> None:
    cfg = toy_config(ppo={"total_timesteps": 256}, logging={"checkpoint_every": 1})
    first = train(cfg, tmp_path, env_factory=ToyRoutingEnv)
    saved = load_checkpoint(first.checkpoint_path)["policy_state"]

    # Extending total_timesteps is allowed: training continues from update 2 with the saved weights.
    loaded: list[dict] = []
    longer = toy_config(ppo={"total_timesteps": 384}, logging={"checkpoint_every": 1})
    ckpt_update = load_checkpoint(latest_checkpoint(tmp_path))["update"]
    assert ckpt_update == 2
    again = train(longer, tmp_path, env_factory=ToyRoutingEnv, callback=lambda row: loaded.append(row))
    assert [r["update"] for r in loaded] == [3] and again.global_step == 384
    upd2 = load_checkpoint(tmp_path / "checkpoints" / "update_000002.pt")["policy_state"]
    for key in saved:
        assert torch.equal(saved[key], upd2[key])

    changed = toy_config(ppo={"total_timesteps": 384, "n_steps": 32})
    with pytest.raises(ConfigError, match=r"ppo\.n_steps"):
        train(changed, tmp_path, env_factory=ToyRoutingEnv)

    # A checkpoint written before a key existed resumes when the key is at its default, not otherwise.
    ckpt_path = latest_checkpoint(tmp_path)
    old = load_checkpoint(ckpt_path)
    del old["config"]["ppo"]["advantage_baseline"], old["config"]["policy"]["linear_scores"]
    torch.save(old, ckpt_path)
    even_longer = toy_config(ppo={"total_timesteps": 512}, logging={"checkpoint_every": 1})
    assert train(even_longer, tmp_path, env_factory=ToyRoutingEnv).global_step == 512
    old = load_checkpoint(latest_checkpoint(tmp_path))
    del old["config"]["policy"]["linear_scores"]
    torch.save(old, latest_checkpoint(tmp_path))
    with pytest.raises(ConfigError, match=r"differs at policy\.linear_scores"):
        train(toy_config(ppo={"total_timesteps": 640}, policy={"linear_scores": True}), tmp_path, env_factory=ToyRoutingEnv)

    # resume=False starts over (and clears the old checkpoints).
    fresh = train(cfg, tmp_path, env_factory=ToyRoutingEnv, resume=False)
    assert fresh.updates == 2
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir())[-1] == "update_000002.pt"


# ---- config errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ppo_vidur.yaml", "ppo_demo.yaml"])
def test_shipped_config_loads(name: str) -> None:
    cfg, source = load_config(ROOT / "configs" / name)
    assert source.endswith(name)
    assert cfg["bc"]["heuristics"] == ["least_prefill"] and cfg["reward"].endswith("vidur_ttft.yaml")
    assert cfg["seeds"]["eval"] == [101, 102, 103, 104, 105]
    assert cfg["seeds"]["train_start"] > max(cfg["seeds"]["eval"])
    assert cfg["env"] == "configs/envs/codellama34b_tp2_4r.yaml"


def write_config(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "data, location, expected",
    [
        ({"ppo": {"lerning_rate": 1e-3}}, "ppo.lerning_rate", "did you mean 'learning_rate'"),
        ({"polcy": {}}, "polcy", "unknown key"),
        ({"ppo": {"n_envs": 0}}, "ppo.n_envs", "expected an integer from 1 to 256, got 0"),
        ({"ppo": {"gamma": 1.5}}, "ppo.gamma", "expected a number in [0, 1], got 1.5"),
        ({"ppo": {"anneal_lr": "yes"}}, "ppo.anneal_lr", "expected true or false"),
        ({"ppo": {"minibatch_size": 4096}}, "ppo.minibatch_size", "at most n_envs * n_steps"),
        ({"seeds": {"train_start": 103}}, "seeds.train_start", "above every evaluation seed"),
        ({"entropy": {"coef": {"schedule": "wobbly"}}}, "entropy.coef.schedule", "expected one of"),
        ({"entropy": {"coef": {"schedule": "linear", "start": 0.1, "end": 0.0}}}, "entropy.coef", "steps"),
        ({"entropy": {"target": 0}}, "entropy.target", "(0, 1]"),
        ({"entropy": {"coef": {"schedule": "linear", "start": 0.01, "end": -0.01, "steps": 1000}}},
         "entropy.coef", "expected a non-negative coefficient, got -0.01 at step 2000"),
        ({"kl_ref": {"coef": 0.1}, "bc": {"enabled": False}}, "kl_ref.coef", "bc.enabled is false"),
        ({"bc": {"heuristics": []}}, "bc.heuristics", "non-empty list"),
        ({"version": 2}, "version", "expected 1"),
        ({"ppo": []}, "ppo", "expected a mapping"),
    ],
)
def test_bad_config_keys_name_file_and_path(tmp_path, data, location, expected) -> None:
    path = write_config(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {location}"), message
    assert expected in message, message


def test_missing_file_bad_or_duplicate_yaml_and_unknown_heuristic(tmp_path) -> None:
    with pytest.raises(ConfigError, match="nope.yaml: expected an existing YAML file, got a missing path"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "broken.yaml"
    bad.write_text("ppo: [1, 2\n")
    with pytest.raises(ConfigError, match="broken.yaml: expected valid YAML"):
        load_config(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text("version: 1\nppo:\n  n_steps: 64\n  n_steps: 128\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: .*duplicate key 'n_steps' \(first at line 3\)"):
        load_config(twice)
    cfg = toy_config(bc={"enabled": True, "heuristics": ["psychic"], "demo_steps": 128, "epochs": 1})
    with pytest.raises(ConfigError, match=r"bc\.heuristics: expected a heuristic router, got 'psychic'"):
        train(cfg, tmp_path / "run", env_factory=ToyRoutingEnv)


def test_missing_env_file_is_reported_with_key(tmp_path) -> None:
    path = write_config(tmp_path, {"env": "configs/envs/does_not_exist.yaml"})
    with pytest.raises(ConfigError, match=r"bad\.yaml: env: expected an existing file"):
        train(path, tmp_path / "run")


def test_env_contract_violations_are_clear(tmp_path) -> None:
    class NanEnv(ToyRoutingEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, float("nan"), terminated, truncated, info

    with pytest.raises(FloatingPointError, match="non-finite reward"):
        train(toy_config(ppo={"total_timesteps": 128}), tmp_path / "nan", env_factory=NanEnv)

    import gymnasium as gym

    class FlatEnv(ToyRoutingEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Box(0, 1, shape=(12,))

    with pytest.raises(TypeError, match="2-D Box"):
        train(toy_config(), tmp_path / "flat", env_factory=FlatEnv)


def test_train_command_reports_config_errors(tmp_path, capsys) -> None:
    import argparse

    from schedulers.cli import EXIT_BAD_INPUT, add_train_command

    parser = argparse.ArgumentParser()
    add_train_command(parser.add_subparsers())
    path = write_config(tmp_path, {"ppo": {"clip_coef": -1}})
    args = parser.parse_args(["train", str(path), "--out", str(tmp_path / "run")])
    assert EXIT_BAD_INPUT == 2 and args.func(args) == EXIT_BAD_INPUT
    assert "ppo.clip_coef: expected a positive number, got -1" in capsys.readouterr().err


def test_tensorboard_scalars_when_available(tmp_path, monkeypatch) -> None:
    import types

    calls: list[tuple] = []

    class FakeWriter:
        def __init__(self, log_dir, purge_step=None):
            calls.append(("init", log_dir, purge_step))

        def add_scalar(self, key, value, step):
            calls.append((key, value, step))

        def close(self):
            calls.append(("close",))

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = FakeWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    train(toy_config(ppo={"total_timesteps": 256}, logging={"tensorboard": True}), tmp_path, env_factory=ToyRoutingEnv)
    assert calls[0] == ("init", str(tmp_path / "tensorboard"), None)
    assert [c[2] for c in calls if c[0] == "approx_kl"] == [128, 256]
    assert any(c[0] == "action_share/2" for c in calls) and calls[-1] == ("close",)


def test_every_error_of_a_training_config_is_reported_at_once(tmp_path) -> None:
    path = write_config(tmp_path, {"ppo": {"clip_coef": -1, "n_stepz": 3}, "policy": {"activation": "sine"}})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    paths = {e.path for e in info.value.errors}
    assert {"ppo.clip_coef", "ppo.n_stepz", "policy.activation"} <= paths
    assert "did you mean 'n_steps'?" in str(info.value)


def test_reward_scaled_twice_is_refused(tmp_path) -> None:
    """A reward config that scales every term by return_std and ppo.reward_scaling would scale twice."""
    from rewardkit import RewardComposer

    class ScaledEnv(ToyRoutingEnv):
        def __init__(self) -> None:
            super().__init__()
            self.composer = RewardComposer.from_yaml(ROOT / "configs" / "rewards" / "vidur_ttft.yaml")

    cfg = toy_config(ppo={"reward_scaling": True})
    with pytest.raises(ConfigError, match=r"ppo\.reward_scaling: expected false: the reward config already divides"):
        train(cfg, tmp_path / "run", env_factory=ScaledEnv)


# ---- per-request credit ----------------------------------------------------------------------------
def request_env() -> ToyRoutingEnv:
    return ToyRoutingEnv(reward_credit="request")


def test_request_credits_reach_the_decisions_that_earned_them(tmp_path) -> None:
    """Each request's reward arrives when it completes; the trainer files it under its routing step."""
    from schedulers.train.trainer import Trainer

    cfg, source = load_config(toy_config(ppo={"n_steps": 128, "total_timesteps": 256, "reward_scaling": False}))
    trainer = Trainer(cfg, source, tmp_path, request_env)
    trainer.experience.restart_all()
    trainer._collect_rollout()
    # The toy env's credit for decision d is minus that request's sojourn, fixed when it was routed:
    # replay the same episodes with the recorded actions and compare step by step.
    for i in range(trainer.n_envs):
        env = request_env()
        expected = []
        for episode in range(2):
            env.reset(seed=trainer.cfg["seeds"]["train_start"] + i + trainer.n_envs * episode)
            for t in range(64):
                a = int(trainer.buffer.actions[64 * episode + t, i])
                expected.append(-(sum(env._queues[a]) + env._size) / env.speeds[a])
                env.step(a)
        assert trainer.buffer.rewards[:, i].tolist() == pytest.approx(expected, rel=1e-5)
    trainer.close()


def test_ppo_learns_from_delayed_per_request_credit(tmp_path) -> None:
    result = train(toy_config(), tmp_path, env_factory=request_env, resume=False)
    assert_closes_most_of_the_gap(result.policy_path, "per-request credit")


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"ppo": {"n_steps": 100}}, r"ppo\.n_steps: expected a multiple of the episode length 64"),
        ({"bc": {"enabled": True, "heuristics": ["jsq"], "demo_steps": 200}},
         r"bc\.demo_steps: expected demo_steps / \(heuristics \* n_envs\) to be a multiple of the episode length 64"),
    ],
)
def test_per_request_credit_needs_whole_episodes(tmp_path, section, expected) -> None:
    cfg = toy_config(**section)
    cfg["ppo"].setdefault("minibatch_size", 64)
    with pytest.raises(ConfigError, match=expected):
        train(cfg, tmp_path / "run", env_factory=request_env)


# ---- paired rollouts: envs sharing a seed, input-dependent baseline --------------------------------
def test_envs_sharing_a_seed_see_the_same_arrivals(tmp_path) -> None:
    from schedulers.train.trainer import Trainer

    cfg, source = load_config(toy_config(ppo={"n_envs": 4, "envs_per_seed": 2, "n_steps": 64, "total_timesteps": 256,
                                              "reward_scaling": False, "advantage_baseline": "paired"}))
    trainer = Trainer(cfg, source, tmp_path, request_env)
    seeds = [[trainer.experience.episode_seed(i) for i in range(4)]]
    trainer.experience.restart_all()
    trainer._collect_rollout()  # one whole episode per env
    seeds.append([trainer.experience.episode_seed(i) for i in range(4)])
    assert seeds == [[1000, 1000, 1001, 1001], [1002, 1002, 1003, 1003]]
    # the arriving request's size (last feature) is the same at every step within a group only
    sizes = trainer.buffer.obs[:, :, 0, -1]
    assert torch.equal(sizes[:, 0], sizes[:, 1]) and torch.equal(sizes[:, 2], sizes[:, 3])
    assert not torch.equal(sizes[:, 0], sizes[:, 2])
    # gamma 0.95: each advantage is the env's return minus its partner's at the same step
    returns = trainer.buffer.returns
    assert returns[-1].tolist() == pytest.approx(trainer.buffer.rewards[-1].tolist())
    assert returns[-2].tolist() == pytest.approx((trainer.buffer.rewards[-2] + 0.95 * trainer.buffer.rewards[-1]).tolist())
    adv = trainer.buffer.advantages
    assert adv[:, 0].tolist() == pytest.approx((returns[:, 0] - returns[:, 1]).tolist(), abs=1e-5)
    assert adv[:, 3].tolist() == pytest.approx((returns[:, 3] - returns[:, 2]).tolist(), abs=1e-5)
    trainer.close()


def test_paired_advantages_leave_one_out_and_reject_misaligned_episodes() -> None:
    from schedulers.rl.rollout import paired_advantages

    rewards = torch.tensor([[1.0, 2.0, 6.0], [3.0, 5.0, 1.0]])
    dones = torch.tensor([[False] * 3, [True] * 3])
    adv, ret = paired_advantages(rewards, dones, envs_per_seed=3, gamma=0.5)
    assert ret.tolist() == [[2.5, 4.5, 6.5], [3.0, 5.0, 1.0]]
    assert adv[0].tolist() == pytest.approx([2.5 - 5.5, 4.5 - 4.5, 6.5 - 3.5])
    assert adv.sum(dim=1).tolist() == pytest.approx([0.0, 0.0])  # a group's advantages cancel
    values = torch.tensor([[0.5, 1.5, 2.5], [0.0, 1.0, 1.0]])
    adv_v, ret_v = paired_advantages(rewards, dones, envs_per_seed=3, gamma=0.5, values=values)
    assert torch.equal(ret_v, ret)  # the critic's targets do not change
    assert adv_v[0].tolist() == pytest.approx([2.0 - 3.5, 3.0 - 3.0, 4.0 - 2.5])  # residuals G - V: 2, 3, 4
    with pytest.raises(ValueError, match="same steps"):
        paired_advantages(rewards, torch.tensor([[True, False, False], [True, True, True]]), 3, 0.5)
    with pytest.raises(ValueError, match="last step must end an episode"):
        paired_advantages(rewards, torch.zeros(2, 3, dtype=torch.bool), 3, 0.5)
    with pytest.raises(ValueError, match="divide n_envs"):
        paired_advantages(rewards, dones, 2, 0.5)


def test_ppo_learns_with_the_paired_baseline(tmp_path) -> None:
    cfg = toy_config(ppo={"n_envs": 4, "envs_per_seed": 2, "advantage_baseline": "paired", "gamma": 0.0,
                          "total_timesteps": 8192})
    result = train(cfg, tmp_path, env_factory=request_env, resume=False)
    assert_closes_most_of_the_gap(result.policy_path, "paired baseline")


@pytest.mark.parametrize(
    ("ppo", "expected"),
    [
        ({"envs_per_seed": 3}, r"ppo\.envs_per_seed: expected a divisor of ppo\.n_envs = 2, got 3"),
        ({"advantage_baseline": "paired"}, r"ppo\.envs_per_seed: expected envs_per_seed >= 2 with advantage_baseline"),
        ({"advantage_baseline": "pairs"}, r"ppo\.advantage_baseline: expected one of"),
    ],
)
def test_paired_settings_are_checked(ppo, expected) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(toy_config(ppo=ppo))


def test_paired_baseline_needs_episodes_aligned_with_rollouts(tmp_path) -> None:
    cfg = toy_config(ppo={"envs_per_seed": 2, "advantage_baseline": "paired", "n_steps": 48, "minibatch_size": 48})
    with pytest.raises(ConfigError, match=r"ppo\.advantage_baseline: expected rollouts of whole episodes"):
        train(cfg, tmp_path, env_factory=ToyRoutingEnv, resume=False)


def test_a_run_can_start_from_another_runs_clone_and_refuses_one_of_another_shape(tmp_path) -> None:
    """``bc.from_policy``: runs that differ only in their reward share one warm start (the demo's two
    routers); BC reports its stages to ``bc_callback`` (the demo's progress bar)."""
    stages = []
    bc = {"enabled": True, "heuristics": ["cap_least_tokens"], "demo_steps": 256, "epochs": 2}
    clone = train(toy_config(ppo={"total_timesteps": 0}, bc=bc), tmp_path / "clone", env_factory=ToyRoutingEnv,
                  resume=False, bc_callback=lambda done, total: stages.append((done, total)))
    assert stages == [(1, 3), (2, 3), (3, 3)]
    cloned = tmp_path / "clone" / "bc_policy.pt"
    runs = {}
    for gamma in (0.0, 0.95):
        out = tmp_path / f"run{gamma}"
        train(toy_config(ppo={"total_timesteps": 128, "gamma": gamma}, bc={**bc, "from_policy": str(cloned)}), out,
              env_factory=ToyRoutingEnv, resume=False)
        runs[gamma] = load_checkpoint(out / "bc_policy.pt")
    start = load_checkpoint(cloned)["policy_state"]
    for data in runs.values():
        assert all(torch.equal(start[k], v) for k, v in data["policy_state"].items())
    assert clone.updates == 0
    with pytest.raises(ConfigError, match="bc.from_policy: expected a clone of this run's policy shape"):
        train(toy_config(ppo={"total_timesteps": 128}, policy={"hidden_sizes": [8]},
                         bc={**bc, "from_policy": str(cloned)}), tmp_path / "other", env_factory=ToyRoutingEnv,
              resume=False)
