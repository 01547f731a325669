"""Online estimate of each replica's current speed from the batches it finished (a time-weighted moving average).

A router measures how long each finished batch took and knows how long that batch takes on the
reference hardware (its profile), so every finished batch gives one speed sample
``nominal_s / actual_s``. :class:`SpeedEstimator` keeps an exponential moving average of those
samples per replica whose weight grows with the batch's duration (``1 - exp(-actual_s / tau_s)``), so
the estimate forgets at the same rate in simulated time whatever the batch sizes, and reaches
about 95% of a step change after ``3 * tau_s`` seconds of work. Until a replica has finished a batch
its estimate is its declared speed. NumPy only.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


class SpeedEstimator:
    """Per-replica moving average of observed speed samples; starts at the declared speeds."""

    def __init__(self, declared_speeds: Sequence[float], tau_s: float = 2.0) -> None:
        if not tau_s > 0:
            raise ValueError(f"tau_s must be positive, got {tau_s}")
        speeds = np.asarray(declared_speeds, dtype=np.float64)
        if speeds.ndim != 1 or not np.all(speeds > 0):
            raise ValueError(f"declared speeds must be a 1-D array of positive numbers, got {declared_speeds!r}")
        self.tau_s = float(tau_s)
        self.declared = speeds.copy()
        self.estimates = speeds.copy()
        self.samples = np.zeros(len(speeds), dtype=np.int64)

    def observe(self, replica: int, nominal_s: float, actual_s: float) -> float:
        """Fold in one finished batch of ``replica``; returns its new estimate."""
        if not (actual_s > 0 and nominal_s > 0 and math.isfinite(actual_s) and math.isfinite(nominal_s)):
            raise ValueError(f"batch durations must be positive and finite, got nominal {nominal_s}, actual {actual_s}")
        weight = 1.0 - math.exp(-actual_s / self.tau_s)
        self.estimates[replica] += weight * (nominal_s / actual_s - self.estimates[replica])
        self.samples[replica] += 1
        return float(self.estimates[replica])
