"""BayesianRewardOptimizer: tune a reward config's weights and parameters with Optuna.

The objective is what users care about (the metrics of a policy trained with the trial's
reward), never the shaped reward itself: ``objective(config, trial) -> float | sequence``, where
``config`` is the base reward config with the sampled values put in (a plain dict that
``RewardComposer.from_dict`` accepts, checked before the objective runs).

A study is persistent (a journal file by default) and resumable: ``n_trials`` is the study's
total of finished trials (complete, pruned or failed), so running again with a larger number
continues to it; the sampler and pruner are stored with the study and restored; a trial whose
worker was killed (or interrupted) is failed, does not count, and is retried with the same
parameters (see ``recovery``). What the objective raises, ``SystemExit`` and a trial timeout
included, fails its trial and the study goes on (see ``limits``). Each trial
keeps ``reward.yaml`` and ``metrics.json`` in ``<study folder>/trials/<number>/``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna
import yaml
from tqdm import tqdm
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ..composer import RewardComposer
from ..config import load_yaml
from ..errors import ConfigError, RewardKitError
from .limits import (EXIT_IGNORED_TIMEOUT, EXIT_INTERRUPTED, TrialTimeout, check_timeout, objective_failure,
                     time_limit)
from .recovery import (ERROR_ATTR, LOST_ATTR, TrialHeartbeat, enqueue_retry, lost_worker_message,
                       recover_stale_trials, retried_numbers, signal_name)
from .search_space import SearchSpace
from .storage import GRACE_PERIOD, HEARTBEAT_INTERVAL, StorageSpec, check_study_name, open_storage, parse_storage
from .samplers import STUDY_ATTR, StudySettings, make_pruner, make_sampler
from .values import check_values
from .trial_context import (PHASE_ATTR, PRUNER_ATTR, REPEAT_ATTR, SEEDS_ATTR, TRAINING_ATTR, TRIAL_DIR_ATTR,
                            tuning_seeds)

Objective = Callable[[dict, Any], Any]
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
OVER_BUDGET_ATTR = "rewardkit.over_budget"

optuna.logging.set_verbosity(optuna.logging.WARNING)



class WorkerError(RewardKitError):
    """A ``--workers`` process failed; the study is saved and the next run goes on."""


def _requeue(study: optuna.Study, trial: FrozenTrial) -> None:
    """Put a queued trial that started past the budget back in the queue, as it was."""
    attrs = {k: v for k, v in trial.system_attrs.items() if k != OVER_BUDGET_ATTR}
    study.add_trial(optuna.trial.create_trial(state=TrialState.WAITING, user_attrs=trial.user_attrs,
                                              system_attrs=attrs))


class _DeferredSigint:
    """Holds Ctrl-C back during a block that must not be cut short; ``pending`` says one came."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None
        self._installed = False

    def _hold(self, signum: int, frame: Any) -> None:
        self.pending = True

    def __enter__(self) -> "_DeferredSigint":
        # an ignored SIGINT (a background job of a non-interactive shell) stays ignored
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._hold)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)


def counted_trials(study: optuna.Study, states: Sequence[TrialState] = FINISHED) -> list[FrozenTrial]:
    """Trials in ``states`` that count toward the budget: not those failed at once for starting
    past it, nor those whose worker was lost (killed or interrupted), whose retry counts instead."""
    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    return [t for t in trials if t.state in states and not t.system_attrs.get(OVER_BUDGET_ATTR)
            and not (t.state == TrialState.FAIL and (t.system_attrs.get(LOST_ATTR) or t.number in retried))]


def load_base_config(base: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The base reward config as a dict and its source name (file path or None)."""
    if isinstance(base, Mapping):
        return json.loads(json.dumps(base)), None
    data = load_yaml(base)
    RewardComposer.from_dict(data, source=str(base))
    return data, str(base)


class BayesianRewardOptimizer:
    """Tune the keys of ``search_space`` in ``base_config`` to minimize (or maximize) ``objective``.

    ``base_config``: a reward YAML path or mapping. ``search_space``: a YAML path, a mapping or a
    :class:`SearchSpace`. ``storage``: a URL with a scheme (RDB), a journal file path or an Optuna storage
    object (e.g. ``InMemoryStorage``: one process, trial files under the working folder); default
    ``<study_name>.journal``. ``sampler``: tpe, gp, random or nsga2. ``pruner``: None, median,
    hyperband or wilcoxon (single objective only). ``n_seeds`` evaluation seeds per trial, shared
    by all trials (paired). ``trial_timeout``: seconds after which a run of the objective is
    stopped and failed (None: no limit).
    """

    heartbeat_interval: float = HEARTBEAT_INTERVAL
    grace_period: float = GRACE_PERIOD
    show_progress: bool = True
    _in_worker: bool = False
    trial_timeout: float | None = None
    """Seconds after which a trial (and each noise, validation or report run) is stopped and failed."""

    def __init__(self, base_config: str | Path | Mapping[str, Any], search_space: str | Path | Mapping | SearchSpace,
                 objective: Objective, *, study_name: str,
                 storage: "str | optuna.storages.BaseStorage | None" = None, sampler: str = "tpe",
                 pruner: str | None = None, directions: Sequence[str] = ("minimize",), seed: int | None = None,
                 n_seeds: int = 1, trial_timeout: float | None = None) -> None:
        if not callable(objective):
            raise TypeError(f"objective must be callable as objective(config, trial), got {objective!r}")
        if not isinstance(study_name, str) or not study_name:
            raise ConfigError(f"expected a non-empty study name, got {study_name!r}", path="study_name")
        self.base_config, self.base_source = load_base_config(base_config)
        if isinstance(search_space, SearchSpace):
            self.space = search_space
        elif isinstance(search_space, Mapping):
            self.space = SearchSpace.from_dict(search_space, source="<search space>")
        else:
            self.space = SearchSpace.from_yaml(search_space)
        self.space.check_against(self.base_config, base_source=self.base_source)
        check_training = getattr(objective, "check_training", None)
        if self.space.has_training and not callable(check_training):
            raise ConfigError("the search space tunes training settings, but the objective has no "
                              "check_training(settings) to check them before any trial", source=self.space.source,
                              path="training")
        self.space.check_structure(self.base_config, base_source=self.base_source, check_training=check_training)
        self.objective = objective
        self.study_name = study_name
        self.settings = StudySettings(sampler=sampler, pruner=pruner or "none", directions=tuple(directions),
                                      seed=seed, n_seeds=n_seeds)
        if isinstance(storage, optuna.storages.BaseStorage):  # e.g. InMemoryStorage: this process only
            check_study_name(study_name)
            self.storage_spec = StorageSpec(None, None, instance=storage)
        else:
            self.storage_spec = parse_storage(storage, study_name)
        self.study_dir = self.storage_spec.artifacts_root() / study_name
        self.seeds = tuning_seeds(n_seeds, seed)
        if trial_timeout is not None:
            self.trial_timeout = check_timeout(trial_timeout, "trial_timeout")
        self.study = self._open_study(worker=0)

    # ---- the study -----------------------------------------------------------------------------
    def _open_study(self, worker: int) -> optuna.Study:
        storage = open_storage(self.storage_spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study = optuna.create_study(storage=storage, study_name=self.study_name, load_if_exists=True,
                                        sampler=make_sampler(self.settings, worker),
                                        pruner=make_pruner(self.settings),
                                        directions=list(self.settings.directions))
        stored = study.user_attrs.get(STUDY_ATTR)
        mine = {"settings": self.settings.to_attr(), "search_space": self.space.to_dict(),
                "base_config": self.base_config}
        mine = json.loads(json.dumps(mine))
        where = f"study {self.study_name!r} in {self.storage_spec.describe()}"
        if stored is None:
            # one attribute, written at once, so that workers starting together never see half of it
            study.set_user_attr(STUDY_ATTR, mine)
            return study
        diff = StudySettings.from_attr(stored["settings"]).differences(self.settings)
        if diff:
            raise ConfigError(f"{where} was created with other settings ({'; '.join(diff)}); "
                              "omit them to use the stored ones, or start a new study")
        if stored["search_space"] != mine["search_space"]:
            raise ConfigError(f"{where} was created with another search space; use the same file or a new study",
                              source=self.space.source)
        if stored["base_config"] != mine["base_config"]:
            raise ConfigError(f"{where} was created with another base config; use the same file or a new study",
                              source=self.base_source)
        return study

    def trial_dir(self, number: int) -> Path:
        """The folder keeping trial ``number``'s reward.yaml and metrics.json."""
        return self.study_dir / "trials" / f"{number:05d}"

    def enqueue(self, config: str | Path | Mapping[str, Any]) -> dict[str, Any]:
        """Seed the study with a known config (its values at the search-space paths); once only."""
        if isinstance(config, Mapping):
            data, source = dict(config), None
        else:
            data, source = load_yaml(config), str(config)
            RewardComposer.from_dict(data, source=source)
        params = self.space.values_in(data, source=source)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study.enqueue_trial(params, user_attrs={"rewardkit.enqueued_from": source or "<dict>"},
                                     skip_if_exists=True)
        return params

    # ---- running ---------------------------------------------------------------------------------
    def finished_count(self) -> int:
        """Finished trials (complete, pruned, failed) that count toward ``n_trials``."""
        return len(counted_trials(self.study))

    def optimize(self, n_trials: int | None = None, timeout: float | None = None, n_workers: int = 1,
                 trial_timeout: float | None = None) -> optuna.Study:
        """Run trials until the study has ``n_trials`` finished ones (its total, not this call's),
        or ``timeout`` seconds pass; ``n_workers`` processes share the study through its storage.
        ``trial_timeout`` (seconds, default :attr:`trial_timeout`) stops a trial that runs longer
        and records it as failed."""
        if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0):
            raise ConfigError(f"expected a non-negative integer, got {n_trials!r}", path="n_trials")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"expected a positive number of seconds, got {timeout!r}", path="timeout")
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ConfigError(f"expected a positive integer, got {n_workers!r}", path="workers")
        if trial_timeout is not None:
            self.trial_timeout = check_timeout(trial_timeout, "trial_timeout")
        if n_workers > 1 and not self.storage_spec.shareable:
            raise ConfigError(f"{n_workers} worker processes cannot share a {self.storage_spec.describe()}; use a "
                              "journal file or a database URL", path="workers")
        progress = _Progress(n_trials, enabled=self.show_progress)
        try:
            if n_workers == 1:
                self._work(n_trials, timeout, progress)
            else:
                self._work_in_processes(n_workers, n_trials, timeout, progress)
        finally:
            recover_stale_trials(self.study, self.grace_period)
            progress.close(self.study)
        return self.study

    def _work_in_processes(self, n_workers: int, n_trials: int | None, timeout: float | None,
                           progress: "_Progress") -> None:
        """Run ``n_workers`` processes; one killed by a signal is replaced (its trial is retried)."""
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        deadline = None if timeout is None else time.monotonic() + timeout

        def start(k: int) -> Any:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            proc = ctx.Process(target=self._worker_main, args=(k, n_trials, left), name=f"rewardkit-worker-{k}")
            proc.start()
            return proc

        procs = {k: start(k) for k in range(n_workers)}
        replaced, failed, interrupted = 0, [], False
        try:
            while procs:
                for k, proc in list(procs.items()):
                    if proc.is_alive():
                        continue
                    proc.join()
                    del procs[k]
                    code = proc.exitcode
                    if code == 0:
                        continue
                    if code == EXIT_INTERRUPTED:
                        interrupted = True
                    elif code is not None and (code < 0 or code == EXIT_IGNORED_TIMEOUT) and replaced < 4 * n_workers:
                        replaced += 1  # an ignored timeout: its trial is failed already (the error above says why)
                        tqdm.write(lost_worker_message(f"worker {k} (pid {proc.pid})", code,
                                                       "its running trial is failed and retried") if code < 0 else
                                   f"rewardkit optimize: worker {k} (pid {proc.pid}) was ended: its objective ignored "
                                   "the trial timeout; that trial is failed; started another worker", file=sys.stderr)
                        procs[k] = start(k)
                    else:
                        failed.append(f"worker {k} (pid {proc.pid}) "
                                      + (f"killed by {signal_name(-code)}" if code and code < 0 else f"exit code {code}"))
                progress.update(self.study)
                time.sleep(0.2)
        except KeyboardInterrupt:
            # Ctrl-C reached the workers too (one process group); a worker that did not stop on its
            # own (SIGINT sent to the parent alone) gets one: each fails its running trial and
            # enqueues its retry
            for proc in procs.values():
                proc.join(10)
                if proc.is_alive():
                    os.kill(proc.pid, signal.SIGINT)
            for proc in procs.values():
                proc.join(30)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
            raise
        if interrupted:
            raise KeyboardInterrupt
        if failed:
            raise WorkerError(f"{len(failed)} of {n_workers} worker processes failed ({'; '.join(failed)}; "
                              "their errors are above); the study is saved and the next run retries their trials")

    def _worker_main(self, worker: int, n_trials: int | None, timeout: float | None) -> None:
        """A ``--workers`` process: its errors are one line on stderr and an exit code, never a traceback."""
        try:
            self._in_worker = True
            self.study = self._open_study(worker)
            self._work(n_trials, timeout, _Progress(n_trials, enabled=False))
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - reported in one line; the parent says which worker
            print(f"error: worker {worker}: {exc if isinstance(exc, RewardKitError) else objective_failure(exc)}",
                  file=sys.stderr)
            sys.exit(1)

    def _work(self, n_trials: int | None, timeout: float | None, progress: "_Progress") -> None:
        study = self.study
        start = time.monotonic()
        while True:
            recover_stale_trials(study, self.grace_period)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)  # RDB storages' own heartbeats
            if timeout is not None and time.monotonic() - start >= timeout:
                return
            if n_trials is not None and len(counted_trials(study, FINISHED + (TrialState.RUNNING,))) >= n_trials:
                return
            frozen = self._one_trial(study, n_trials)
            if frozen is not None:
                self._after_trial(study, frozen)
            progress.update(study)

    def _one_trial(self, study: optuna.Study, n_trials: int | None) -> FrozenTrial | None:
        """Ask, run and tell one trial. What user code raises fails the trial (``SystemExit`` and a
        timeout too); ``KeyboardInterrupt`` fails it, enqueues its retry and stops the study."""
        with _DeferredSigint() as early:  # asked and marked as this worker's, or neither
            trial = study.ask()
            if n_trials is not None:
                ahead = [t for t in counted_trials(study, FINISHED + (TrialState.RUNNING,)) if t.number < trial.number]
                if len(ahead) >= n_trials:
                    study._storage.set_trial_system_attr(trial._trial_id, OVER_BUDGET_ATTR, True)
                    frozen = study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                    if "fixed_params" in frozen.system_attrs:  # an enqueued config or a retry: keep it queued
                        _requeue(study, frozen)
                    trial = None
            heartbeat = TrialHeartbeat(trial, self.heartbeat_interval).__enter__() if trial is not None else None
        if trial is None:
            if early.pending:
                raise KeyboardInterrupt
            return None
        values: Any = None
        interrupted: KeyboardInterrupt | None = None
        try:
            if early.pending:
                raise KeyboardInterrupt
            values = self._run_trial(trial)
            state = TrialState.COMPLETE
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except KeyboardInterrupt as exc:
            state, interrupted = TrialState.FAIL, exc
        except (Exception, SystemExit, TrialTimeout) as exc:  # kept with the trial; the study goes on
            state = TrialState.FAIL
            self._record_error(trial, objective_failure(exc)
                               + ("; the trial is failed, the study goes on" if isinstance(exc, SystemExit) else ""))
        with _DeferredSigint() as late:  # a Ctrl-C now must not leave the trial RUNNING or its retry unqueued
            heartbeat.__exit__(None, None, None)
            if interrupted is None:
                study.tell(trial, values, state=state, skip_if_finished=True)
                frozen = study._storage.get_trial(trial._trial_id)
            else:
                self._record_error(trial, "KeyboardInterrupt: the study was interrupted; this trial is retried")
                self._record_system(trial, LOST_ATTR, True)
                frozen = study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                if frozen.state == TrialState.FAIL:
                    enqueue_retry(study, trial._trial_id)
        if interrupted is not None:
            raise interrupted
        if late.pending:  # the trial is told; the study stops after it
            self._after_trial(study, frozen)
            raise KeyboardInterrupt
        return frozen

    @staticmethod
    def _record_error(trial: optuna.Trial, text: str) -> None:
        try:
            trial.set_user_attr(ERROR_ATTR, text[:2000])
        except UpdateFinishedTrialError:  # another worker failed it meanwhile (it also enqueued its retry)
            pass

    @staticmethod
    def _record_system(trial: optuna.Trial, key: str, value: Any) -> None:
        try:
            trial.storage.set_trial_system_attr(trial._trial_id, key, value)
        except UpdateFinishedTrialError:
            pass

    def _run_trial(self, trial: optuna.Trial) -> Any:
        """Sample the trial's config, keep its files and run the objective (within the trial timeout)."""
        config = self.space.sample(self.base_config, trial)
        folder = self.trial_dir(trial.number)
        folder.mkdir(parents=True, exist_ok=True)
        write_reward_yaml(folder / "reward.yaml", config,
                          f"study {self.study_name}, trial {trial.number}: {self.base_source or 'base'} "
                          "with the sampled values")
        trial.set_user_attr(TRIAL_DIR_ATTR, str(folder))
        trial.set_user_attr(SEEDS_ATTR, self.seeds)
        trial.set_user_attr(PHASE_ATTR, "tune")
        trial.set_user_attr(PRUNER_ATTR, self.settings.pruner)
        trial.set_user_attr(REPEAT_ATTR, 0)
        trial.set_user_attr(TRAINING_ATTR, self.space.training_values(trial.params))
        RewardComposer.from_dict(config, source=str(folder / "reward.yaml"))

        def abandon(text: str) -> None:  # the objective ignored the timeout: fail the trial, then the process ends
            self._record_error(trial, f"TrialTimeout: {text}")
            trial.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            print(f"error: trial {trial.number}: {text}; the trial is failed"
                  + ("" if self._in_worker else "; run the same command again to go on with the study"),
                  file=sys.stderr, flush=True)

        with time_limit(self.trial_timeout, abandon) as limit:
            result = self.objective(config, trial)
        limit.check()
        return check_values(result, len(self.settings.directions))

    def _after_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.system_attrs.get(OVER_BUDGET_ATTR):
            return
        folder = self.trial_dir(trial.number)
        folder.mkdir(parents=True, exist_ok=True)
        metrics = {"number": trial.number, "state": trial.state.name, "values": trial.values,
                   "params": trial.params, "intermediate_values": {str(k): v for k, v in trial.intermediate_values.items()},
                   "user_attrs": {k: v for k, v in trial.user_attrs.items()},
                   "duration_s": trial.duration.total_seconds() if trial.duration else None,
                   "retry_of": trial.system_attrs.get("failed_trial")}
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str) + "\n", encoding="utf-8")

    # ---- results ---------------------------------------------------------------------------------
    def best_trials(self) -> list[FrozenTrial]:
        """Single objective: complete trials best first. Several: the Pareto front, by objective 1."""
        if len(self.settings.directions) > 1:
            front = list(self.study.best_trials)
            sign = 1 if self.settings.directions[0] == "minimize" else -1
            return sorted(front, key=lambda t: sign * t.values[0])
        done = counted_trials(self.study, (TrialState.COMPLETE,))
        sign = 1 if self.settings.directions[0] == "minimize" else -1
        return sorted(done, key=lambda t: (sign * t.value, t.number))

    def config_of(self, trial: FrozenTrial) -> dict[str, Any]:
        """The reward config trial ``trial`` ran with."""
        return self.space.apply(self.base_config, trial.params)

    def best_config(self) -> dict[str, Any]:
        """The best trial's reward config (several objectives: the Pareto trial best on the first)."""
        best = self.best_trials()
        if not best:
            raise ConfigError(f"study {self.study_name!r} has no complete trial yet")
        config = self.config_of(best[0])
        RewardComposer.from_dict(config, source=f"study {self.study_name} trial {best[0].number}")
        return config

    def export_best(self, path: str | Path) -> Path:
        """Write the best config as YAML that ``rewardkit validate`` accepts."""
        best = self.best_trials()
        config = self.best_config()
        values = ", ".join(f"{v:.6g}" for v in best[0].values)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_reward_yaml(path, config, f"best of study {self.study_name} (trial {best[0].number}, "
                                        f"objective {values}); tuned from {self.base_source or 'a base config'}")
        return path


def write_reward_yaml(path: Path, config: Mapping[str, Any], comment: str) -> None:
    """A reward config as YAML with a one-line header comment."""
    text = f"# {comment}\n" + yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=False)
    path.write_text(text, encoding="utf-8")


class _Progress:
    """A progress bar of the study's finished trials (tqdm, on stderr)."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.bar = None
        if enabled:
            self.bar = tqdm(total=total, unit="trial", desc="trials", file=sys.stderr, mininterval=0.5,
                            dynamic_ncols=True)

    def update(self, study: optuna.Study) -> None:
        if self.bar is None:
            return
        trials = counted_trials(study, FINISHED)
        self.bar.n = len(trials)
        states = [t.state for t in trials]
        self.bar.set_postfix(complete=states.count(TrialState.COMPLETE), pruned=states.count(TrialState.PRUNED),
                             failed=states.count(TrialState.FAIL), refresh=False)
        self.bar.refresh()

    def close(self, study: optuna.Study) -> None:
        if self.bar is not None:
            self.update(study)
            self.bar.close()
