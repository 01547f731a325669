"""What an objective may return: one finite number per direction of the study.

A number is a Python ``int``/``float``, a ``Decimal``, a NumPy scalar or 0-d array, or any
scalar with ``.item()`` or ``__float__`` (a torch scalar tensor: duck-typed, torch is never
imported here). Strings, bytes and booleans are not numbers, even when ``float()`` would take
them (``"5"``, ``b"5"``, ``True``): a wrong return type is a bug to report, not a value to guess.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np

_NOT_NUMBERS = (str, bytes, bytearray, bool, np.bool_)


def as_number(value: Any) -> float | None:
    """``value`` as a float when it is a real scalar number (see the module docstring), else None."""
    if isinstance(value, _NOT_NUMBERS) or value is None:
        return None
    if isinstance(value, (int, float, Decimal, np.integer, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "iuf":
            return None
        return float(value)
    if getattr(value, "ndim", 0) != 0:  # an array with axes (torch, JAX, ...) is not a scalar
        return None
    item = getattr(value, "item", None)
    if callable(item):  # a torch scalar tensor and the like
        try:
            inner = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return None if inner is value else as_number(inner)
    if hasattr(type(value), "__float__") and not isinstance(value, complex):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def check_values(result: Any, n_directions: int) -> float | list[float]:
    """The objective's result as one float per direction; non-numbers and non-finite values raise."""
    single = as_number(result)
    if single is not None:
        values = [single]
    elif isinstance(result, (list, tuple)) or (isinstance(result, np.ndarray) and result.ndim == 1):
        values = []
        for i, v in enumerate(result):
            number = as_number(v)
            if number is None:
                raise ValueError(f"the objective must return a number or one per direction; value {i} is "
                                 f"{_show(v)}")
            values.append(number)
    else:
        raise ValueError(f"the objective must return a number or one per direction (int, float, Decimal, "
                         f"NumPy or torch scalar), got {_show(result)}")
    if len(values) != n_directions:
        raise ValueError(f"the objective returned {len(values)} value(s) for {n_directions} direction(s)")
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"the objective returned a non-finite value: {values}")
    return values[0] if n_directions == 1 else values


def _show(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"
