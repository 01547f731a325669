"""Killed workers lose nothing: their running trials are failed and retried with the same params.

Every running trial carries ``rewardkit.worker`` (host, machine, pid, process start time, the
trial's number) and a ``rewardkit.heartbeat`` time that a thread refreshes while the objective
runs. The machine is the host name, the kernel's boot id and the PID namespace: two containers (or
two computers) with one host name are different machines, and a process id means something only
on its own machine. A RUNNING trial is stale when its worker ran on this machine and that process
is gone (seen at once, e.g. after SIGKILL), or when its heartbeat is older than the grace period
(a worker elsewhere sharing the storage). :func:`recover_stale_trials` fails each stale
trial and enqueues a copy with the same parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``,
which also records ``failed_trial``/``retry_history``). It runs before every trial on every
storage; RDB storages also have Optuna's own heartbeats, which do the same for them.
"""

from __future__ import annotations

import os
import signal
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
ERROR_ATTR = "rewardkit.error"
#: how many times a config whose worker is lost is retried before it is failed for good
MAX_RETRIES = 2


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


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def machine_id() -> str:
    """Where a process id is meaningful: host name, boot id and PID namespace (Linux)."""
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = ""
    return f"{socket.gethostname()}|{_read('/proc/sys/kernel/random/boot_id')}|{pid_ns}"


def worker_identity(trial_number: int) -> dict[str, Any]:
    """What identifies the process running ``trial_number``."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "machine": machine_id(), "pid": pid, "start": _process_start(pid),
            "trial": trial_number}


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
        self._beat_rdb(storage, trial_id)
        self._thread = threading.Thread(target=self._beat, args=(storage, trial_id), daemon=True,
                                        name=f"rewardkit-heartbeat-{self.trial.number}")
        self._thread.start()
        return self

    def _beat(self, storage: Any, trial_id: int) -> None:
        while not self._stop.wait(self.interval):
            try:
                storage.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
                self._beat_rdb(storage, trial_id)
            except (UpdateFinishedTrialError, RuntimeError):
                return
            except Exception:  # noqa: BLE001 - a storage hiccup must not kill the trial; the next beat retries
                continue

    @staticmethod
    def _beat_rdb(storage: Any, trial_id: int) -> None:
        """Optuna's own heartbeat too, on storages that have one (RDB)."""
        interval = getattr(storage, "get_heartbeat_interval", None)
        if callable(interval) and interval() is not None:
            storage.record_heartbeat(trial_id)

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
    if worker.get("machine") == machine_id():
        return not _alive(int(worker["pid"]), worker.get("start"))
    beat = trial.system_attrs.get(HEARTBEAT_ATTR)
    return not isinstance(beat, (int, float)) or now - beat > grace_period


def recover_stale_trials(study: optuna.Study, grace_period: float) -> list[int]:
    """Fail every stale RUNNING trial of ``study`` and enqueue a retry; return their numbers.

    A config whose worker was lost :data:`MAX_RETRIES` + 1 times (a config that kills its
    worker, e.g. by running out of memory) is failed for good: it counts, and is not retried.
    """
    storage = study._storage
    recovered = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not is_stale(trial, grace_period):
            continue
        give_up = len(trial.system_attrs.get("retry_history", [])) >= MAX_RETRIES
        try:
            if give_up:
                storage.set_trial_user_attr(trial._trial_id, ERROR_ATTR,
                                            f"its worker was lost {MAX_RETRIES + 1} times running this config "
                                            "(killed, or out of memory?); not retried again")
            else:
                storage.set_trial_system_attr(trial._trial_id, LOST_ATTR, True)
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:  # another worker (or Optuna's heartbeat) got there first
            continue
        if not give_up:
            enqueue_retry(study, trial._trial_id)
        recovered.append(trial.number)
    return recovered


def enqueue_retry(study: optuna.Study, trial_id: int) -> None:
    """Enqueue a retry of the failed trial ``trial_id`` with its parameters (``failed_trial`` on the retry)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = RetryHeartbeatStaleTrialCallback()
    failed = study._storage.get_trial(trial_id)
    clean = {k: v for k, v in failed.system_attrs.items() if k not in (WORKER_ATTR, HEARTBEAT_ATTR, LOST_ATTR)}
    retry(study, _with_system_attrs(failed, clean))


def retried_numbers(trials: list[FrozenTrial]) -> set[int]:
    """Numbers of the trials that have a retry (every entry of a retry's ``retry_history``)."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", ())}


def _with_system_attrs(trial: FrozenTrial, system_attrs: dict[str, Any]) -> FrozenTrial:
    return FrozenTrial(number=trial.number, state=trial.state, value=None, values=trial.values,
                       datetime_start=trial.datetime_start, datetime_complete=trial.datetime_complete,
                       params=trial.params, distributions=trial.distributions,
                       user_attrs={k: v for k, v in trial.user_attrs.items() if k != ERROR_ATTR},
                       system_attrs=system_attrs, intermediate_values=trial.intermediate_values,
                       trial_id=trial._trial_id)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (``signal N`` for a number without a name)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def lost_worker_message(who: str, exit_code: int, what_happens: str) -> str:
    """The one line said when a worker process is killed, in every phase of a study:
    ``rewardkit optimize: worker 1 (pid 4242) was killed by SIGKILL; its running trial is failed and
    retried; started another worker``."""
    return f"rewardkit optimize: {who} was killed by {signal_name(-exit_code)}; {what_happens}; started another worker"
