"""``logistic_latency``: a bounded latency term that switches on around a threshold."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok


@register("logistic_latency")
class LogisticLatency(BaseReward):
    """1/(1+exp(-(latency-threshold)/sigma)): 0.5 at the threshold, in (0, 1), increasing in latency.

    The raw term is a smooth "latency is too high" indicator; give it a negative weight to
    penalise it. Any finite latency gives a finite value: the logit is clipped to +-700, which
    changes the result by less than float64 resolution.
    """

    inputs = {"latency": 0}
    params = {
        "threshold": Param.number(doc="latency (s) at which the term is 0.5"),
        "sigma": Param.positive(1.0, "width of the transition (s); smaller is steeper"),
    }
    output_range = (0.0, 1.0)
    monotone = {"latency": "increasing"}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        with overflow_ok():  # a huge (latency - threshold) / sigma becomes +-inf, clipped below
            z = (x["latency"] - self.threshold) / self.sigma
        return 1.0 / (1.0 + np.exp(-np.clip(z, -700.0, 700.0)))

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        threshold, sigma, exp = self.threshold, self.sigma, math.exp

        def one_env(latency: float, terminated: bool, truncated: bool) -> float:
            z = (latency - threshold) / sigma
            z = 700.0 if z > 700.0 else (-700.0 if z < -700.0 else z)
            return 1.0 / (1.0 + exp(-z))

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path."""
        env["_exp"] = math.exp
        z = f"_z{tag}"
        return (f"(1.0 / (1.0 + _exp(-(700.0 if ({z} := ({args[0]} - {self.threshold!r}) / {self.sigma!r}) > 700.0 "
                f"else (-700.0 if {z} < -700.0 else {z})))))")
