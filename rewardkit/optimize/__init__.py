"""Tune reward weights and parameters by Bayesian optimization (Optuna).

The one rewardkit package that imports optuna. See docs/optimization.md.

- :class:`BayesianRewardOptimizer`: the study (samplers tpe/gp/random/nsga2, pruners
  median/hyperband/wilcoxon, journal or RDB storage, resumable, many workers).
- :class:`SearchSpace`: the YAML of key paths to tune, checked against the base config.
- :mod:`.trial_context`: what an objective reads from its trial and how it reports evaluations.
"""

from __future__ import annotations

try:
    import optuna  # noqa: F401  (the optional extra: checked first so that a missing one names the install)
except ImportError as exc:
    raise ImportError(f"rewardkit.optimize needs Optuna: pip install 'rewardkit[optuna]' ({exc})",
                      name=exc.name) from exc

from .limits import EvaluationError, TrialTimeout
from .objectives import OBJECTIVE_GROUP, resolve_objective
from .optimizer import BayesianRewardOptimizer
from .values import check_values
from .search_space import Dimension, SearchSpace
from .storage import parse_storage
from .samplers import PRUNERS, SAMPLERS, StudySettings
from .trial_context import (REPORT_SEED_BASE, record_cost, record_seed_values, report_evaluation, report_seeds,
                            trial_directory, trial_phase, trial_repeat, trial_seeds, trial_training, tuning_seeds,
                            validation_seeds)

__all__ = [
    "BayesianRewardOptimizer", "SearchSpace", "Dimension", "StudySettings", "SAMPLERS", "PRUNERS",
    "OBJECTIVE_GROUP", "resolve_objective", "parse_storage", "check_values", "report_evaluation",
    "trial_seeds", "trial_directory", "trial_phase", "trial_repeat", "trial_training", "record_seed_values",
    "record_cost", "tuning_seeds", "validation_seeds", "report_seeds", "REPORT_SEED_BASE",
    "TrialTimeout", "EvaluationError",
]
