"""Samplers and pruners by name, and their settings stored with the study.

Optuna does not persist a study's sampler or pruner, so a resumed study (or another worker) would
silently use the defaults. The settings are written into the study's user attributes when it is
created (``rewardkit.study``: these settings, the search space and the base config) and read back by every later run.

Pruning and several objectives: Optuna's pruners raise in multi-objective studies, so a pruner
with more than one direction is refused with a :class:`ConfigError` (use ``pruner=None``).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from ..errors import ConfigError

SAMPLERS = ("tpe", "gp", "random", "nsga2")
PRUNERS = ("none", "median", "halving", "hyperband", "wilcoxon")
STUDY_ATTR = "rewardkit.study"
#: the largest sampler seed: NumPy's (and so Optuna's samplers') seeds are 32-bit
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class StudySettings:
    """What a study was created with; every run and worker of the study uses the same."""

    sampler: str = "tpe"
    pruner: str = "none"
    directions: tuple[str, ...] = ("minimize",)
    seed: int | None = None
    n_seeds: int = 1

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"expected one of {', '.join(SAMPLERS)}, got {self.sampler!r}", path="sampler")
        if self.pruner not in PRUNERS:
            raise ConfigError(f"expected one of {', '.join(PRUNERS)}, got {self.pruner!r}", path="pruner")
        if not self.directions or any(d not in ("minimize", "maximize") for d in self.directions):
            raise ConfigError(f"expected a non-empty list of 'minimize'/'maximize', got {list(self.directions)}",
                              path="directions")
        if len(self.directions) > 1 and self.pruner != "none":
            raise ConfigError(
                f"a pruner ({self.pruner}) needs a single objective: Optuna's pruners raise in "
                f"multi-objective studies and rewardkit does not guess a rule to combine "
                f"{len(self.directions)} objectives; use pruner none (--pruner none)", path="pruner")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed <= MAX_SEED):
            raise ConfigError(f"expected an integer from 0 to 2**32 - 1 ({MAX_SEED}) or null (NumPy's and Optuna's "
                              f"seed range), got {self.seed!r}", path="seed")
        if isinstance(self.n_seeds, bool) or not isinstance(self.n_seeds, int) or self.n_seeds < 1:
            raise ConfigError(f"expected a positive integer, got {self.n_seeds!r}", path="n_seeds")

    def to_attr(self) -> dict[str, Any]:
        d = asdict(self)
        d["directions"] = list(self.directions)
        return d

    @classmethod
    def from_attr(cls, data: Mapping[str, Any]) -> "StudySettings":
        return cls(sampler=data["sampler"], pruner=data["pruner"], directions=tuple(data["directions"]),
                   seed=data.get("seed"), n_seeds=int(data.get("n_seeds", 1)))

    def differences(self, other: "StudySettings") -> list[str]:
        """Human-readable ``name: stored vs given`` for each setting that differs."""
        mine, theirs = self.to_attr(), other.to_attr()
        return [f"{k}: {mine[k]!r} (stored) vs {theirs[k]!r} (given)" for k in mine if mine[k] != theirs[k]]


def trial_seed(study_seed: int, trial_number: int) -> int:
    """The sampler seed of trial ``trial_number`` in a study seeded with ``study_seed``."""
    return int(np.random.SeedSequence([study_seed, trial_number]).generate_state(1)[0])


def _new_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        # constant_liar: running trials of other workers count as bad guesses, so parallel
        # workers spread out instead of sampling the same point
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.NSGAIISampler(seed=seed)


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """A sampler whose random state for each trial comes from (study seed, trial number).

    One seed for the whole process would make a resumed study, or a second worker, draw the
    configs the first run already drew. Here trial ``n`` of a study seeded with ``s`` uses a fresh
    ``inner`` sampler seeded with :func:`trial_seed` ``(s, n)``: a fresh study with the same seed
    replays the same sequence, while a resumption (later trial numbers) and concurrent workers
    (other trial numbers) draw new configs. The model-based samplers still learn from every
    finished trial of the study, which they read from the storage.
    """

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.seed = seed
        self.inner = _new_sampler(name, seed)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner = _new_sampler(self.name, trial_seed(self.seed, trial.number))
        self.inner.before_trial(study, trial)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: Any) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


def make_sampler(settings: StudySettings, worker: int = 0) -> optuna.samplers.BaseSampler:
    """The sampler of ``settings``: with a seed, a :class:`TrialSeededSampler` (every process and
    every run of the study draws per trial number, so ``worker`` no longer matters); without one,
    Optuna's sampler seeded from the OS."""
    if settings.seed is None:
        return _new_sampler(settings.sampler, None)
    return TrialSeededSampler(settings.sampler, settings.seed)


def make_pruner(settings: StudySettings) -> optuna.pruners.BasePruner:
    """The pruner of ``settings`` (``NopPruner`` for none).

    The Wilcoxon pruner compares a trial's values with the best trial's at the same steps; the
    objective reports one value per (evaluation, seed) pair through
    :func:`rewardkit.optimize.trial_context.report_evaluation`, which makes those steps paired.
    """
    name = settings.pruner
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=4, n_warmup_steps=0)
    if name == "halving":
        # successive halving over the training budget: at each rung (2, 4, 8... reported steps,
        # e.g. PPO updates) only the better half of the trials that reached it goes on
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=2, reduction_factor=2)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, reduction_factor=3)
    return optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=2)


def read_settings(study: optuna.Study) -> StudySettings | None:
    """The settings stored with ``study``, or None for a study rewardkit did not create."""
    data = study.user_attrs.get(STUDY_ATTR)
    return None if data is None else StudySettings.from_attr(data["settings"])
