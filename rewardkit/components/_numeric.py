"""Helpers so components return finite values for every finite input, in any array library.

A product or difference of two large finite floats can overflow to ``inf``; the components clamp
such results to the largest finite float of their dtype instead, which keeps their order (so
monotonicity holds) and keeps ``inf`` out of rewards and of saved state. Every helper takes the
arrays of whichever library the inputs come from (``rewardkit.backend.array_namespace``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import array_namespace, quiet, saturate

__all__ = ["FLOAT_MAX", "FEW_COLUMNS", "saturate", "overflow_ok", "row_sum", "row_min_max"]

#: Largest finite float64; overflowing results of the scalar path saturate here.
FLOAT_MAX = float(np.finfo(np.float64).max)


#: silences NumPy's overflow/invalid warnings around arithmetic that is then saturated (free inside
#: a composer call, which silences them once)
overflow_ok = quiet


#: Up to this many columns, row reductions run as a loop over columns (libraries reduce short rows
#: slowly); the sums then add each row's values in order, as ``sum()`` does on the scalar path.
FEW_COLUMNS = 16


def row_sum(values: Any) -> Any:
    """Sum over the last axis of a 2-D array, adding each row's values left to right."""
    if values.shape[-1] > FEW_COLUMNS:
        return array_namespace(values).sum(values, axis=-1)
    total = values[:, 0]
    for j in range(1, values.shape[-1]):
        total = total + values[:, j]
    return total


def row_min_max(values: Any) -> tuple[Any, Any]:
    """Minimum and maximum over the last axis of a 2-D array."""
    xp = array_namespace(values)
    if values.shape[-1] > FEW_COLUMNS:
        return xp.min(values, axis=-1), xp.max(values, axis=-1)
    low = high = values[:, 0]
    for j in range(1, values.shape[-1]):
        column = values[:, j]
        low, high = xp.minimum(low, column), xp.maximum(high, column)
    return low, high
