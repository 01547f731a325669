"""The per-step records a monitor reads, and the window means its detectors compare.

A record is one logged training step as TRL's ``GRPOTrainer`` writes it: ``step`` and the log keys
below (any other keys are kept and ignored). rewardkit's own breakdown CSV is translated into the
same keys by :mod:`rewardkit.monitor.logs`, so every detector reads one vocabulary.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

#: the total reward (TRL: the weighted sum of the reward functions, mean over the batch)
TOTAL = "reward"
#: mean completion length in tokens
LENGTH = "completions/mean_length"
#: fraction of GRPO groups whose rewards all agree (no advantage, no gradient)
ZERO_STD = "frac_reward_zero_std"
#: fraction of distinct completions within a group, averaged over groups (logged by
#: :func:`rewardkit.monitor.trl_callback.with_diversity`; TRL does not log it)
DISTINCT = "monitor/distinct_frac"


def term_mean(term: str) -> str:
    """TRL's key of a reward function's batch mean (rewardkit names the functions after terms)."""
    return f"rewards/{term}/mean"


def term_std(term: str) -> str:
    """TRL's key of a reward function's standard deviation over the batch."""
    return f"rewards/{term}/std"


class History:
    """The records seen so far, in order; window means over any key (NaN where a record lacks it)."""

    def __init__(self) -> None:
        self.records: list[dict[str, float]] = []
        self._columns: dict[str, list[float]] = {}

    def __len__(self) -> int:
        return len(self.records)

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one step's record (``step`` and numeric log keys; other values are dropped)."""
        clean = {str(k): float(v) for k, v in record.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)}
        n = len(self.records)
        for key in clean.keys() - self._columns.keys():
            self._columns[key] = [math.nan] * n
        for key, column in self._columns.items():
            column.append(clean.get(key, math.nan))
        self.records.append(clean)

    @property
    def step(self) -> int:
        """The step of the latest record (its index when it has no ``step``)."""
        step = self.records[-1].get("step", math.nan) if self.records else math.nan
        return len(self.records) - 1 if math.isnan(step) else int(step)

    def step_at(self, index: int) -> int:
        """The step of record ``index``."""
        step = self.records[index].get("step", math.nan)
        return index if math.isnan(step) else int(step)

    def has(self, key: str) -> bool:
        """Whether some record holds a (non-NaN) value for ``key``."""
        column = self._columns.get(key)
        return column is not None and any(not math.isnan(v) for v in column)

    def column(self, key: str) -> np.ndarray:
        """Every record's value of ``key`` (NaN where absent)."""
        return np.asarray(self._columns.get(key, [math.nan] * len(self.records)), dtype=np.float64)

    def recent(self, key: str, window: int) -> float:
        """Mean of ``key`` over the last ``window`` records (NaN when none holds it)."""
        return _mean(self.column(key)[-window:])

    def baseline(self, key: str, window: int) -> float:
        """Mean of ``key`` over the first ``window`` records: where training started."""
        return _mean(self.column(key)[:window])


def _mean(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else math.nan
