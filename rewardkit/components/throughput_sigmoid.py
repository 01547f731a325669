"""``throughput_sigmoid``: a bounded reward for throughput around a target."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..base import Array, BaseReward
from ..params import Param
from ..registry import register


@register("throughput_sigmoid")
class ThroughputSigmoid(BaseReward):
    """1/(1+exp(-(throughput-target)/scale)): 0.5 at the target, in (0, 1), increasing in throughput."""

    inputs = {"throughput": 0}
    params = {
        "target": Param.number(doc="throughput at which the term is 0.5"),
        "scale": Param.positive(1.0, "width of the transition; smaller is steeper"),
    }
    output_range = (0.0, 1.0)
    monotone = {"throughput": "increasing"}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        z = (x["throughput"] - self.target) / self.scale
        # exp of a large positive argument overflows; the clipped form is exact to float64 precision.
        return 1.0 / (1.0 + np.exp(-np.clip(z, -700.0, 700.0)))

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        target, scale, exp = self.target, self.scale, math.exp

        def one_env(throughput: float, terminated: bool, truncated: bool) -> float:
            z = (throughput - target) / scale
            z = 700.0 if z > 700.0 else (-700.0 if z < -700.0 else z)
            return 1.0 / (1.0 + exp(-z))

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path."""
        env["_exp"] = math.exp
        z = f"_z{tag}"
        return (f"(1.0 / (1.0 + _exp(-(700.0 if ({z} := ({args[0]} - {self.target!r}) / {self.scale!r}) > 700.0 "
                f"else (-700.0 if {z} < -700.0 else {z})))))")
