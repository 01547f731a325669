"""``argmin_random``: the one tie-breaking rule every heuristic uses (uniform among the smallest)."""

from __future__ import annotations

import numpy as np


def argmin_random(values: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the smallest value; ties broken uniformly at random."""
    values = np.asarray(values)
    ties = np.flatnonzero(values == values.min())
    if len(ties) == 1:
        return int(ties[0])
    return int(ties[rng.integers(len(ties))])
