"""Evaluations outside the search (noise, validation), kept in the study so that none is run twice.

An evaluation is one run of the objective on one config, one repeat and that repeat's seeds. Its
result is written into the study's user attributes (``rewardkit.eval:<phase>:<config key>:<repeat>``)
the moment it finishes, through the study's own storage (journal file or database), so a run that
is killed resumes with every finished evaluation in place and computes only the missing ones.
Several can run at once in worker processes; the parent alone writes results.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import optuna
from optuna.trial import FixedTrial
from tqdm import tqdm

from .trial_context import (COST_ATTR, PHASE_ATTR, REPEAT_ATTR, SEED_VALUES_ATTR, SEEDS_ATTR, TRAINING_ATTR,
                            TRIAL_DIR_ATTR)
from .limits import EvaluationError, TrialTimeout, objective_failure, time_limit
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
    return f"{job.phase} run of {what}, repeat {job.repeat} (seeds {seeds})"


def run_one(objective: Callable[[dict, Any], Any], job: Job, n_directions: int,
            timeout: float | None = None) -> Evaluation:
    """Run the objective once for ``job`` on a ``FixedTrial`` carrying its seeds, repeat and settings;
    what the objective raises (``SystemExit`` and a timeout too) is an :class:`EvaluationError`."""
    try:
        return _run_one(objective, job, n_directions, timeout)
    except (Exception, SystemExit, TrialTimeout) as exc:
        raise EvaluationError(f"the {describe_job(job)} failed: {objective_failure(exc)}") from None


def _run_one(objective: Callable[[dict, Any], Any], job: Job, n_directions: int, timeout: float | None) -> Evaluation:
    trial = FixedTrial(dict(job.params), number=-1)
    trial.set_user_attr(SEEDS_ATTR, list(job.seeds))
    trial.set_user_attr(PHASE_ATTR, job.phase)
    trial.set_user_attr(REPEAT_ATTR, job.repeat)
    trial.set_user_attr(TRAINING_ATTR, dict(job.training))
    if job.folder is not None:
        job.folder.mkdir(parents=True, exist_ok=True)
        trial.set_user_attr(TRIAL_DIR_ATTR, str(job.folder))
    start = time.monotonic()
    with time_limit(timeout):
        result = objective(job.config, trial)
    value = check_values(result, n_directions)
    first = value if n_directions == 1 else value[0]
    attrs = trial.user_attrs
    seed_values = attrs.get(SEED_VALUES_ATTR)
    cost = attrs.get(COST_ATTR)
    return Evaluation(value=float(first), seeds=list(job.seeds),
                      seed_values=None if seed_values is None else [float(v) for v in seed_values],
                      cost=None if cost is None else float(cost), seconds=time.monotonic() - start)


_WORKER_OBJECTIVE: Any = None


def _worker_run(args: tuple[Job, int, float | None]) -> tuple[Job, Evaluation]:
    job, n_directions, timeout = args
    return job, run_one(_WORKER_OBJECTIVE, job, n_directions, timeout)


def _results(objective: Callable[[dict, Any], Any], jobs: Sequence[Job], n_directions: int,
             workers: int, timeout: float | None = None) -> Iterator[tuple[Job, Evaluation]]:
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield job, run_one(objective, job, n_directions, timeout)
        return
    global _WORKER_OBJECTIVE
    _WORKER_OBJECTIVE = objective  # inherited by the forked workers, never pickled
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(min(workers, len(jobs))) as pool:
        yield from pool.imap_unordered(_worker_run, [(job, n_directions, timeout) for job in jobs])


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
