"""``linear``: a scaled, optionally clipped copy of one signal."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from ..backend import clip
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import FLOAT_MAX, overflow_ok, saturate


@register("linear")
class Linear(BaseReward):
    """scale*value clipped to [low, high]: range the clip bounds, increasing in value if scale >= 0 else decreasing.

    The class-level ``monotone`` and ``output_range`` describe the default (``scale = 1``, no
    clip); each instance replaces them with its own direction (from the sign of ``scale``) and
    range (the ``clip`` bounds). Products beyond the float64 range saturate at +-largest float.
    """

    inputs = {"value": 0}
    params = {
        "scale": Param.number(1.0, "factor applied to the value"),
        "clip": Param.bounds(None, "optional [low, high] the result is clipped to; null ends are open"),
    }
    output_range = (-math.inf, math.inf)
    monotone = {"value": "increasing"}

    def _validate(self) -> None:
        # Direction and range depend on the parameters, so the instance refines the class values.
        self.monotone = {"value": "increasing" if self.scale >= 0 else "decreasing"}
        self.output_range = self.clip if self.clip is not None else (-math.inf, math.inf)

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        with overflow_ok():
            out = saturate(self.scale * x["value"])
        if self.clip is not None:
            out = clip(out, self.clip[0], self.clip[1])
        return out

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        scale = self.scale
        low, high = self.clip if self.clip is not None else (-FLOAT_MAX, FLOAT_MAX)
        low, high = max(low, -FLOAT_MAX), min(high, FLOAT_MAX)

        def one_env(value: float, terminated: bool, truncated: bool) -> float:
            out = scale * value
            return low if out < low else (high if out > high else out)

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path."""
        low, high = self.clip if self.clip is not None else (-FLOAT_MAX, FLOAT_MAX)
        low, high = max(low, -FLOAT_MAX), min(high, FLOAT_MAX)
        o = f"{tag}_out"
        return f"({low!r} if ({o} := {self.scale!r} * {args[0]}) < {low!r} else ({high!r} if {o} > {high!r} else {o}))"
