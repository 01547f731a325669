"""Float64 helpers so components return finite values for every finite input.

A product or difference of two large finite floats can overflow to ``inf``; the components clamp
such results to the largest finite float instead, which keeps their order (so monotonicity holds)
and keeps ``inf`` out of rewards and of saved state.
"""

from __future__ import annotations

import numpy as np

from ..base import Array

#: Largest finite float64; overflowing results saturate here.
FLOAT_MAX = float(np.finfo(np.float64).max)


def saturate(values: Array) -> Array:
    """Clamp to ``[-FLOAT_MAX, FLOAT_MAX]`` (maps ``±inf`` to the largest finite float of that sign)."""
    return np.clip(values, -FLOAT_MAX, FLOAT_MAX)


def overflow_ok() -> np.errstate:
    """Context that silences overflow warnings for arithmetic whose result is then saturated."""
    return np.errstate(over="ignore")


#: Up to this many columns, row reductions run as a loop over columns (NumPy reduces short rows
#: slowly); the sums then add each row's values in order, as ``sum()`` does on the scalar path.
FEW_COLUMNS = 16


def row_sum(values: Array) -> Array:
    """Sum over the last axis of a 2-D array, adding each row's values left to right."""
    if values.shape[-1] > FEW_COLUMNS:
        return values.sum(axis=-1)
    total = values[:, 0].copy()
    for j in range(1, values.shape[-1]):
        total += values[:, j]
    return total


def row_min_max(values: Array) -> tuple[Array, Array]:
    """Minimum and maximum over the last axis of a 2-D array."""
    if values.shape[-1] > FEW_COLUMNS:
        return values.min(axis=-1), values.max(axis=-1)
    low, high = values[:, 0].copy(), values[:, 0].copy()
    for j in range(1, values.shape[-1]):
        np.minimum(low, values[:, j], out=low)
        np.maximum(high, values[:, j], out=high)
    return low, high
