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
