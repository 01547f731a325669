"""What an objective may return: one finite number per direction of the study."""

from __future__ import annotations

import math
from typing import Any


def check_values(result: Any, n_directions: int) -> float | list[float]:
    """The objective's result as one float per direction; non-finite values raise."""
    values = [result] if isinstance(result, (int, float)) and not isinstance(result, bool) else result
    try:
        values = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"the objective must return a number or one per direction, got {result!r}") from None
    if len(values) != n_directions:
        raise ValueError(f"the objective returned {len(values)} value(s) for {n_directions} direction(s)")
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"the objective returned a non-finite value: {values}")
    return values[0] if n_directions == 1 else values
