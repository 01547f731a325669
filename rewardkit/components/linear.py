"""``linear``: a scaled, optionally clipped copy of one signal.

This module is the definition; faster paths that give the same numbers (plain floats, inlined
code) live in ``components/_fast/linear.py``.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..backend import clip
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, saturate


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
