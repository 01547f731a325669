"""``threshold_penalty``: a hinge on latency, zero below the threshold and linear above it."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..backend import clip, float_max
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import FLOAT_MAX, overflow_ok, saturate


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
            if self.threshold >= 0 and self.slope <= 1.0 and latency.__class__ is np.ndarray:
                # as below, on one array written in place (slope * e and e * slope are the same number)
                excess = np.subtract(latency, self.threshold)
                np.maximum(excess, 0.0, out=excess)
                return excess if self.slope == 1.0 else np.multiply(excess, self.slope, out=excess)
            if self.threshold >= 0 and self.slope <= 1.0:
                # the excess of a finite latency over a non-negative threshold cannot overflow, nor
                # can its product with a slope up to 1 (the same rule as scalar_source)
                excess = clip(latency - self.threshold, 0.0, None)
                return excess if self.slope == 1.0 else self.slope * excess
            # clip first so that slope == 0 gives 0, not 0 * inf, beyond the dtype's range
            excess = clip(latency - self.threshold, 0.0, float_max(latency))
            return saturate(self.slope * excess)

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        threshold, slope = self.threshold, self.slope

        def one_env(latency: float, terminated: bool, truncated: bool) -> float:
            excess = latency - threshold
            excess = 0.0 if excess < 0.0 else (FLOAT_MAX if excess > FLOAT_MAX else excess)
            out = slope * excess
            return FLOAT_MAX if out > FLOAT_MAX else out

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path.

        Clamps that cannot trigger are left out: with ``threshold >= 0`` the excess of a finite
        latency cannot overflow, and with ``slope <= 1`` neither can the product.
        """
        env["_FLOAT_MAX"] = FLOAT_MAX
        e, o = f"{tag}_excess", f"{tag}_out"
        if self.threshold >= 0:
            excess = f"(0.0 if ({e} := {args[0]} - {self.threshold!r}) < 0.0 else {e})"
        else:
            excess = f"(0.0 if ({e} := {args[0]} - {self.threshold!r}) < 0.0 else (_FLOAT_MAX if {e} > _FLOAT_MAX else {e}))"
        if self.slope <= 1.0:
            return f"({self.slope!r} * {excess})"
        return f"(_FLOAT_MAX if ({o} := {self.slope!r} * {excess}) > _FLOAT_MAX else {o})"
