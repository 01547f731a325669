"""``load_imbalance``: how unevenly load is spread over replicas, as one number per environment."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, saturate

STATISTICS = ("var", "std", "cv", "range", "max_over_mean")


@register("load_imbalance")
class LoadImbalance(BaseReward):
    """statistic of replica_loads (var, std, cv, range or max/mean-1): 0 when loads are equal, in [0, inf).

    ``var`` and ``std`` are population statistics, ``cv = std/mean``, ``range = max - min`` and
    ``max_over_mean = max/mean - 1``. The two ratios need non-negative loads (``ValueError``
    otherwise) and are 0 when the mean is 0 (all loads 0). The value is invariant to the order of
    replicas: loads are sorted before reducing, so it is bit-identical under any permutation.
    It is exactly 0 whenever all loads are equal (``var`` also underflows to 0 for loads below
    about 1e-154). Give it a negative weight.
    """

    inputs = {"replica_loads": 1}
    params = {
        "statistic": Param.choice(STATISTICS, "std", "dispersion measure: " + ", ".join(STATISTICS)),
    }
    output_range = (0.0, math.inf)
    monotone: dict[str, str] = {}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        loads = np.sort(x["replica_loads"], axis=-1)
        if loads.shape[-1] == 0:
            raise ValueError(f"{self.name} (load_imbalance): input 'replica_loads' needs at least one replica")
        low, high = loads[:, 0], loads[:, -1]
        if self.statistic in ("cv", "max_over_mean") and np.any(low < 0):
            raise ValueError(
                f"{self.name} (load_imbalance): statistic {self.statistic!r} needs non-negative "
                f"'replica_loads', got {float(low[low < 0][0])!r}"
            )
        # Work on loads divided by the largest magnitude, so squares cannot overflow and ratios do
        # not depend on the scale. Equal loads become exactly +-1 (or 0), so every statistic is
        # exactly 0 for them; and the largest scaled load is exactly 1 >= its computed mean.
        scale = np.maximum(np.abs(low), np.abs(high))
        scale = np.where(scale > 0, scale, 1.0)
        unit = loads / scale[:, None]
        mean_u = unit.mean(axis=-1)
        std_u = np.sqrt(np.mean((unit - mean_u[:, None]) ** 2, axis=-1))
        with overflow_ok():
            if self.statistic == "std":
                out = saturate(scale * std_u)
            elif self.statistic == "var":
                out = saturate(scale * std_u * std_u * scale)
            elif self.statistic == "range":
                out = saturate(high - low)
            else:
                safe_mean = np.where(mean_u > 0, mean_u, 1.0)
                if self.statistic == "cv":
                    ratio = std_u / safe_mean
                else:
                    ratio = unit[:, -1] / safe_mean - 1.0
                out = np.where(mean_u > 0, ratio, 0.0)
        return out
