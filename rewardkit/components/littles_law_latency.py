"""``littles_law_latency``: time requests spent in the system during the last step.

This module is the definition; faster paths that give the same numbers (plain floats, inlined
code) live in ``components/_fast/littles_law_latency.py``.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..backend import array_namespace, checking, to_numpy
from ..base import Array, BaseReward
from ..registry import register
from ._numeric import overflow_ok, saturate


@register("littles_law_latency")
class LittlesLawLatency(BaseReward):
    """in_system*dt: request-seconds spent in the system this step, in [0, inf), increasing in both.

    By Little's law the sum over an episode equals the total sojourn time of all requests, so
    penalising it (negative weight) minimises mean latency. The sum is exact when ``in_system`` is
    the (time-averaged) number of requests in the system over the ``dt`` seconds of the step.
    Negative inputs raise ``ValueError``; products beyond the float64 range saturate.
    """

    inputs = {"in_system": 0, "dt": 0}
    params = {}
    output_range = (0.0, math.inf)
    monotone = {"in_system": "increasing", "dt": "increasing"}
    input_domains = {"in_system": (0.0, math.inf), "dt": (0.0, math.inf)}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        for local in ("in_system", "dt"):
            values = x[local]
            # an input check: reads one boolean back from a device (skipped with check_inputs=False)
            if (isinstance(values, np.ndarray) or checking()) and bool(array_namespace(values).any(values < 0)):
                host = to_numpy(values)
                raise ValueError(
                    f"{self.name} (littles_law_latency): input {local!r} (context key "
                    f"{self.input_keys[local]!r}) must be non-negative, got {float(host[host < 0][0])!r}"
                )
        with overflow_ok():
            return saturate(x["in_system"] * x["dt"])
