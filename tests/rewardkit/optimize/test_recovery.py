"""Nothing lost: a worker killed mid-trial (SIGKILL) and resumed, and several workers on one journal."""

from __future__ import annotations

import subprocess

import pytest
from optuna.trial import TrialState

from optimize_support import (calls, child_env, kill_while_hanging, load_trials, make_study_folder,
                              optimize_command, run_optimize)

from rewardkit.optimize.optimizer import OVER_BUDGET_ATTR


@pytest.mark.parametrize("storage", ["s.journal", "sqlite:///s.db"])
def test_killed_mid_trial_then_resumed(tmp_path, storage):
    folder = make_study_folder(tmp_path)
    (folder / "hang_on_trial").write_text("2")
    kill_while_hanging(folder, optimize_command(storage, 6))
    before = load_trials(folder, storage)
    assert [t.state for t in before] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.RUNNING]
    (folder / "hang_on_trial").unlink()

    run_optimize(folder, storage, 6)
    after = load_trials(folder, storage)
    # completed trials kept as they were
    for old, new in zip(before[:2], after[:2], strict=True):
        assert (new.number, new.state, new.values, new.params) == (old.number, old.state, old.values, old.params)
    # the killed trial is failed and retried with the same parameters, right away
    assert after[2].state == TrialState.FAIL
    retry = after[3]
    assert retry.system_attrs["failed_trial"] == 2 and retry.params == before[2].params
    assert retry.state == TrialState.COMPLETE
    # the budget counts finished trials: the killed one does not count, its retry does, so 6
    # complete trials run (7 in the study with the killed one), nothing more
    assert len(after) == 7 and [t.state for t in after].count(TrialState.COMPLETE) == 6
    assert [c["trial"] for c in calls(folder)] == [0, 1, 2, 3, 4, 5, 6]
    assert calls(folder)[3]["params"] == calls(folder)[2]["params"]


def check_shared_study(folder, storage, n_trials, min_workers):
    trials = load_trials(folder, storage)
    counted = [t for t in trials if not t.system_attrs.get(OVER_BUDGET_ATTR)]
    over = [t for t in trials if t.system_attrs.get(OVER_BUDGET_ATTR)]
    log = calls(folder)
    numbers = [c["trial"] for c in log]
    assert len(numbers) == len(set(numbers)), "a trial was evaluated twice"
    assert all(t.state == TrialState.COMPLETE for t in counted), [t.state for t in counted]
    assert len(counted) == n_trials  # no trial lost, none past the budget
    assert sorted(numbers) == sorted(t.number for t in counted)  # every evaluation recorded
    assert all(not t.params for t in over)  # a trial refused for the budget never sampled nor ran
    assert len({c["pid"] for c in log}) >= min_workers, "the workers did not share the work"
    for c in log:
        assert next(t for t in counted if t.number == c["trial"]).params == c["params"]


def test_three_processes_share_one_journal(tmp_path):
    folder = make_study_folder(tmp_path)
    procs = [subprocess.Popen(optimize_command("s.journal", 12), cwd=folder, env=child_env(TRIAL_SLEEP="0.3"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    check_shared_study(folder, "s.journal", 12, min_workers=2)


def test_workers_flag_runs_processes_on_one_study(tmp_path):
    folder = make_study_folder(tmp_path)
    result = run_optimize(folder, "s.journal", 8, "--workers", "2", TRIAL_SLEEP="0.3")
    check_shared_study(folder, "s.journal", 8, min_workers=2)
    assert "8 finished trials (8 complete, 0 pruned, 0 failed)" in result.stdout


def test_a_killed_last_trial_is_still_retried(tmp_path):
    """The killed trial was the last of the budget: its retry must still run (it did not count)."""
    folder = make_study_folder(tmp_path)
    (folder / "hang_on_trial").write_text("1")
    kill_while_hanging(folder, optimize_command("s.journal", 2))
    (folder / "hang_on_trial").unlink()
    result = run_optimize(folder, "s.journal", 2)
    after = load_trials(folder, "s.journal")
    assert [t.state for t in after] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert after[2].params == after[1].params and after[2].system_attrs["failed_trial"] == 1
    assert "2 finished trials (2 complete, 0 pruned, 0 failed)" in result.stdout
