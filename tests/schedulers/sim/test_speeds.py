"""Heterogeneous replicas and unannounced slowdowns: config, speed scaling against Vidur's own
prediction, slowdown determinism and invisibility, the speed-aware heuristics and the online speed
estimator, the same heuristics inside Vidur's Simulator, and a short training on a tiny mixed cluster."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from rewardkit.errors import ConfigError
from schedulers.routing.policies.speed import expected_wait
from schedulers.routing.policy import make_policy
from schedulers.routing.observation import FEATURE_NAMES
from schedulers.routing.snapshot import ReplicaSnapshot
from schedulers.routing.speed_estimator import SpeedEstimator
from schedulers.sim.env_config import (
    env_config_from_dict,
    load_env_config,
    replica_setup_from_spec,
    replica_setup_spec,
    with_overrides,
)
from schedulers.sim.slowdowns import SlowdownConfig, SlowdownEvent, SlowdownSchedule

ROOT = Path(__file__).resolve().parents[3]
MIXED = [{"count": 1, "speed": 1.0}, {"count": 1, "speed": 0.5}]


# ---- config ----------------------------------------------------------------------------------------
def test_replica_groups_set_count_and_speeds_and_old_yamls_still_load():
    hetero = load_env_config(ROOT / "configs" / "envs" / "hetero.yaml")
    assert hetero.num_replicas == 4 and hetero.replica_speeds == (1.0, 1.0, 0.55, 0.55) and hetero.heterogeneous
    old = load_env_config(ROOT / "configs" / "envs" / "codellama34b_tp2_4r.yaml")
    assert old.replica_speeds == (1.0,) * 4 and not old.heterogeneous and old.slowdowns is None
    # twice the replicas scales every group alike
    eight = with_overrides(hetero, num_replicas=8)
    assert eight.replica_speeds == (1.0,) * 4 + (0.55,) * 4
    slow = load_env_config(ROOT / "configs" / "envs" / "slowdowns.yaml")
    assert slow.slowdowns.stationary_slow_share == pytest.approx(0.25)
    # the plain-data form reads back
    assert env_config_from_dict(hetero.to_dict()).replica_speeds == hetero.replica_speeds


@pytest.mark.parametrize(
    "data, path, expected",
    [
        ({"replicas": [{"count": 2, "speed": -1}]}, "replicas[0].speed", "from 0.01 to 100"),
        ({"replicas": [{"speed": 1.0}]}, "replicas[0].count", "missing required key"),
        ({"replicas": [{"count": 2, "sped": 1.0}]}, "replicas[0].sped", "did you mean 'speed'"),
        ({"replicas": MIXED, "num_replicas": 3}, "num_replicas", "sum of the replica groups"),
        ({"slowdowns": {"mean_interval_s": 60, "factor": [0.5, 1.5]}}, "slowdowns.factor", "from 0.01 to 1"),
        ({"slowdowns": {"duration_s": [10, 20]}}, "slowdowns", "mean_interval_s"),
        ({"slowdowns": {"events": [{"replica": 9, "start_s": 0, "duration_s": 1, "factor": 0.5}]}},
         "slowdowns.events[0].replica", "below 4"),
    ],
)
def test_bad_cluster_keys_name_the_key(data, path, expected):
    with pytest.raises(ConfigError) as err:
        env_config_from_dict(data, source="configs/envs/x.yaml")
    assert err.value.path == path and expected in str(err.value) and "configs/envs/x.yaml" in str(err.value)


def test_scaling_grouped_replicas_needs_a_multiple():
    cfg = env_config_from_dict({"replicas": MIXED})
    with pytest.raises(ConfigError, match="multiple of 2"):
        with_overrides(cfg, num_replicas=3)


def test_cluster_spec_for_vidur_round_trips():
    cfg = env_config_from_dict({"replicas": MIXED, "slowdowns": {"mean_interval_s": 30.0}})
    speeds, slowdowns = replica_setup_from_spec(replica_setup_spec(cfg), 2)
    assert speeds == (1.0, 0.5) and slowdowns == cfg.slowdowns
    assert replica_setup_spec(env_config_from_dict({})) == ""
    assert replica_setup_from_spec("", 3) == ((1.0, 1.0, 1.0), None)
    speeds, _ = replica_setup_from_spec(str(ROOT / "configs" / "envs" / "hetero.yaml"), 4)
    assert speeds == (1.0, 1.0, 0.55, 0.55)
    with pytest.raises(ConfigError, match="totalling 3"):
        replica_setup_from_spec(json.dumps({"replicas": MIXED}), 3)


# ---- slowdown process --------------------------------------------------------------------------------
def test_slowdowns_depend_only_on_the_seed():
    cfg = SlowdownConfig(mean_interval_s=30.0, duration_s=(5.0, 10.0), factor=(0.3, 0.5))
    a, b = SlowdownSchedule(cfg, 4, seed=7), SlowdownSchedule(cfg, 4, seed=7)
    # query b in another order and at other times: the schedule must not change
    for t in np.linspace(300, 0, 97):
        b.factor(3, float(t))
    times = np.linspace(0, 300, 601)
    assert [a.factors(t).tolist() for t in times] == [b.factors(t).tolist() for t in times]
    assert a.intervals(300) == b.intervals(300)
    c = SlowdownSchedule(cfg, 4, seed=8)
    assert a.intervals(300) != c.intervals(300)
    slowed = [f for t in times for f in a.factors(t) if f < 1]
    assert slowed and all(0.3 <= f <= 0.5 for f in slowed)


def test_slowdown_share_matches_the_stationary_share():
    cfg = SlowdownConfig(mean_interval_s=120.0, duration_s=(30.0, 50.0), factor=(0.35, 0.45))
    shares = [SlowdownSchedule(cfg, 4, seed=s).slow_share(100.0) for s in range(40)]
    assert np.mean(shares) == pytest.approx(0.25, abs=0.06)


def test_explicit_events_multiply_and_unknown_replicas_are_never_slowed():
    cfg = SlowdownConfig(events=(SlowdownEvent(1, 2.0, 3.0, 0.5), SlowdownEvent(1, 4.0, 2.0, 0.5)))
    s = SlowdownSchedule(cfg, 2, seed=0)
    assert [s.factor(1, t) for t in (1.0, 2.0, 4.5, 5.5, 6.0)] == [1.0, 0.5, 0.25, 0.5, 1.0]
    assert s.factor(0, 4.5) == 1.0
    assert SlowdownSchedule(None, 2, seed=0).factors(10.0).tolist() == [1.0, 1.0]


# ---- speed estimator ---------------------------------------------------------------------------------
def test_speed_estimator_follows_a_step_change_at_its_time_constant():
    est = SpeedEstimator([1.0, 0.5], tau_s=2.0)
    assert est.estimates.tolist() == [1.0, 0.5]  # declared speeds until a batch ends
    nominal = 0.05
    for _ in range(200):  # 10 s of batches at full speed
        est.observe(0, nominal, nominal / 1.0)
    assert est.estimates[0] == pytest.approx(1.0)
    worked = 0.0
    history = []
    while worked < 6.0:  # the replica drops to 40%: each batch now takes 2.5x as long
        worked += nominal / 0.4
        history.append((worked, est.observe(0, nominal, nominal / 0.4)))
    after_half_tau = next(v for w, v in history if w >= 1.0)
    assert 0.6 < after_half_tau < 0.9  # moving, not there yet
    assert history[-1][1] == pytest.approx(0.4 + 0.6 * np.exp(-3.0), abs=0.02)  # ~95% of the step after 3 tau
    assert est.estimates[1] == 0.5 and est.samples.tolist() == [200 + len(history), 0]
    with pytest.raises(ValueError):
        est.observe(1, 0.05, 0.0)
    with pytest.raises(ValueError):
        SpeedEstimator([1.0, 0.0])


# ---- heuristics on crafted states --------------------------------------------------------------------


def crafted() -> ReplicaSnapshot:
    """Replica 0 fast and busy, replica 1 slow and idle-ish, replica 2 declared fast but measured slow."""
    return ReplicaSnapshot.build(
        waiting=[2, 1, 1],
        running=[6, 2, 2],
        prefill_tokens=[1000, 300, 400],
        decoded_tokens=[400, 300, 100],
        declared_speed=[1.0, 0.25, 1.0],
        measured_speed=[1.0, 0.25, 0.3],
    )


def choose(name: str, snap: ReplicaSnapshot, prompt_tokens: float = 0.0, true_speed: np.ndarray | None = None) -> int:
    """The pick of a fresh policy ``name`` (seeded 0) for one request."""
    return make_policy(name, seed=0).decide(snap, prompt_tokens, true_speed=true_speed)


def test_capacity_aware_heuristics_divide_by_declared_speed():
    snap = crafted()
    assert choose("jsq", snap) in (1, 2) and choose("least_prefill", snap) == 1
    assert choose("cap_jsq", snap) == 2  # 8/1, 3/0.25=12, 3/1
    assert choose("cap_least_tokens", snap) == 2  # 1400, 2400, 500
    # (prefill + prompt) / declared: 1200, 2000, 600
    assert choose("cap_least_prefill", snap, prompt_tokens=200) == 2


def test_adaptive_uses_measured_speed_and_oracle_true_speed():
    snap = crafted()
    # measured: 1200/1, 500/0.25=2000, 600/0.3=2000 -> the busy fast replica
    assert choose("adaptive", snap, prompt_tokens=200) == 0
    np.testing.assert_allclose(expected_wait(snap, 200, snap.measured_speed), [1200, 2000, 2000])
    # the oracle knows replica 2 recovered (true speed 1.0) and replica 0 slowed down
    assert choose("oracle", snap, prompt_tokens=200, true_speed=np.array([0.2, 0.25, 1.0])) == 2
    with pytest.raises(ValueError, match="true current speeds"):
        choose("oracle", snap)
    # the new prompt matters: an empty slow replica loses to a lightly loaded fast one for a long prompt
    two = ReplicaSnapshot.build(prefill_tokens=[100, 0], declared_speed=[1.0, 0.5], measured_speed=[1.0, 0.5])
    assert choose("cap_least_prefill", two, prompt_tokens=2000) == 0
    assert choose("cap_least_prefill", two, prompt_tokens=50) == 1


def test_observation_features_never_name_hidden_state():
    hidden = ("slowdown", "factor", "true", "decode_tokens", "output")
    assert not [f for f in FEATURE_NAMES if any(h in f for h in hidden)]
    assert not [f for f in ReplicaSnapshot.__dataclass_fields__ if any(h in f for h in hidden)]


# ---- on the simulator ----------------------------------------------------------------------------------
def test_speed_scaled_batch_time_is_vidurs_prediction_over_speed(vidur_predictor):
    """A replica at speed 0.5 takes exactly twice Vidur's predicted time for the same batch."""
    from vidur.entities import Batch, Request

    from schedulers.sim.speed_scaling import _TIME_FIELDS, BatchLog, SpeedScaledPredictor

    def batch() -> Batch:
        requests = [Request(arrived_at=0.0, num_prefill_tokens=p, num_decode_tokens=5) for p in (300, 120)]
        b = Batch(0, requests, [300, 120], [300, 120])
        b.on_schedule(2.0)
        return b

    reference = vidur_predictor.get_execution_time(batch(), 0)
    log = BatchLog()
    half = SpeedScaledPredictor(vidur_predictor, 0, 0.5, lambda r, t: 1.0, log)
    scaled = half.get_execution_time(batch(), 0)
    assert reference.total_time > 0
    assert scaled.total_time == pytest.approx(2.0 * reference.total_time, rel=1e-12)
    for name in _TIME_FIELDS:
        assert getattr(scaled, name) == pytest.approx(2.0 * getattr(reference, name), rel=1e-12)
    rec = log.records[0]
    assert (rec.start, rec.nominal_s, rec.tokens) == (2.0, pytest.approx(reference.total_time), 420)
    assert rec.end == pytest.approx(2.0 + 2.0 * reference.total_time)
    # a slowdown active at the batch's start multiplies in
    slowed = SpeedScaledPredictor(vidur_predictor, 0, 0.5, lambda r, t: 0.4 if t >= 1.0 else 1.0, None)
    assert slowed.get_execution_time(batch(), 0).total_time == pytest.approx(reference.total_time / 0.2, rel=1e-12)


def run(env, policy, seed, actions=None):
    from schedulers.environments import policy_action
    from schedulers.routing.policy import make_policy

    obs, _ = env.reset(seed=seed)
    router = make_policy(policy, seed=seed) if actions is None else None
    seen, times, i = [obs], [env.sim_time], 0
    while True:
        a = actions[i] if actions is not None else policy_action(router, env, obs)
        obs, _, _, truncated, _ = env.step(a)
        i += 1
        if truncated:
            return seen, times
        seen.append(obs)
        times.append(env.sim_time)


def test_slow_replica_runs_slower_in_the_env(make_tiny_env, tiny_config):
    """Same routing on speeds (1, 0.5): every batch on replica 1 takes twice its nominal time."""
    cfg = with_overrides(tiny_config, replicas=MIXED)
    env = make_tiny_env(env_config=cfg, evaluate=True)
    actions = [i % 2 for i in range(cfg.requests_per_episode)]
    obs, _ = env.reset(seed=3)
    records = []
    env._scheduler.batch_log.records = _Recorder(records)
    for a in actions:
        obs, _, _, truncated, _ = env.step(a)
    by_replica = {r: [x for x in records if x.replica == r] for r in (0, 1)}
    assert by_replica[0] and by_replica[1]
    for x in by_replica[0]:
        assert x.actual_s == pytest.approx(x.nominal_s, rel=1e-12)
    for x in by_replica[1]:
        assert x.actual_s == pytest.approx(2.0 * x.nominal_s, rel=1e-12)
    np.testing.assert_allclose(obs[:, FEATURE_NAMES.index("declared_speed")], [1.0, 0.5])
    np.testing.assert_allclose(obs[:, FEATURE_NAMES.index("measured_speed")], [1.0, 0.5], rtol=1e-9)
    m = env.episode_metrics()
    ttft = {r: [] for r in (0, 1)}
    for i, req in enumerate(env._ep.requests):
        ttft[actions[i]].append(req._prefill_completed_at - req.arrived_at)
    assert np.mean(ttft[1]) > 1.5 * np.mean(ttft[0]) and m.complete


class _Recorder(list):
    """A batch-log record list that also copies every record into ``sink`` (the tracker empties the log)."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def append(self, item):
        self.sink.append(item)
        super().append(item)


def test_slowdowns_are_identical_for_every_policy_and_hidden_until_batches_end(make_tiny_env, tiny_config):
    event = {"replica": 0, "start_s": 4.0, "duration_s": 6.0, "factor": 0.4}
    slow_cfg = with_overrides(tiny_config, slowdowns={"mean_interval_s": 20.0, "events": [event]})
    env = make_tiny_env(env_config=slow_cfg)
    run(env, "round_robin", seed=11)
    schedule_a = env._scheduler.slowdown_schedule.intervals(100.0)
    run(env, "least_prefill", seed=11)
    assert env._scheduler.slowdown_schedule.intervals(100.0) == schedule_a
    assert (0, 4.0, 10.0, 0.4) in schedule_a

    # Same actions with and without the explicit slowdown (no random process): observations agree
    # until the first batch that started during the slowdown would have ended at full speed (only
    # then can missing progress show), and the measured speed drops once slowed batches end.
    only_event = with_overrides(tiny_config, slowdowns={"events": [event]})
    plain, slowed = make_tiny_env(), make_tiny_env(env_config=only_event)
    actions = [i % 2 for i in range(tiny_config.requests_per_episode)]
    obs_plain, times = run(plain, None, seed=4, actions=actions)
    records = []
    obs_slow, times_slow = [slowed.reset(seed=4)[0]], [slowed.sim_time]
    slowed._scheduler.batch_log.records = _Recorder(records)
    for a in actions[:-1]:
        obs, *_ = slowed.step(a)
        obs_slow.append(obs)
        times_slow.append(slowed.sim_time)
    assert times == times_slow  # arrivals are the same
    first_seen = min(r.start + r.nominal_s for r in records if r.replica == 0 and r.start >= 4.0)
    before = [i for i, t in enumerate(times) if t < first_seen]
    after = [i for i, t in enumerate(times) if t > first_seen + 1.0]
    assert before and after
    for i in before:
        np.testing.assert_array_equal(obs_plain[i], obs_slow[i])
    speed = FEATURE_NAMES.index("measured_speed")
    assert min(obs_slow[i][0, speed] for i in after) < 0.9  # the router notices, from finished batches only


def test_speed_heuristics_inside_vidurs_simulator_match_the_env(make_tiny_env, tiny_config, run_vidur_simulator):
    """Vidur's Simulator with our registered ``adaptive``/``oracle`` gets the same speeds and slowdowns as the env."""
    cfg = with_overrides(tiny_config, replicas=MIXED, slowdowns={"mean_interval_s": 10.0, "duration_s": [3.0, 6.0]})
    env = make_tiny_env(env_config=cfg, evaluate=True, compute_reward=False)
    for policy in ("adaptive", "oracle", "cap_least_prefill"):
        vidur_requests = run_vidur_simulator(cfg, policy, seed=21)
        run(env, policy, seed=21)
        np.testing.assert_allclose(env.episode_metrics().e2e, [r.e2e_time for r in vidur_requests], rtol=1e-12)


def test_short_training_on_a_tiny_heterogeneous_cluster(tmp_path, vidur_predictor):
    """Cloning ``adaptive``, then PPO on 1 fast + 1 slow replica with slowdowns: metrics report KL to the warm start."""
    import csv

    from schedulers.rl.ppo_router import PPORouter
    from schedulers.train.trainer import train

    cfg = yaml.safe_load((ROOT / "configs" / "ppo_slowdowns.yaml").read_text())
    cfg["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")
    cfg["env_overrides"] = {"replicas": MIXED, "slowdowns": {"mean_interval_s": 20.0}}
    cfg["ppo"].update(total_timesteps=128, n_envs=1, n_steps=64, minibatch_size=32, n_epochs=2)
    cfg["entropy"]["coef"] = 0.01
    cfg["bc"].update(demo_steps=80, epochs=2, minibatch_size=32)
    cfg["logging"].update(checkpoint_every=1, plots=True)
    cfg["torch_threads"] = 1
    result = train(cfg, tmp_path / "run")
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert len(rows) == 2 and all(float(r["kl_warm_start"]) >= 0 for r in rows)
    assert float(rows[-1]["kl_warm_start"]) > 0  # PPO moved away from the clone
    assert (tmp_path / "run" / "bc_policy.pt").exists() and (tmp_path / "run" / "learning_curves.png").exists()
    router = PPORouter.from_checkpoint(result.policy_path)
    obs = np.zeros((2, len(FEATURE_NAMES)), np.float32)
    assert router.decide(None, rows=obs) in (0, 1)


def test_shipped_training_configs_for_the_new_setups_load():
    from schedulers.train.config import load_config

    for name in ("ppo_hetero.yaml", "ppo_hetero_tiny.yaml", "ppo_slowdowns.yaml"):
        cfg, _ = load_config(ROOT / "configs" / name)
        assert cfg["bc"]["heuristics"] == ["adaptive"] and cfg["reward"].endswith("vidur_ttft_tail.yaml")
        assert cfg["seeds"]["train_start"] > max(cfg["seeds"]["eval"])
        env = load_env_config(ROOT / cfg["env"])
        assert env.heterogeneous and env.requests_per_episode == 1000


def test_short_per_request_training_on_a_tiny_cluster_with_slowdowns(tmp_path, vidur_predictor):
    """configs/ppo_slowdowns_request.yaml shrunk: cloning least_prefill, then PPO on per-request credit."""
    import csv

    from schedulers.train.trainer import train

    cfg = yaml.safe_load((ROOT / "configs" / "ppo_slowdowns_request.yaml").read_text())
    cfg["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")  # 80 requests per episode
    cfg["reward"] = str(ROOT / cfg["reward"])
    cfg["env_overrides"] = {"replicas": MIXED, "slowdowns": {"mean_interval_s": 20.0}}
    cfg["ppo"].update(total_timesteps=320, n_envs=2, n_steps=80, minibatch_size=40, n_epochs=2)
    cfg["bc"].update(demo_steps=160, epochs=2, minibatch_size=32)
    cfg["logging"].update(checkpoint_every=1, plots=False)
    result = train(cfg, tmp_path / "run")
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert len(rows) == 2 and result.global_step == 320
    # every decision of both episodes got its request's (negative, scaled) credit
    assert all(float(r["reward_mean"]) < 0 for r in rows)
    assert all(float(r["episodes"]) == 2 for r in rows)
    assert float(rows[-1]["kl_warm_start"]) > 0
    with pytest.raises(ConfigError, match=r"ppo\.n_steps: expected a multiple of the episode length 80"):
        train({**cfg, "ppo": {**cfg["ppo"], "n_steps": 60, "minibatch_size": 30}}, tmp_path / "bad")


def test_shipped_per_request_config_trains_on_whole_episodes():
    from schedulers.sim.reward_context import reward_credit
    from schedulers.train.config import load_config
    from rewardkit import RewardComposer

    cfg, _ = load_config(ROOT / "configs" / "ppo_slowdowns_request.yaml")
    assert cfg["bc"]["heuristics"] == ["least_prefill"] and cfg["ppo"]["gamma"] == 0.0
    reward = ROOT / cfg["reward"]
    assert reward_credit(RewardComposer.from_yaml(reward).context_keys(), str(reward)) == "request"
    env = load_env_config(ROOT / cfg["env"])
    assert cfg["ppo"]["n_steps"] % env.requests_per_episode == 0
    assert (cfg["bc"]["demo_steps"] // cfg["ppo"]["n_envs"]) % env.requests_per_episode == 0
