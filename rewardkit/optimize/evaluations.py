"""Evaluations outside the search (noise, validation), kept in the study so that none is run twice.

An evaluation is one run of the objective on one config, one repeat and that repeat's seeds. Its
result is written into the study's user attributes (``rewardkit.eval:<phase>:<config key>:<repeat>``)
the moment it finishes, through the study's own storage (journal file or database), so a run that
is killed resumes with every finished evaluation in place and computes only the missing ones.
Several can run at once in worker processes (one per evaluation; a killed one's evaluation runs
again, as a killed search worker's trial does); the parent alone writes results.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import optuna
from optuna.trial import FixedTrial
from tqdm import tqdm

from .trial_context import (COST_ATTR, PHASE_ATTR, REPEAT_ATTR, SEED_VALUES_ATTR, SEEDS_ATTR, TRAINING_ATTR,
                            TRIAL_DIR_ATTR)
from .limits import EXIT_INTERRUPTED, EvaluationError, TrialTimeout, objective_failure, time_limit
from .recovery import MAX_RETRIES, lost_worker_message
from .values import check_values

EVAL_PREFIX = "rewardkit.eval"


def config_key(params: dict[str, Any]) -> str:
    """A short stable name for a candidate's sampled values ("base" for none)."""
    if not params:
        return "base"
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Evaluation:
    """One finished evaluation: the objective's value, per-seed values when recorded, its cost."""

    value: float
    seeds: list[int]
    seed_values: list[float] | None = None
    cost: float | None = None
    seconds: float = 0.0
    #: digest of the objective's :func:`objective_fidelity` when it ran (None: the objective gives none)
    fidelity: str | None = None
    #: every value, with several directions (``value`` is the first)
    values: list[float] | None = None

    def per_seed(self) -> list[float]:
        """The values to pair seed by seed (the single value when the objective kept none)."""
        if self.seed_values is not None and len(self.seed_values) == len(self.seeds):
            return list(self.seed_values)
        return [self.value]


@dataclass
class Job:
    """An evaluation to run: the config, its training settings, its repeat and seeds, its folder."""

    phase: str
    key: str
    repeat: int
    seeds: list[int]
    config: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None


class EvaluationStore:
    """Evaluations kept in the user attributes of an Optuna study."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    @staticmethod
    def attr(phase: str, key: str, repeat: int) -> str:
        return f"{EVAL_PREFIX}:{phase}:{key}:{repeat}"

    def all(self) -> dict[str, Evaluation]:
        """Every stored evaluation by attribute name (read from storage now)."""
        out = {}
        for name, value in self.study.user_attrs.items():
            if name.startswith(EVAL_PREFIX + ":"):
                out[name] = Evaluation(**value)
        return out

    def get(self, phase: str, key: str, repeat: int) -> Evaluation | None:
        value = self.study.user_attrs.get(self.attr(phase, key, repeat))
        return None if value is None else Evaluation(**value)

    def put(self, job: Job, evaluation: Evaluation) -> None:
        self.study.set_user_attr(self.attr(job.phase, job.key, job.repeat), asdict(evaluation))


def objective_fidelity(objective: Any) -> str | None:
    """A digest of what the objective's evaluations depend on beyond config, repeat and seeds.

    An objective may define ``fidelity()`` returning JSON-able settings (training budget, data files'
    contents...); a stored evaluation made under other settings is stale and runs again. ``None``
    when the objective defines none (its stored evaluations are always reused).
    """
    describe = getattr(objective, "fidelity", None)
    if not callable(describe):
        return None
    text = json.dumps(describe(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_job(job: Job) -> str:
    """``validate run of the base, repeat 1 (seeds 500003-500005)`` for error messages."""
    what = "the base" if job.key == "base" else f"config {job.key}"
    seeds = f"{job.seeds[0]}-{job.seeds[-1]}" if len(job.seeds) > 1 else str(job.seeds[0])
    phase = "--report" if job.phase == "report" else job.phase
    return f"{phase} run of {what}, repeat {job.repeat} (seeds {seeds})"


def run_one(objective: Callable[[dict, Any], Any], job: Job, n_directions: int,
            timeout: float | None = None) -> Evaluation:
    """Run the objective once for ``job`` on a ``FixedTrial`` carrying its seeds, repeat and settings;
    what the objective raises (``SystemExit`` and a timeout too) is an :class:`EvaluationError`. An
    objective that keeps ignoring the timeout ends this process (:func:`.limits.time_limit`)."""
    def abandoned(text: str) -> None:
        tqdm.write(f"error: {failure_text(job, text)}", file=sys.stderr)

    try:
        return _run_one(objective, job, n_directions, timeout, abandoned)
    except (Exception, SystemExit, TrialTimeout) as exc:
        raise EvaluationError(failure_text(job, objective_failure(exc))) from None


def failure_text(job: Job, why: str) -> str:
    """What a failed evaluation says: which run, why, and what happens next (the command stops, exit 1)."""
    return (f"the {describe_job(job)} failed: {why}; the study stops here (exit code 1): finished runs are "
            "stored, and running the same command again resumes from them")


def _run_one(objective: Callable[[dict, Any], Any], job: Job, n_directions: int, timeout: float | None,
             on_ignored: Callable[[str], None] | None = None) -> Evaluation:
    trial = FixedTrial(dict(job.params), number=-1)
    trial.set_user_attr(SEEDS_ATTR, list(job.seeds))
    trial.set_user_attr(PHASE_ATTR, job.phase)
    trial.set_user_attr(REPEAT_ATTR, job.repeat)
    trial.set_user_attr(TRAINING_ATTR, dict(job.training))
    if job.folder is not None:
        job.folder.mkdir(parents=True, exist_ok=True)
        trial.set_user_attr(TRIAL_DIR_ATTR, str(job.folder))
    start = time.monotonic()
    with time_limit(timeout, on_ignored) as limit:
        result = objective(job.config, trial)
    limit.check()
    value = check_values(result, n_directions)
    values = [value] if n_directions == 1 else list(value)
    attrs = trial.user_attrs
    seed_values = attrs.get(SEED_VALUES_ATTR)
    cost = attrs.get(COST_ATTR)
    return Evaluation(value=float(values[0]), seeds=list(job.seeds),
                      seed_values=None if seed_values is None else [float(v) for v in seed_values],
                      cost=None if cost is None else float(cost), seconds=time.monotonic() - start,
                      values=None if n_directions == 1 else [float(v) for v in values])


def _child(conn: Connection, objective: Callable[[dict, Any], Any], job: Job, n_directions: int,
           timeout: float | None) -> None:
    """One evaluation in its own process: the result (or the error's text) goes back through ``conn``."""
    def abandoned(text: str) -> None:
        conn.send(("error", failure_text(job, text)))

    try:
        message: tuple[str, Any] = ("ok", _run_one(objective, job, n_directions, timeout, abandoned))
    except KeyboardInterrupt:
        os._exit(EXIT_INTERRUPTED)
    except (Exception, SystemExit, TrialTimeout) as exc:
        message = ("error", failure_text(job, objective_failure(exc)))
    conn.send(message)
    conn.close()
    os._exit(0)  # no atexit handlers or inherited finalizers of the parent run here


class EvaluationWorkers:
    """Runs evaluations in up to ``workers`` processes, one process per evaluation.

    A process killed by a signal (``SIGKILL``, the OOM killer) loses only its evaluation: it is
    run again in a new process, at most :data:`.recovery.MAX_RETRIES` times, with the same message as
    a lost search worker; a process that ends without a result otherwise is an :class:`EvaluationError`.
    """

    def __init__(self, objective: Callable[[dict, Any], Any], n_directions: int, workers: int,
                 timeout: float | None) -> None:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self.ctx = multiprocessing.get_context(method)
        self.objective, self.n_directions, self.workers, self.timeout = objective, n_directions, workers, timeout
        self.running: dict[Any, tuple[Any, Connection, Job]] = {}
        self.losses: dict[tuple[str, str, int], int] = {}

    def _start(self, job: Job) -> None:
        parent, child = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_child, args=(child, self.objective, job, self.n_directions, self.timeout),
                                name=f"rewardkit-eval-{job.key}-{job.repeat}", daemon=True)
        proc.start()
        child.close()
        self.running[proc.sentinel] = (proc, parent, job)

    def run(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, Evaluation]]:
        pending = deque(jobs)
        try:
            while pending or self.running:
                while pending and len(self.running) < self.workers:
                    self._start(pending.popleft())
                for sentinel in wait(list(self.running), timeout=1.0):
                    proc, conn, job = self.running.pop(sentinel)
                    proc.join()
                    outcome = self._outcome(proc, conn, job)
                    conn.close()
                    if outcome is None:
                        pending.appendleft(job)
                    else:
                        yield job, outcome
        finally:
            self._stop_all()

    def _outcome(self, proc: Any, conn: Connection, job: Job) -> Evaluation | None:
        """The evaluation, or None when its process was killed and it is to run again."""
        try:
            kind, payload = conn.recv() if conn.poll() else (None, None)
        except (EOFError, OSError):
            kind, payload = None, None
        if kind == "ok":
            return payload
        if kind == "error":
            raise EvaluationError(payload)
        code = proc.exitcode
        if code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if code is not None and code < 0:
            ident = (job.phase, job.key, job.repeat)
            self.losses[ident] = self.losses.get(ident, 0) + 1
            if self.losses[ident] > MAX_RETRIES:
                raise EvaluationError(failure_text(job, f"its worker was lost {self.losses[ident]} times running it "
                                                        "(killed, or out of memory?); not retried again"))
            # tqdm.write: a whole line under the progress bars' lock, never split by a bar's refresh
            tqdm.write(lost_worker_message(f"worker (pid {proc.pid}) running the {describe_job(job)}", code,
                                           "its run is failed and retried"), file=sys.stderr)
            return None
        raise EvaluationError(failure_text(job, f"its worker process ended with exit code {code} and no result"))

    def _stop_all(self) -> None:
        """Stop the evaluations still running (an error or Ctrl-C ends the phase)."""
        for proc, _conn, _ in self.running.values():
            if proc.is_alive():
                proc.terminate()
        for proc, conn, _ in self.running.values():
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
        self.running.clear()


def _results(objective: Callable[[dict, Any], Any], jobs: Sequence[Job], n_directions: int,
             workers: int, timeout: float | None = None) -> Iterator[tuple[Job, Evaluation]]:
    if workers <= 1:
        for job in jobs:
            yield job, run_one(objective, job, n_directions, timeout)
        return
    yield from EvaluationWorkers(objective, n_directions, workers, timeout).run(jobs)


def run_missing(store: EvaluationStore, objective: Callable[[dict, Any], Any], jobs: Sequence[Job],
                n_directions: int, workers: int = 1, desc: str = "evaluations",
                show_progress: bool = True, timeout: float | None = None) -> dict[tuple[str, int], Evaluation]:
    """Run the jobs whose result the study lacks, storing each as it finishes; return all by (key, repeat).
    Each run stops after ``timeout`` seconds; a failed run is an :class:`EvaluationError` (those
    finished before it stay stored)."""
    done: dict[tuple[str, int], Evaluation] = {}
    missing = []
    fidelity = objective_fidelity(objective)
    stale = []
    for job in jobs:
        found = store.get(job.phase, job.key, job.repeat)
        if found is not None and None not in (fidelity, found.fidelity) and found.fidelity != fidelity:
            stale.append(describe_job(job))
            found = None
        if found is None:
            missing.append(job)
        else:
            done[(job.key, job.repeat)] = found
    if stale:
        print(f"{len(stale)} stored evaluation(s) were made under other objective settings (fidelity); running "
              f"them again: {', '.join(stale[:3])}{' ...' if len(stale) > 3 else ''}", file=sys.stderr, flush=True)
    bar = tqdm(total=len(jobs), initial=len(done), unit="eval", desc=desc, file=sys.stderr, mininterval=0.5,
               dynamic_ncols=True, disable=not show_progress)
    try:
        for job, evaluation in _results(objective, missing, n_directions, workers, timeout):
            evaluation = replace(evaluation, fidelity=fidelity)
            store.put(job, evaluation)
            done[(job.key, job.repeat)] = evaluation
            bar.update(1)
    finally:
        bar.close()
    return done
