"""Killed workers lose nothing: their running trials are failed and retried with the same params.

Every running trial carries ``rewardkit.worker`` (host, pid, process start time, the trial's
number) and a ``rewardkit.heartbeat`` time that a thread refreshes while the objective runs. A
RUNNING trial is stale when its worker ran on this host and that process is gone (seen at once,
e.g. after SIGKILL), or when its heartbeat is older than the grace period (a worker on another
machine sharing a journal file on a network disk). :func:`recover_stale_trials` fails each stale
trial and enqueues a copy with the same parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``,
which also records ``failed_trial``/``retry_history``). It runs before every trial on every
storage; RDB storages also have Optuna's own heartbeats, which do the same for them.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

WORKER_ATTR = "rewardkit.worker"
HEARTBEAT_ATTR = "rewardkit.heartbeat"
LOST_ATTR = "rewardkit.worker_lost"


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None when unknown or gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):  # zombie or dead: the process no longer runs
        return None
    return fields[19]


def _alive(pid: int, start: str | None) -> bool:
    if os.path.exists("/proc/self/stat"):
        now = _process_start(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_identity(trial_number: int) -> dict[str, Any]:
    """What identifies the process running ``trial_number``."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _process_start(pid), "trial": trial_number}


class TrialHeartbeat:
    """Marks a trial as this process's and refreshes its heartbeat until the block ends."""

    def __init__(self, trial: optuna.Trial, interval: float) -> None:
        self.trial = trial
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "TrialHeartbeat":
        storage = self.trial.study._storage
        trial_id = self.trial._trial_id
        storage.set_trial_system_attr(trial_id, WORKER_ATTR, worker_identity(self.trial.number))
        storage.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
        self._thread = threading.Thread(target=self._beat, args=(storage, trial_id), daemon=True,
                                        name=f"rewardkit-heartbeat-{self.trial.number}")
        self._thread.start()
        return self

    def _beat(self, storage: Any, trial_id: int) -> None:
        while not self._stop.wait(self.interval):
            try:
                storage.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
            except (UpdateFinishedTrialError, RuntimeError):
                return

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def is_stale(trial: FrozenTrial, grace_period: float, now: float | None = None) -> bool:
    """True when ``trial`` is RUNNING but nobody runs it any more."""
    if trial.state != TrialState.RUNNING:
        return False
    now = time.time() if now is None else now
    worker = trial.system_attrs.get(WORKER_ATTR)
    if not isinstance(worker, dict) or worker.get("trial") != trial.number:
        # just taken from the queue, not yet marked (or attributes copied from a retried trial):
        # give its worker the grace period to mark it
        started = trial.datetime_start.timestamp() if trial.datetime_start else now
        return now - started > grace_period
    if worker.get("host") == socket.gethostname():
        return not _alive(int(worker["pid"]), worker.get("start"))
    beat = trial.system_attrs.get(HEARTBEAT_ATTR)
    return not isinstance(beat, (int, float)) or now - beat > grace_period


def recover_stale_trials(study: optuna.Study, grace_period: float) -> list[int]:
    """Fail every stale RUNNING trial of ``study`` and enqueue a retry; return their numbers."""
    storage = study._storage
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = RetryHeartbeatStaleTrialCallback()
    recovered = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not is_stale(trial, grace_period):
            continue
        try:
            storage.set_trial_system_attr(trial._trial_id, LOST_ATTR, True)
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:  # another worker (or Optuna's heartbeat) got there first
            continue
        failed = storage.get_trial(trial._trial_id)
        clean = {k: v for k, v in failed.system_attrs.items() if k not in (WORKER_ATTR, HEARTBEAT_ATTR, LOST_ATTR)}
        retry(study, _with_system_attrs(failed, clean))
        recovered.append(trial.number)
    return recovered


def _with_system_attrs(trial: FrozenTrial, system_attrs: dict[str, Any]) -> FrozenTrial:
    return FrozenTrial(number=trial.number, state=trial.state, value=None, values=trial.values,
                       datetime_start=trial.datetime_start, datetime_complete=trial.datetime_complete,
                       params=trial.params, distributions=trial.distributions, user_attrs=trial.user_attrs,
                       system_attrs=system_attrs, intermediate_values=trial.intermediate_values,
                       trial_id=trial._trial_id)
