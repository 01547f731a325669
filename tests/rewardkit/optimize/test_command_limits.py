"""The tuner under faults and bad flags: every phase that runs the objective survives a killed worker, numeric flags
are range-checked, loaders refuse non-paths, failure messages say what happens, huge values and
objectives that swallow the trial timeout do not break a study."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from optimize_support import BASE_YAML, child_env, load_trials, make_study_folder, optimize_command

from rewardkit.cli import main as cli_main
from rewardkit.optimize import BayesianRewardOptimizer, trial_phase, trial_repeat
from rewardkit.optimize.recovery import ERROR_ATTR
from rewardkit.optimize.validation import measure_noise, validate

# Kills its own process (SIGKILL) on the first run of each phase: the noise (the base's first
# validation run to start: with 2 workers, repeat 0 or 1), a finalist's validation, and --report;
# each kill happens once (a marker file created exclusively, so two workers cannot both claim it).
KILLING_OBJECTIVE = """\
import os, signal
from pathlib import Path
from rewardkit.optimize import trial_phase

def objective(config, trial):
    phase = trial_phase(trial)
    finalist = config["components"]["progress"]["weight"] != 1.0  # the base has 1.0
    which = "search" if phase == "tune" else (phase if phase == "report" else ("finalist" if finalist else "noise"))
    marker = Path(f"killed_{which}")
    if which != "search":
        try:
            with marker.open("x") as claimed:
                claimed.write(str(os.getpid()))
        except FileExistsError:
            pass
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    c = config["components"]
    return (c["progress"]["weight"] - 1.3) ** 2 + (c["effort"]["weight"] + 0.25) ** 2
"""

# Swallows the trial timeout in a retry loop with a bare except (in the phase named by IGNORE_IN).
IGNORING_OBJECTIVE = """\
import os, time
from rewardkit.optimize import trial_phase

def objective(config, trial):
    if trial_phase(trial) == os.environ["IGNORE_IN"] and (trial.number in (0, -1)):
        while True:
            try:
                time.sleep(0.5)
            except:  # noqa: E722 - the careless retry loop under test
                pass
    return config["components"]["progress"]["weight"]
"""


def run(folder, *extra, timeout=240, **env):
    return subprocess.run(optimize_command("s.journal", *extra), cwd=folder, env=child_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def test_a_worker_killed_in_the_noise_validation_or_report_phase_is_retried_and_the_study_finishes(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "objmod.py").write_text(KILLING_OBJECTIVE)
    result = run(folder, 3, "--workers", "2", "--validate", "2", "--repeats", "2", "--max-repeats", "2", "--report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    killed = [line for line in result.stderr.splitlines() if "was killed by SIGKILL" in line]
    assert len(killed) == 3, result.stderr
    for what in ("validate run of the base, repeat ", "validate run of config", "--report run of"):
        assert any(what in line and line.endswith("its run is failed and retried; started another worker")
                   for line in killed), (what, killed)
    assert all((folder / f"killed_{w}").exists() for w in ("noise", "finalist", "report"))
    assert "verdict:" in result.stdout.splitlines()[-1]


def test_a_worker_killed_every_time_fails_the_phase_after_two_retries(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "objmod.py").write_text(KILLING_OBJECTIVE.replace('marker.open("x")', 'marker.open("w")'))
    result = run(folder, 1, "--workers", "2", "--validate", "2", "--repeats", "2")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "its worker was lost 3 times running it" in errors[0], result.stderr
    assert "the study stops here (exit code 1)" in errors[0]


def test_an_objective_ignoring_the_trial_timeout_is_ended_in_the_search_and_in_the_noise_phase(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "objmod.py").write_text(IGNORING_OBJECTIVE)
    start = time.monotonic()
    result = run(folder, 3, "--workers", "2", "--trial-timeout", "1", IGNORE_IN="tune")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ignored the stop" in result.stderr and "was ended: its objective ignored the trial timeout" in result.stderr
    trials = load_trials(folder, "s.journal")
    zero = next(t for t in trials if t.number == 0)
    assert zero.state == TrialState.FAIL and "ignored the stop" in zero.user_attrs[ERROR_ATTR]
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 2
    # the noise phase, in an evaluation worker: the command stops with exit 1 and says so
    result = run(folder, 3, "--workers", "2", "--trial-timeout", "1", "--validate", "2", "--study", "n",
                 IGNORE_IN="validate")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ignored the stop" in errors[0] and "exit code 1" in errors[0], result.stderr
    assert time.monotonic() - start < 120


def test_an_objective_that_catches_the_timeout_and_returns_late_is_failed_not_complete(tmp_path):
    def objective(config, trial):
        try:
            time.sleep(1.5)
        except BaseException:  # noqa: BLE001 - swallows the TrialTimeout once, then returns at once
            pass
        return 1.0

    opt = BayesianRewardOptimizer(yaml.safe_load(BASE_YAML), {"components.progress.weight": {
        "type": "float", "low": 0.0, "high": 2.0}}, objective, study_name="late", storage=str(tmp_path / "s.journal"),
        seed=0, trial_timeout=1)
    opt.show_progress = False
    opt.optimize(n_trials=1)
    trial, = opt.study.get_trials()
    assert trial.state == TrialState.FAIL and "returned late" in trial.user_attrs[ERROR_ATTR]


def test_values_near_the_float_limit_make_no_overflow(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def huge(config, trial):
        rng = np.random.default_rng([trial_repeat(trial), 0 if trial_phase(trial) == "tune" else 1])
        return float(1.7e308 * (0.9 + 0.05 * rng.random()) * (1 - 0.01 * config["components"]["progress"]["weight"]))

    opt = BayesianRewardOptimizer(yaml.safe_load(BASE_YAML), {"components.progress.weight": {
        "type": "float", "low": 0.0, "high": 2.0}}, huge, study_name="h", storage=optuna.storages.InMemoryStorage(),
        seed=0)
    opt.show_progress = False
    noise = measure_noise(opt, 3)
    assert np.isfinite(noise.mean) and np.isfinite(noise.spread) and "sd" in noise.describe()
    opt.optimize(n_trials=4)
    v = validate(opt, k=2, repeats=3)
    assert "interval" in v.table() and v.verdict().startswith("verdict:")
    assert all(np.isfinite([c.mean, c.low, c.high]).all() for c in v.changes)


# ---- flags -------------------------------------------------------------------------------------
@pytest.fixture
def folder(tmp_path, monkeypatch):
    make_study_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(BayesianRewardOptimizer, "show_progress", False)
    return tmp_path


def optimize_args(*extra: str) -> list[str]:
    return ["optimize", "--study", "s", "--base", "base.yaml", "--search-space", "space.yaml",
            "--objective", "objmod:objective", "--n-trials", "1", *extra]


@pytest.mark.parametrize("flag, value", [
    ("--seed", "4294967301"), ("--seed", "4294967296"), ("--seed", "-1"), ("--n-trials", "10000000000"),
    ("--workers", "100000"), ("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "inf"), ("--timeout", "1e300"),
    ("--trial-timeout", "1e300"), ("--trial-timeout", "nan"), ("--validate", "1000"), ("--repeats", "1"),
    ("--repeats", "1000000"), ("--max-repeats", "1"), ("--max-repeats", "1000000"),
])
def test_every_numeric_flag_out_of_range_is_a_one_line_usage_error(folder, capsys, flag, value):
    assert cli_main(optimize_args(flag, value)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line, = [x for x in err.splitlines() if "error:" in x]
    assert f"argument {flag}: expected" in line and " from " in line or "above 0 and at most" in line, line


def test_the_largest_seed_is_accepted(folder, capsys):
    assert cli_main(optimize_args("--seed", str(2**32 - 1), "--validate", "0")) == 0


@pytest.mark.parametrize("extra, needle", [
    (("--repeats", "50000"), "--repeats: expected an integer from 2 to 33333"),
    (("--repeats", "4", "--max-repeats", "3"), "--max-repeats: expected an integer from 4 to"),
])
def test_repeats_are_checked_against_the_seed_range_before_any_run(folder, capsys, monkeypatch, extra, needle):
    import objmod
    monkeypatch.setattr(objmod.objective, "n_seeds", 3, raising=False)
    assert cli_main(optimize_args(*extra)) == 1
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err
    assert not (folder / "calls.log").exists()  # refused before the objective ran


def test_a_failed_noise_run_says_the_study_stops_and_exits_1(folder, capsys):
    (folder / "exitmod.py").write_text("import sys\n\ndef objective(config, trial):\n    sys.exit(3)\n")
    args = optimize_args("--validate", "2")
    args[args.index("objmod:objective")] = "exitmod:objective"
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    line, = [x for x in err.splitlines() if x.startswith("error:")]
    assert "SystemExit(3): the objective called sys.exit" in line and "the study stops here (exit code 1)" in line
    assert "goes on" not in line


# ---- loaders refuse what is not a path -----------------------------------------------------------
def _loaders():
    from rewardkit.commands.explain import load_contexts
    from rewardkit.config import load_yaml, read_yaml
    from rewardkit.migrate_rllama import migrate_rllama_file
    from rewardkit.optimize import SearchSpace
    return [SearchSpace.from_yaml, load_yaml, read_yaml, migrate_rllama_file, load_contexts,
            lambda p: BayesianRewardOptimizer(p, {}, lambda c, t: 0.0, study_name="x")]


@pytest.mark.parametrize("value", [0, 1, True, 3.5, b"base.yaml"])
@pytest.mark.parametrize("index", range(6))
def test_loaders_taking_a_path_refuse_ints_and_other_non_paths_without_reading_stdin(value, index, monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)  # a read of fd 0 would block or fail elsewhere; here it cannot happen
    with pytest.raises(TypeError, match="expected a file path"):
        _loaders()[index](value)
