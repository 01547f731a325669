"""What an objective reads from its trial (seeds, folder) and how it reports evaluations.

The optimizer puts into each trial's user attributes, before the objective runs:

- ``rewardkit.seeds``: the evaluation seeds (the same for every trial of a study, so that trials
  are compared on paired seeds). Tuning seeds are below :data:`REPORT_SEED_BASE`; the seeds of
  ``rewardkit optimize --report`` are at or above it, so the two never overlap.
- ``rewardkit.trial_dir``: the trial's folder next to the study, holding ``reward.yaml`` (the
  trial's reward config) and, once the trial ends, ``metrics.json``.
- ``rewardkit.phase``: ``tune`` in the study's search, ``validate`` when the base and the best
  candidates are re-run on validation seeds, ``report`` when re-evaluated on report seeds.
- ``rewardkit.repeat``: which of a config's independent evaluations this is (0 in the search);
  each repeat has its own seeds, and an objective that trains should use it for its own random
  state too (another training seed), so that repeats measure the whole noise.
- ``rewardkit.training``: the sampled training settings of the search space's ``training:``
  section (dotted keys into the objective's own training config), ``{}`` when there are none.

Three disjoint seed ranges: tuning seeds below :data:`VALIDATION_SEED_BASE`, validation seeds from
it up to :data:`REPORT_SEED_BASE`, report seeds from there on. An objective maps them onto its
own seeds (the Vidur objective onto simulator seeds) and must keep the three apart.

An objective may also record, on its trial, the value of each seed (:func:`record_seed_values`,
so that validation pairs candidates seed by seed) and what the evaluation cost
(:func:`record_cost`, e.g. training decisions, summed per phase in the study's compute table).

These helpers work on Optuna trials and on the ``FixedTrial`` that validation and ``--report`` pass.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

SEEDS_ATTR = "rewardkit.seeds"
TRIAL_DIR_ATTR = "rewardkit.trial_dir"
PHASE_ATTR = "rewardkit.phase"
PRUNER_ATTR = "rewardkit.pruner"
REPEAT_ATTR = "rewardkit.repeat"
TRAINING_ATTR = "rewardkit.training"
SEED_VALUES_ATTR = "rewardkit.seed_values"
COST_ATTR = "rewardkit.cost"
VALIDATION_SEED_BASE = 500_000
REPORT_SEED_BASE = 1_000_000
#: the most repeats x seeds a study may ask for, so that the three seed ranges never meet
MAX_SEEDS_PER_PHASE = 100_000


def _check_counts(n_seeds: int, repeat: int) -> None:
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ValueError(f"expected a positive number of seeds, got {n_seeds!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise ValueError(f"expected a repeat index >= 0, got {repeat!r}")
    if (repeat + 1) * n_seeds > MAX_SEEDS_PER_PHASE:
        raise ValueError(f"expected (repeat + 1) x seeds <= {MAX_SEEDS_PER_PHASE}, got {repeat + 1} x {n_seeds}")


def tuning_seeds(n_seeds: int, study_seed: int | None = None, repeat: int = 0) -> list[int]:
    """``n_seeds`` seeds for the study's trials (repeat ``repeat``), all below :data:`VALIDATION_SEED_BASE`."""
    _check_counts(n_seeds, repeat)
    span = VALIDATION_SEED_BASE - MAX_SEEDS_PER_PHASE
    base = (0 if study_seed is None else study_seed * 1009) % span
    return [base + repeat * n_seeds + i for i in range(n_seeds)]


def validation_seeds(n_seeds: int, repeat: int = 0) -> list[int]:
    """``n_seeds`` seeds of validation repeat ``repeat``: never used by the search nor the report."""
    _check_counts(n_seeds, repeat)
    return [VALIDATION_SEED_BASE + repeat * n_seeds + i for i in range(n_seeds)]


def report_seeds(n_seeds: int) -> list[int]:
    """``n_seeds`` fresh seeds for re-evaluating the best trials, never used while tuning."""
    _check_counts(n_seeds, 0)
    return [REPORT_SEED_BASE + i for i in range(n_seeds)]


def trial_repeat(trial: Any) -> int:
    """Which independent evaluation of its config ``trial`` is (0 in the search and outside a study)."""
    return int(trial.user_attrs.get(REPEAT_ATTR, 0))


def trial_training(trial: Any) -> dict[str, Any]:
    """The training settings the search space sampled for ``trial`` (dotted keys; ``{}`` when none)."""
    return dict(trial.user_attrs.get(TRAINING_ATTR) or {})


def record_seed_values(trial: Any, values: Sequence[float]) -> None:
    """Keep the objective's value on each of the trial's seeds, in the order of :func:`trial_seeds`."""
    values = [float(v) for v in values]
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"expected finite values, got {values}")
    trial.set_user_attr(SEED_VALUES_ATTR, values)


def record_cost(trial: Any, amount: float) -> None:
    """Record what this evaluation cost (e.g. training decisions), for the study's compute table."""
    amount = float(amount)
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"expected a finite cost >= 0, got {amount}")
    trial.set_user_attr(COST_ATTR, amount)


def trial_seeds(trial: Any, default: Sequence[int] = (0,)) -> list[int]:
    """The evaluation seeds the optimizer gave ``trial`` (``default`` outside an optimizer)."""
    return list(trial.user_attrs.get(SEEDS_ATTR, default))


def trial_directory(trial: Any) -> Path | None:
    """The folder of ``trial`` next to the study (None outside an optimizer)."""
    value = trial.user_attrs.get(TRIAL_DIR_ATTR)
    return None if value is None else Path(value)


def trial_phase(trial: Any) -> str:
    """``tune`` in the search, ``validate`` on validation seeds, ``report`` on report seeds."""
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
