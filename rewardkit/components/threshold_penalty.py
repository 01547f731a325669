"""``threshold_penalty``: a hinge on latency, zero below the threshold and linear above it.

This module is the definition; faster paths that give the same numbers (one NumPy array written
in place, plain floats, inlined code) live in ``components/_fast/threshold_penalty.py``.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..backend import clip, float_max
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, saturate


@register("threshold_penalty")
class ThresholdPenalty(BaseReward):
    """slope*max(0, latency-threshold): 0 up to the threshold, in [0, inf), non-decreasing in latency.

    An unbounded hinge: nothing below the threshold, a cost growing linearly above it. Give it a
    negative weight. Results beyond the float64 range saturate at the largest finite float.
    """

    inputs = {"latency": 0}
    params = {
        "threshold": Param.number(doc="latency (s) above which the term grows"),
        "slope": Param.non_negative(1.0, "growth of the term per second above the threshold"),
    }
    output_range = (0.0, math.inf)
    monotone = {"latency": "increasing"}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        latency = x["latency"]
        with overflow_ok():
            if self.threshold >= 0 and self.slope <= 1.0:
                # the excess of a finite latency over a non-negative threshold cannot overflow, nor
                # can its product with a slope up to 1: nothing to saturate
                excess = clip(latency - self.threshold, 0.0, None)
                return excess if self.slope == 1.0 else self.slope * excess
            # clip first so that slope == 0 gives 0, not 0 * inf, beyond the dtype's range
            excess = clip(latency - self.threshold, 0.0, float_max(latency))
            return saturate(self.slope * excess)
