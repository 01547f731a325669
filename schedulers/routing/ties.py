"""``argmin_random``: the one tie-breaking rule every heuristic uses (uniform among the smallest)."""

from __future__ import annotations

import numpy as np


def argmin_random(values: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the smallest value; ties broken uniformly at random.

    In plain Python over the values as a list: a router decides on a handful of replicas, where one
    NumPy call costs more than the whole comparison (and far more when the decision runs on a cold
    CPU, between requests). NaN is refused: it has no place in a load measure.
    """
    listed = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if any(v != v for v in listed):
        raise ValueError(f"argmin_random: expected numbers, got NaN among {listed}")
    low = min(listed)
    ties = [i for i, v in enumerate(listed) if v == low]
    if len(ties) == 1:
        return ties[0]
    return ties[int(rng.integers(len(ties)))]
