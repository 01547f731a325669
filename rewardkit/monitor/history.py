"""The per-step records a monitor reads, and the window means its detectors compare.

A record is one logged training step as TRL's ``GRPOTrainer`` writes it: ``step`` and the log keys
below (any other keys are kept and ignored). rewardkit's own breakdown CSV is translated into the
same keys by :mod:`rewardkit.monitor.logs`, so every detector reads one vocabulary.
"""

from __future__ import annotations

import math
from array import array
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
    """The records seen so far, in order; window means over any key (NaN where a record lacks it).

    Every query a detector makes per step costs the same however long the history is: a column is
    a compact array of floats, :meth:`has` reads a count of finite values, :meth:`recent` reads
    only the last ``window`` values and :meth:`baseline` is computed once per key and window, when
    the first ``window`` records are in (it never changes after). A run of 300k logged steps is
    audited in seconds (``benchmarks/bench_audit_scale.py``).
    """

    def __init__(self) -> None:
        self._steps = array("d")
        self._columns: dict[str, array] = {}
        self._finite: dict[str, int] = {}
        self._baselines: dict[tuple[str, int], float] = {}

    def __len__(self) -> int:
        return len(self._steps)

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one step's record (``step`` and numeric log keys; other values are dropped, and NaN
        is read as missing)."""
        n = len(self._steps)
        columns, finite = self._columns, self._finite
        added = 0
        for key, value in record.items():
            kind = value.__class__
            if kind is not float and kind is not int and (isinstance(value, bool) or not isinstance(value, (int, float))):
                continue
            key = key if key.__class__ is str else str(key)
            column = columns.get(key)
            if column is None:
                column = columns[key] = array("d", [math.nan]) * n
                finite[key] = 0
            elif len(column) > n:  # the same key twice (str(k) of two keys): the first value stays
                continue
            value = float(value)
            column.append(value)
            added += 1
            if value == value:
                finite[key] += 1
        if added < len(columns):  # keys this record lacks: missing
            for column in columns.values():
                if len(column) == n:
                    column.append(math.nan)
        step = columns["step"][n] if "step" in columns else math.nan
        self._steps.append(step)

    @property
    def records(self) -> list[dict[str, float]]:
        """Every record as a dict of its non-NaN values (built on each call: for inspection)."""
        return [{k: c[i] for k, c in self._columns.items() if not math.isnan(c[i])} for i in range(len(self))]

    @property
    def step(self) -> int:
        """The step of the latest record (its index when it has no ``step``)."""
        return self.step_at(len(self._steps) - 1) if len(self._steps) else -1

    def step_at(self, index: int) -> int:
        """The step of record ``index``."""
        step = self._steps[index]
        return (index if index >= 0 else len(self._steps) + index) if math.isnan(step) else int(step)

    def has(self, key: str) -> bool:
        """Whether some record holds a (non-NaN) value for ``key``."""
        return self._finite.get(key, 0) > 0

    def column(self, key: str) -> np.ndarray:
        """Every record's value of ``key`` (NaN where absent)."""
        column = self._columns.get(key)
        if column is None:
            return np.full(len(self._steps), math.nan)
        return np.frombuffer(column, dtype=np.float64).copy()

    def recent(self, key: str, window: int) -> float:
        """Mean of ``key`` over the last ``window`` records (NaN when none holds it)."""
        column = self._columns.get(key)
        return math.nan if column is None else _mean(column[-window:])

    def baseline(self, key: str, window: int) -> float:
        """Mean of ``key`` over the first ``window`` records: where training started."""
        cached = self._baselines.get((key, window))
        if cached is not None:
            return cached
        column = self._columns.get(key)
        value = math.nan if column is None else _mean(column[:window])
        if len(self._steps) >= window and column is not None:
            self._baselines[(key, window)] = value  # the first `window` records never change
        return value


def _mean(values: Any) -> float:
    total, count = 0.0, 0
    for v in values:
        if v == v:  # not NaN
            total += v
            count += 1
    return total / count if count else math.nan
