"""BayesianRewardOptimizer: tune a reward config's weights and parameters with Optuna.

The objective is what users care about (the metrics of a policy trained with the trial's
reward), never the shaped reward itself: ``objective(config, trial) -> float | sequence``, where
``config`` is the base reward config with the sampled values put in (a plain dict that
``RewardComposer.from_dict`` accepts, checked before the objective runs).

A study is persistent (a journal file by default) and resumable: ``n_trials`` is the study's
total of finished trials (complete, pruned or failed), so running again with a larger number
continues to it; the sampler and pruner are stored with the study and restored; a trial whose
worker was killed is failed and retried with the same parameters (see ``recovery``). Each trial
keeps ``reward.yaml`` and ``metrics.json`` in ``<study folder>/trials/<number>/``.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna
import yaml
from tqdm import tqdm
from optuna.trial import FrozenTrial, TrialState

from ..composer import RewardComposer
from ..config import load_yaml
from ..errors import ConfigError
from .recovery import TrialHeartbeat, recover_stale_trials
from .search_space import SearchSpace
from .storage import GRACE_PERIOD, HEARTBEAT_INTERVAL, parse_storage, open_storage
from .strategies import STUDY_ATTR, StudySettings, make_pruner, make_sampler
from .values import check_values
from .trial_context import (PHASE_ATTR, PRUNER_ATTR, REPEAT_ATTR, SEEDS_ATTR, TRAINING_ATTR, TRIAL_DIR_ATTR,
                            tuning_seeds)

Objective = Callable[[dict, Any], Any]
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
OVER_BUDGET_ATTR = "rewardkit.over_budget"
ERROR_ATTR = "rewardkit.error"

optuna.logging.set_verbosity(optuna.logging.WARNING)


class OverBudget(Exception):
    """A trial started by a concurrent worker after the study's total was already reached."""


def counted_trials(study: optuna.Study, states: Sequence[TrialState] = FINISHED) -> list[FrozenTrial]:
    """Trials in ``states``, without those failed at once for starting past the budget."""
    return [t for t in study.get_trials(deepcopy=False, states=tuple(states))
            if not t.system_attrs.get(OVER_BUDGET_ATTR)]


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
    :class:`SearchSpace`. ``storage``: a URL with a scheme (RDB) or a journal file path; default
    ``<study_name>.journal``. ``sampler``: tpe, gp, random or nsga2. ``pruner``: None, median,
    hyperband or wilcoxon (single objective only). ``n_seeds`` evaluation seeds per trial, shared
    by all trials (paired).
    """

    heartbeat_interval: float = HEARTBEAT_INTERVAL
    grace_period: float = GRACE_PERIOD
    show_progress: bool = True

    def __init__(self, base_config: str | Path | Mapping[str, Any], search_space: str | Path | Mapping | SearchSpace,
                 objective: Objective, *, study_name: str, storage: str | None = None, sampler: str = "tpe",
                 pruner: str | None = None, directions: Sequence[str] = ("minimize",), seed: int | None = None,
                 n_seeds: int = 1) -> None:
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
        self.storage_spec = parse_storage(storage, study_name)
        self.study_dir = self.storage_spec.artifacts_root() / study_name
        self.seeds = tuning_seeds(n_seeds, seed)
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

    def optimize(self, n_trials: int | None = None, timeout: float | None = None, n_workers: int = 1) -> optuna.Study:
        """Run trials until the study has ``n_trials`` finished ones (its total, not this call's),
        or ``timeout`` seconds pass; ``n_workers`` processes share the study through its storage."""
        if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0):
            raise ConfigError(f"expected a non-negative integer, got {n_trials!r}", path="n_trials")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"expected a positive number of seconds, got {timeout!r}", path="timeout")
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ConfigError(f"expected a positive integer, got {n_workers!r}", path="workers")
        progress = _Progress(n_trials, enabled=self.show_progress)
        try:
            if n_workers == 1:
                self._work(0, n_trials, timeout, progress)
            else:
                self._work_in_processes(n_workers, n_trials, timeout, progress)
        finally:
            progress.close(self.study)
        return self.study

    def _work_in_processes(self, n_workers: int, n_trials: int | None, timeout: float | None,
                           progress: "_Progress") -> None:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        procs = [ctx.Process(target=self._worker_main, args=(k, n_trials, timeout), name=f"rewardkit-worker-{k}")
                 for k in range(n_workers)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                progress.update(self.study)
                time.sleep(0.5)
        finally:
            for p in procs:
                p.join()
        bad = [p.exitcode for p in procs if p.exitcode != 0]
        if bad:
            raise RuntimeError(f"{len(bad)} of {n_workers} worker processes exited with codes {bad}; "
                               "their running trials are retried by the next run")

    def _worker_main(self, worker: int, n_trials: int | None, timeout: float | None) -> None:
        self.study = self._open_study(worker)
        self._work(worker, n_trials, timeout, _Progress(n_trials, enabled=False))

    def _work(self, worker: int, n_trials: int | None, timeout: float | None, progress: "_Progress") -> None:
        study = self.study
        start = time.monotonic()
        while True:
            recover_stale_trials(study, self.grace_period)
            if timeout is not None and time.monotonic() - start >= timeout:
                return
            if n_trials is not None and len(counted_trials(study, FINISHED + (TrialState.RUNNING,))) >= n_trials:
                return
            study.optimize(lambda trial: self._run_trial(trial, n_trials), n_trials=1, catch=(Exception,),
                           callbacks=[self._after_trial, lambda s, t: progress.update(s)])

    def _run_trial(self, trial: optuna.Trial, n_trials: int | None) -> Any:
        if n_trials is not None:
            ahead = [t for t in counted_trials(trial.study, FINISHED + (TrialState.RUNNING,)) if t.number < trial.number]
            if len(ahead) >= n_trials:
                trial.storage.set_trial_system_attr(trial._trial_id, OVER_BUDGET_ATTR, True)
                raise OverBudget(f"trial {trial.number} started after the study reached {n_trials} trials")
        with TrialHeartbeat(trial, self.heartbeat_interval):
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
            try:
                RewardComposer.from_dict(config, source=str(folder / "reward.yaml"))
                return check_values(self.objective(config, trial), len(self.settings.directions))
            except optuna.TrialPruned:
                raise
            except Exception as exc:  # kept with the trial: the study goes on with the next one
                trial.set_user_attr(ERROR_ATTR, f"{type(exc).__name__}: {exc}"[:2000])
                raise

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
