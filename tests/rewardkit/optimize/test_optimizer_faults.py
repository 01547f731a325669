"""The tuner under faults: seeded studies never replay draws, killed or shared-host
workers lose nothing, user code that exits, interrupts or hangs fails its trial, and objective
values are numbers only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from optimize_support import calls, child_env, load_trials, make_study_folder, optimize_command, run_optimize
from test_optimizer import distance, make

from rewardkit.optimize.optimizer import ERROR_ATTR
from rewardkit.optimize.recovery import HEARTBEAT_ATTR, WORKER_ATTR, machine_id, recover_stale_trials
from rewardkit.optimize.samplers import trial_seed
from rewardkit.optimize.values import check_values


def params(opt) -> list[tuple]:
    return [tuple(sorted(t.params.items())) for t in opt.study.get_trials(deepcopy=False)]


# ---- seeding --------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["random", "tpe", "gp", "nsga2"])
def test_seeded_resumption_draws_new_configs_and_a_fresh_study_replays(tmp_path, sampler):
    first = make(tmp_path, sampler=sampler, seed=11, study_name="a")
    first.optimize(n_trials=3)
    resumed = make(tmp_path, sampler=sampler, seed=11, study_name="a")  # a new run of the same study
    resumed.optimize(n_trials=6)
    drawn = params(resumed)
    assert len(set(drawn)) == 6, "the resumed run replayed the first run's draws"
    fresh = make(tmp_path, sampler=sampler, seed=11, study_name="b")
    fresh.optimize(n_trials=6)
    assert params(fresh) == drawn  # same seed, fresh study: the same sequence
    other = make(tmp_path, sampler=sampler, seed=12, study_name="c")
    other.optimize(n_trials=3)
    assert params(other)[:3] != drawn[:3]


def test_trial_seeds_differ_by_trial_and_study_seed():
    seeds = {trial_seed(s, n) for s in range(20) for n in range(50)}
    assert len(seeds) == 1000


def test_two_seeded_processes_on_one_journal_draw_distinct_configs(tmp_path):
    folder = make_study_folder(tmp_path)
    procs = [subprocess.Popen(optimize_command("s.journal", 6, "--sampler", "random"), cwd=folder,
                              env=child_env(TRIAL_SLEEP="0.3"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    log = calls(folder)
    assert len({c["pid"] for c in log}) == 2
    drawn = [tuple(sorted(c["params"].items())) for c in log]
    assert len(drawn) == 6 and len(set(drawn)) == 6, drawn


def test_workers_flag_with_a_seed_draws_distinct_configs(tmp_path):
    folder = make_study_folder(tmp_path)
    run_optimize(folder, "s.journal", 6, "--workers", "2", "--sampler", "random", TRIAL_SLEEP="0.3")
    drawn = [tuple(sorted(c["params"].items())) for c in calls(folder)]
    assert len(drawn) == 6 and len(set(drawn)) == 6, drawn


# ---- killed and shared-host workers --------------------------------------------------------
def test_killing_a_workers_child_is_a_message_and_the_study_finishes(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "hang_on_trial").write_text("1")
    proc = subprocess.Popen(optimize_command("s.journal", 5, "--workers", "2"), cwd=folder,
                            env=child_env(TRIAL_SLEEP="0.2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (folder / "hanging").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    (folder / "hang_on_trial").unlink()
    os.kill(int((folder / "hanging").read_text()), signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err
    assert "was killed by SIGKILL; its running trial is failed and retried" in err
    trials = load_trials(folder, "s.journal")
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 5
    killed = next(t for t in trials if t.number == 1)
    assert killed.state == TrialState.FAIL
    assert any(t.system_attrs.get("failed_trial") == 1 and t.params == killed.params for t in trials)


def test_a_live_trial_on_another_machine_with_our_host_name_is_not_failed(tmp_path):
    """Two containers share a host name; the other's pid means nothing here: only its heartbeat counts."""
    opt = make(tmp_path, seed=0)
    trial = opt.study.ask()
    storage = opt.study._storage
    other = {"host": __import__("socket").gethostname(), "machine": machine_id() + "-other", "pid": 2**22 + 7,
             "start": "1", "trial": trial.number}
    storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, other)
    storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_ATTR, time.time())
    assert recover_stale_trials(opt.study, grace_period=60) == []
    assert storage.get_trial(trial._trial_id).state == TrialState.RUNNING
    storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_ATTR, time.time() - 120)  # it went silent
    assert recover_stale_trials(opt.study, grace_period=60) == [trial.number]


def test_a_trial_failed_by_another_worker_does_not_crash_its_own_worker(tmp_path):
    """Its worker finishes the objective, finds the trial failed (and its retry queued), and goes on."""
    def objective(config, trial):
        if trial.number == 1:  # what a mistaken recovery elsewhere does to this live trial
            opt.study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
            from rewardkit.optimize.recovery import enqueue_retry
            enqueue_retry(opt.study, trial._trial_id)
        return distance(config)

    opt = make(tmp_path, objective, seed=0)
    opt.optimize(n_trials=3)
    states = [t.state for t in opt.study.trials]
    assert states.count(TrialState.COMPLETE) == 3
    assert opt.study.trials[1].state == TrialState.FAIL


# ---- user code that exits, interrupts, hangs --------------------------------------------------
def test_system_exit_in_the_objective_fails_that_trial_and_the_study_goes_on(tmp_path):
    def objective(config, trial):
        if trial.number == 1:
            sys.exit(0)
        return distance(config)

    opt = make(tmp_path, objective, seed=0)
    opt.optimize(n_trials=3)
    trials = opt.study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert "SystemExit(0)" in trials[1].user_attrs[ERROR_ATTR]


def test_keyboard_interrupt_stops_the_study_saved_and_the_trial_is_retried(tmp_path):
    def objective(config, trial):
        if trial.number == 1 and not seen:
            seen.append(1)
            raise KeyboardInterrupt
        return distance(config)

    seen: list[int] = []
    opt = make(tmp_path, objective, seed=0)
    with pytest.raises(KeyboardInterrupt):
        opt.optimize(n_trials=3)
    assert [t.state for t in opt.study.trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    again = make(tmp_path, objective, seed=0)
    again.optimize(n_trials=3)
    trials = again.study.trials
    assert trials[2].params == trials[1].params and trials[2].state == TrialState.COMPLETE
    assert ERROR_ATTR not in trials[2].user_attrs  # the retry does not inherit the interruption's error
    assert again.finished_count() == 3  # the interrupted trial does not count, its retry does


def test_all_failed_study_exits_nonzero_also_with_system_exit_and_workers(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "objmod.py").write_text("import sys\ndef objective(config, trial):\n    sys.exit(0)\n")
    for extra in ((), ("--workers", "2")):
        result = subprocess.run(optimize_command(f"s{len(extra)}.journal", 2, *extra), cwd=folder, env=child_env(),
                                capture_output=True, text=True, timeout=240)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "verdict: no complete trial" in result.stdout and "Traceback" not in result.stderr


def test_trial_timeout_stops_a_hung_objective_and_records_it_failed(tmp_path):
    def objective(config, trial):
        if trial.number == 1:
            try:
                time.sleep(60)
            except Exception:  # an objective that swallows errors cannot swallow the timeout
                pass
        return distance(config)

    opt = make(tmp_path, objective, seed=0)
    start = time.monotonic()
    opt.optimize(n_trials=3, trial_timeout=1.0)
    assert time.monotonic() - start < 30
    trials = opt.study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert "trial timeout of 1 s" in trials[1].user_attrs[ERROR_ATTR]


def test_trial_timeout_flag_with_workers(tmp_path):
    folder = make_study_folder(tmp_path)
    (folder / "hang_on_trial").write_text("0")
    result = run_optimize(folder, "s.journal", 3, "--workers", "2", "--trial-timeout", "2")
    trials = load_trials(folder, "s.journal")
    assert [t.state for t in trials].count(TrialState.FAIL) == 1
    assert "TrialTimeout" in trials[0].user_attrs[ERROR_ATTR]
    assert "3 finished trials (2 complete, 0 pruned, 1 failed)" in result.stdout


def test_trial_timeout_is_checked(tmp_path):
    folder = make_study_folder(tmp_path)
    result = subprocess.run(optimize_command("s.journal", 1, "--trial-timeout", "-1"), cwd=folder, env=child_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--trial-timeout" in result.stderr and "Traceback" not in result.stderr


# ---- objective values -----------------------------------------------------------------------
NUMBERS = [3, 2.5, np.float32(1.5), np.float64(2), np.int64(4), np.array(0.5), Decimal("1.25")]
NOT_NUMBERS = ["5", b"5", bytearray(b"5"), True, np.bool_(False), None, 1j, np.array([[1.0]]), {"v": 1},
               np.array("5")]


@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_numbers_are_accepted(value):
    assert check_values(value, 1) == float(value)


def test_torch_scalars_are_numbers_without_rewardkit_importing_torch():
    torch = pytest.importorskip("torch")
    assert check_values(torch.tensor(1.5), 1) == 1.5
    assert check_values([torch.tensor(1.0), np.float32(2)], 2) == [1.0, 2.0]
    with pytest.raises(ValueError, match="got tensor"):
        check_values(torch.tensor(True), 1)
    with pytest.raises(ValueError):
        check_values(torch.tensor([1.0, 2.0]), 1)


@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_strings_bytes_and_bools_are_not_numbers(value):
    with pytest.raises(ValueError, match="must return a number"):
        check_values(value, 1)


def test_a_numpy_float32_objective_completes_every_trial(tmp_path):
    opt = make(tmp_path, lambda c, t: np.float32(distance(c)), seed=0)
    opt.optimize(n_trials=3)
    assert all(t.state == TrialState.COMPLETE for t in opt.study.trials)
    bad = make(tmp_path, lambda c, t: "5", seed=0, study_name="bad")
    bad.optimize(n_trials=1)
    assert bad.study.trials[0].state == TrialState.FAIL
    assert "'5' (str)" in bad.study.trials[0].user_attrs[ERROR_ATTR]


def test_optuna_sees_plain_floats(tmp_path):
    opt = make(tmp_path, lambda c, t: Decimal("0.5"), seed=0)
    opt.optimize(n_trials=1)
    assert opt.study.trials[0].value == 0.5 and isinstance(opt.study.trials[0].value, float)
    assert optuna.__version__


def _foreground_sigint() -> None:
    """Ctrl-C's default action in the child, as in a terminal's foreground job: a suite started in the
    background by a non-interactive shell inherits SIGINT ignored, and Python keeps an ignored SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_with_workers_stops_saved_without_a_traceback_and_resumes(tmp_path):
    folder = make_study_folder(tmp_path)
    # trials of 5 s: the Ctrl-C lands mid-study even when this (large, loaded) test process wakes
    # seconds late; with 2 s trials a late wake-up once found the study already finished
    proc = subprocess.Popen(optimize_command("s.journal", 6, "--workers", "2"), cwd=folder,
                            env=child_env(TRIAL_SLEEP="5"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_foreground_sigint)
    deadline = time.monotonic() + 120
    while len(calls(folder)) < 3:  # both workers busy with a trial
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    assert proc.poll() is None, "the study finished before the test could interrupt it"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "interrupted" in err
    trials = load_trials(folder, "s.journal")
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    interrupted = [t for t in trials if t.state == TrialState.FAIL]
    assert interrupted and all("KeyboardInterrupt" in t.user_attrs[ERROR_ATTR] for t in interrupted)
    result = run_optimize(folder, "s.journal", 6, "--workers", "2")
    assert "6 finished trials (6 complete, 0 pruned, 0 failed)" in result.stdout
    after = load_trials(folder, "s.journal")
    for t in interrupted:  # each interrupted trial was re-run with the parameters it had drawn (a
        # trial stopped while sampling has only some; its retry keeps them and draws the rest)
        assert any(r.system_attrs.get("failed_trial") == t.number and t.params.items() <= r.params.items()
                   and r.state == TrialState.COMPLETE for r in after)


def _ctrl_c_during(monkeypatch, target, name):
    """Deliver SIGINT to this process while ``target.name`` runs (Ctrl-C landing in that window)."""
    original = getattr(target, name)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, interrupted)


def test_ctrl_c_while_a_trial_is_asked_fails_it_and_queues_its_retry(tmp_path, monkeypatch):
    opt = make(tmp_path, seed=0)
    opt.optimize(n_trials=1)
    _ctrl_c_during(monkeypatch, opt.study, "ask")
    with pytest.raises(KeyboardInterrupt):
        opt.optimize(n_trials=3)
    trials = opt.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    assert trials[2].system_attrs["failed_trial"] == 1
    assert "KeyboardInterrupt" in trials[1].user_attrs[ERROR_ATTR]


def test_ctrl_c_while_a_finished_trial_is_told_keeps_its_value_and_stops(tmp_path, monkeypatch):
    opt = make(tmp_path, seed=0)
    opt.optimize(n_trials=1)
    _ctrl_c_during(monkeypatch, opt.study, "tell")
    with pytest.raises(KeyboardInterrupt):
        opt.optimize(n_trials=3)
    trials = opt.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert (opt.trial_dir(1) / "metrics.json").exists()


def test_validation_runs_honour_the_trial_timeout(tmp_path):
    from rewardkit.optimize.limits import EvaluationError
    from rewardkit.optimize.validation import measure_noise

    def objective(config, trial):
        if trial.number < 0:  # validation's FixedTrial
            time.sleep(60)
        return distance(config)

    opt = make(tmp_path, objective, seed=0, trial_timeout=1)
    start = time.monotonic()
    with pytest.raises(EvaluationError, match=r"validate run of the base, repeat 0 .* trial timeout of 1 s"):
        measure_noise(opt, repeats=2)
    assert time.monotonic() - start < 30


def test_a_config_that_keeps_killing_its_worker_is_failed_for_good_after_two_retries(tmp_path):
    from optuna.distributions import FloatDistribution

    from rewardkit.optimize.recovery import MAX_RETRIES

    opt = make(tmp_path, seed=0)
    storage = opt.study._storage
    numbers = []
    for i in range(MAX_RETRIES + 1):
        # the first trial, then each retry popped from the queue with the same parameters
        trial = opt.study.ask({"x": FloatDistribution(0, 1)} if i == 0 else None)
        numbers.append(trial.number)
        dead = {"host": "h", "machine": machine_id(), "pid": 2**22 + 11, "start": "1", "trial": trial.number}
        storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, dead)  # its process is gone
        assert recover_stale_trials(opt.study, grace_period=60) == [trial.number]
    trials = opt.study.trials
    assert len(trials) == MAX_RETRIES + 1 and len({t.params["x"] for t in trials}) == 1
    assert all(t.state == TrialState.FAIL for t in trials)
    assert not [t for t in trials if t.state == TrialState.WAITING]  # lost 3 times: not retried again
    assert opt.finished_count() == 1  # and the last loss counts
    assert "not retried again" in trials[-1].user_attrs[ERROR_ATTR]
    assert ERROR_ATTR not in trials[1].user_attrs


def test_a_queued_trial_popped_past_the_budget_stays_queued(tmp_path):
    """Two workers race at the end of the budget: the one that pops a queued retry puts it back."""
    opt = make(tmp_path, seed=0)
    opt.optimize(n_trials=2)
    opt.study.enqueue_trial({"components.progress.weight": 1.3, "components.effort.weight": -0.25,
                             "components.smooth.params.sigma": 2.5})
    assert opt._one_trial(opt.study, n_trials=2) is None  # as if the other worker had just finished the 2nd
    waiting = opt.study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].system_attrs["fixed_params"]["components.progress.weight"] == 1.3
    opt.optimize(n_trials=3)
    assert opt.study.trials[-1].params["components.progress.weight"] == 1.3


def _pid_namespaces_available() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


SLOW_FIRST_PY = """\
import json, os, time

def objective(config, trial):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"trial": trial.number, "pid": os.getpid(), "params": trial.params}) + "\\n")
    if trial.number == 0:
        time.sleep(8)
    return config["components"]["progress"]["weight"] ** 2
"""


def test_a_worker_in_another_pid_namespace_with_our_host_name_keeps_its_trial(tmp_path):
    """A container sharing the host name (here: a PID namespace via unshare) runs trial 0; a worker
    outside must not take its pid for a dead local process, fail its trial and crash it."""
    if not _pid_namespaces_available():
        pytest.skip("unshare --pid --mount-proc is not permitted here (needs root or user namespaces)")
    folder = make_study_folder(tmp_path)
    (folder / "slowfirst.py").write_text(SLOW_FIRST_PY)
    cmd = optimize_command("s.journal", 3)
    cmd[cmd.index("objmod:objective")] = "slowfirst:objective"
    inside = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *cmd], cwd=folder, env=child_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not calls(folder):
        assert time.monotonic() < deadline and inside.poll() is None
        time.sleep(0.1)
    outside = subprocess.run(cmd, cwd=folder, env=child_env(), capture_output=True, text=True, timeout=240)
    out, err = inside.communicate(timeout=240)
    assert outside.returncode == 0, outside.stderr
    assert inside.returncode == 0, err
    assert "Traceback" not in err + outside.stderr
    trials = load_trials(folder, "s.journal")
    assert trials[0].state == TrialState.COMPLETE
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3


def test_an_ignored_ctrl_c_stays_ignored_in_a_deferred_block():
    """A study run as a background job (SIGINT ignored) is not stopped by a Ctrl-C that happens to land
    while a trial is being asked or told; a foreground one defers it to the block's end."""
    from rewardkit.optimize.optimizer import _DeferredSigint

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _DeferredSigint() as block:
            os.kill(os.getpid(), signal.SIGINT)
        assert not block.pending and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with _DeferredSigint() as block:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        assert block.pending and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
