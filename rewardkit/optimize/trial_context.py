"""What an objective reads from its trial (seeds, folder) and how it reports evaluations.

The optimizer puts into each trial's user attributes, before the objective runs:

- ``rewardkit.seeds``: the evaluation seeds (the same for every trial of a study, so that trials
  are compared on paired seeds). Tuning seeds are below :data:`REPORT_SEED_BASE`; the seeds of
  ``rewardkit optimize --report`` are at or above it, so the two never overlap.
- ``rewardkit.trial_dir``: the trial's folder next to the study, holding ``reward.yaml`` (the
  trial's reward config) and, once the trial ends, ``metrics.json``.
- ``rewardkit.phase``: ``tune`` in the study, ``report`` when re-evaluated on fresh seeds.

These helpers work on Optuna trials and on the ``FixedTrial`` that ``--report`` passes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

SEEDS_ATTR = "rewardkit.seeds"
TRIAL_DIR_ATTR = "rewardkit.trial_dir"
PHASE_ATTR = "rewardkit.phase"
PRUNER_ATTR = "rewardkit.pruner"
REPORT_SEED_BASE = 1_000_000


def tuning_seeds(n_seeds: int, study_seed: int | None = None) -> list[int]:
    """``n_seeds`` seeds for the study's trials, all below :data:`REPORT_SEED_BASE`."""
    base = (0 if study_seed is None else study_seed * 1009) % (REPORT_SEED_BASE - n_seeds)
    return [base + i for i in range(n_seeds)]


def report_seeds(n_seeds: int) -> list[int]:
    """``n_seeds`` fresh seeds for re-evaluating the best trials, never used while tuning."""
    return [REPORT_SEED_BASE + i for i in range(n_seeds)]


def trial_seeds(trial: Any, default: Sequence[int] = (0,)) -> list[int]:
    """The evaluation seeds the optimizer gave ``trial`` (``default`` outside an optimizer)."""
    return list(trial.user_attrs.get(SEEDS_ATTR, default))


def trial_directory(trial: Any) -> Path | None:
    """The folder of ``trial`` next to the study (None outside an optimizer)."""
    value = trial.user_attrs.get(TRIAL_DIR_ATTR)
    return None if value is None else Path(value)


def trial_phase(trial: Any) -> str:
    """``tune`` inside a study, ``report`` when re-evaluated on fresh seeds."""
    return str(trial.user_attrs.get(PHASE_ATTR, "tune"))


def report_evaluation(trial: Any, step: int, values_per_seed: Sequence[float]) -> bool:
    """Report one evaluation (a value per seed, lower or higher as the study's direction) at
    training ``step``; return True when the trial should stop (the caller raises ``TrialPruned``).

    With the Wilcoxon pruner each seed's value is reported at its own step
    (``step * n_seeds + seed_index``), so the pruner compares the trial with the best one pair by
    pair; other pruners see the mean over seeds at ``step``. Multi-objective studies have no
    pruner: nothing is reported to Optuna and this returns False. Outside a study
    (``FixedTrial``) this does nothing.
    """
    values = [float(v) for v in values_per_seed]
    if not values or any(not math.isfinite(v) for v in values):
        raise ValueError(f"expected one finite value per seed, got {values}")
    study = getattr(trial, "study", None)
    if study is None or trial_phase(trial) != "tune" or len(study.directions) > 1:
        return False
    if trial.user_attrs.get(PRUNER_ATTR) == "wilcoxon":
        for i, v in enumerate(values):
            trial.report(v, step * len(values) + i)
    else:
        trial.report(sum(values) / len(values), step)
    return bool(trial.should_prune())
