"""The Vidur objective: trains with the trial's reward, reports evaluations, returns TTFT p99 / round_robin."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from rewardkit.optimize import BayesianRewardOptimizer, resolve_objective
from schedulers.tune.vidur_objective import TUNE_SEED_BASE, VidurObjective

ROOT = Path(__file__).resolve().parents[3]
REWARD_TTFT = ROOT / "configs" / "rewards" / "vidur_ttft.yaml"
pytestmark = pytest.mark.vidur


def tiny_train_config(tmp_path: Path) -> Path:
    """configs/tune/ppo_tune.yaml on the tiny env with a budget of 4 updates of 128 decisions."""
    cfg = yaml.safe_load((ROOT / "configs" / "tune" / "ppo_tune.yaml").read_text())
    cfg["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")
    cfg["ppo"].update(total_timesteps=512, n_envs=1, n_steps=128, minibatch_size=64, n_epochs=2)
    cfg["entropy"]["coef"] = 0.01
    cfg["bc"].update(demo_steps=128, epochs=2, minibatch_size=64)
    cfg["logging"]["progress"] = False
    path = tmp_path / "tiny_tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_vidur_objective_trains_with_each_trials_reward(tmp_path):
    objective = VidurObjective(train_config=tiny_train_config(tmp_path), n_seeds=2, eval_every=2)
    BayesianRewardOptimizer.show_progress = False
    opt = BayesianRewardOptimizer(
        ROOT / "configs" / "rewards" / "vidur_ttft.yaml",
        {"components.time_in_system.weight": {"type": "float", "low": -1.0, "high": 0.0}},
        objective, study_name="vidur", storage=str(tmp_path / "vidur.journal"), seed=0, n_seeds=2,
        pruner="median")
    opt.optimize(n_trials=2)
    trials = opt.study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE], [
        t.user_attrs.get("rewardkit.error") for t in trials]
    for t in trials:
        folder = opt.trial_dir(t.number)
        # the training run read the trial's reward file, whose weight is the sampled one
        trained = yaml.safe_load((folder / "train" / "config.yaml").read_text())
        assert Path(trained["reward"]) == (folder / "reward.yaml").resolve()
        reward = yaml.safe_load((folder / "reward.yaml").read_text())
        assert reward["components"]["time_in_system"]["weight"] == t.params["components.time_in_system.weight"]
        # paired tuning seeds, clear of the training config's evaluation seeds
        assert t.user_attrs["seeds"] == [TUNE_SEED_BASE, TUNE_SEED_BASE + 1]
        assert not set(t.user_attrs["seeds"]) & {101, 102, 103, 104, 105}
        # intermediate values at updates 2 and 4 (the pruner's steps are PPO updates), then the final value
        assert sorted(t.intermediate_values) == [2, 4]
        # the final update's evaluation is the result, not simulated twice: 2 evaluations x 2 seeds x 80 requests
        assert t.intermediate_values[4] == pytest.approx(t.value)
        # per-seed values for paired validation; cost in training decisions (128 demos + 512 PPO steps)
        assert t.user_attrs["rewardkit.seed_values"] == pytest.approx(t.user_attrs["ttft_p99_ratio_per_seed"])
        assert t.user_attrs["rewardkit.cost"] == 128 + 512 == objective.full_cost
        assert t.user_attrs["eval_requests"] == 2 * 2 * 80
        assert t.value == pytest.approx(t.user_attrs["ttft_p99_ratio"])
        assert t.value == pytest.approx(sum(t.user_attrs["ttft_p99_ratio_per_seed"]) / 2)
        assert 0.2 < t.value < 5.0 and 0.2 < t.user_attrs["e2e_mean_ratio"] < 5.0
    assert len(objective._baseline_cache) == 2  # round_robin simulated once per seed for the study


def test_repeats_phases_and_training_settings_map_onto_the_training_config(tmp_path):
    """No simulation: the config and seeds each (phase, repeat, settings) would train and evaluate with."""
    from optuna.trial import FixedTrial

    from rewardkit.errors import ConfigError
    from rewardkit.optimize.trial_context import validation_seeds
    from schedulers.tune.vidur_objective import VALIDATE_SEED_BASE

    objective = VidurObjective(train_config=tiny_train_config(tmp_path), n_seeds=2)
    reward = ROOT / "configs" / "rewards" / "vidur_ttft.yaml"
    first = objective.training_config(reward, {"ppo.gamma": 0.5}, repeat=0)
    second = objective.training_config(reward, {}, repeat=2)
    assert first["ppo"]["gamma"] == 0.5 and second["ppo"]["gamma"] == 0.995
    assert (second["seeds"]["torch"], second["seeds"]["train_start"]) == (first["seeds"]["torch"] + 2,
                                                                          first["seeds"]["train_start"] + 200_000)
    seen = set()
    for phase, seeds in (("tune", [0, 1]), ("validate", validation_seeds(2, 0)), ("validate", validation_seeds(2, 1))):
        trial = FixedTrial({})
        trial.set_user_attr("rewardkit.phase", phase)
        trial.set_user_attr("rewardkit.seeds", seeds)
        mapped = objective.env_seeds(first, trial)
        assert not seen & set(mapped) and not set(mapped) & {101, 102, 103, 104, 105}
        seen |= set(mapped)
    assert min(s for s in seen if s >= VALIDATE_SEED_BASE) == VALIDATE_SEED_BASE
    objective.check_training({"ppo.gamma": 0.9})
    with pytest.raises(ConfigError, match=r"ppo\.gamma"):
        objective.check_training({"ppo.gamma": 1.5})
    with pytest.raises(ConfigError, match="no section 'nope'"):
        objective.check_training({"nope.gamma": 0.5})
    # base settings (REWARDKIT_VIDUR_SETTINGS for the command) under the sampled ones
    based = VidurObjective(train_config=objective.train_config, base_settings={"ppo.gamma": 0.995, "ppo.n_epochs": 3})
    cfg = based.training_config(reward, {"ppo.gamma": 0.2})
    assert (cfg["ppo"]["gamma"], cfg["ppo"]["n_epochs"]) == (0.2, 3)


def test_validation_runs_train_at_their_own_higher_fidelity(tmp_path):
    """validate_settings raise the budget of the noise and validation runs only; full_cost is theirs."""
    from rewardkit.errors import ConfigError

    short = VidurObjective(train_config=tiny_train_config(tmp_path))
    steps = short.training_config(REWARD_TTFT, {})["ppo"]["total_timesteps"]
    longer = VidurObjective(train_config=short.train_config, base_settings={"ppo.gamma": 0.9},
                            validate_settings={"ppo.total_timesteps": 3 * steps, "ppo.gamma": 0.5})
    tune = longer.training_config(REWARD_TTFT, {}, phase="tune")
    validate = longer.training_config(REWARD_TTFT, {"ppo.gamma": 0.2}, phase="validate")
    assert (tune["ppo"]["total_timesteps"], tune["ppo"]["gamma"]) == (steps, 0.9)
    assert (validate["ppo"]["total_timesteps"], validate["ppo"]["gamma"]) == (3 * steps, 0.2)  # sampled on top
    assert longer.full_cost - short.full_cost == 2 * steps
    with pytest.raises(ConfigError, match=r"ppo\.total_timesteps"):
        VidurObjective(train_config=short.train_config,
                       validate_settings={"ppo.total_timesteps": -1}).check_training({})


def test_settings_come_from_the_environment_as_json(monkeypatch):
    from rewardkit.errors import ConfigError

    monkeypatch.setenv("REWARDKIT_VIDUR_SETTINGS", '{"ppo.gamma": 0.995}')
    assert VidurObjective.from_environment().base_settings == {"ppo.gamma": 0.995}
    monkeypatch.setenv("REWARDKIT_VIDUR_SETTINGS", "[0.995]")
    with pytest.raises(ConfigError, match="REWARDKIT_VIDUR_SETTINGS: expected a JSON object"):
        VidurObjective.from_environment()


def test_vidur_entry_point_is_registered():
    objective = resolve_objective("vidur")
    assert isinstance(objective, VidurObjective) and objective.directions == ("minimize",)


def test_a_trial_is_pruned_before_its_last_update_never_at_it(tmp_path, monkeypatch):
    """With a pruner that always says stop, a trial stops at its first evaluation unless that is the last."""
    import schedulers.tune.vidur_objective as vo

    monkeypatch.setattr(vo, "report_evaluation", lambda trial, step, values: True)
    BayesianRewardOptimizer.show_progress = False
    states = {}
    for eval_every in (2, 4):  # evaluations at updates 2 and 4, or only at update 4 (the last)
        objective = VidurObjective(train_config=tiny_train_config(tmp_path), n_seeds=1, eval_every=eval_every)
        opt = BayesianRewardOptimizer(
            ROOT / "configs" / "rewards" / "vidur_ttft.yaml",
            {"components.time_in_system.weight": {"type": "float", "low": -1.0, "high": 0.0}},
            objective, study_name=f"prune{eval_every}", storage=str(tmp_path / f"prune{eval_every}.journal"), seed=0)
        opt.optimize(n_trials=1)
        trial = opt.study.trials[0]
        states[eval_every] = (trial.state, trial.user_attrs.get("steps_trained"))
    assert states[2] == (TrialState.PRUNED, 256)  # steps_trained counts PPO decisions
    assert states[4] == (TrialState.COMPLETE, 512)


def test_settings_that_move_the_seeds_keep_moving_them_in_every_repeat(tmp_path):
    """A replication ({"seeds.torch": 1000}) trains repeat r with torch seed 1000 + r, not the config's + r."""
    moved = VidurObjective(train_config=tiny_train_config(tmp_path), base_settings={"seeds.torch": 1000})
    reward = ROOT / "configs" / "rewards" / "vidur_ttft.yaml"
    assert [moved.training_config(reward, {}, repeat=r)["seeds"]["torch"] for r in (0, 1, 3)] == [1000, 1001, 1003]


def test_fidelity_names_what_a_validation_run_depends_on(tmp_path):
    """Stored validation runs are reused only under the same training file, settings and seed counts."""
    train = tiny_train_config(tmp_path)
    plain = VidurObjective(train_config=train).fidelity()
    assert VidurObjective(train_config=train).fidelity() == plain
    assert VidurObjective(train_config=train, validate_settings={"ppo.total_timesteps": 4096}).fidelity() != plain
    assert VidurObjective(train_config=train, n_seeds=5).fidelity() != plain
    Path(train).write_text(Path(train).read_text() + "\n# edited\n")
    assert VidurObjective(train_config=train).fidelity() != plain
