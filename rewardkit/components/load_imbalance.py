"""``load_imbalance``: how unevenly load is spread over replicas, as one number per environment."""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import FLOAT_MAX, overflow_ok, saturate

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

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the scalar path (same summation order as NumPy)."""
        statistic, compute, sqrt, big = self.statistic, self.compute, math.sqrt, FLOAT_MAX
        no = np.zeros(1, dtype=bool)

        def one_env(replica_loads: list[float] | Array, terminated: bool, truncated: bool) -> float:
            loads = sorted(replica_loads.tolist() if isinstance(replica_loads, np.ndarray) else replica_loads)
            n = len(loads)
            if n > _PAIRWISE_BLOCK or n == 0 or (statistic in ("cv", "max_over_mean") and loads[0] < 0):
                return float(compute({"replica_loads": np.asarray(replica_loads, dtype=np.float64)[None]}, no, no)[0])
            low, high = loads[0], loads[-1]
            if low == high:
                return 0.0
            scale = max(abs(low), abs(high))
            scale = scale if scale > 0 else 1.0
            unit = [v / scale for v in loads]
            mean_u = _numpy_sum(unit) / n
            std_u = sqrt(_numpy_sum([(u - mean_u) ** 2 for u in unit]) / n)
            if statistic == "std":
                out = scale * std_u
            elif statistic == "var":
                out = scale * std_u * std_u * scale
            elif statistic == "range":
                out = high - low
            elif mean_u > 0:
                out = std_u / mean_u if statistic == "cv" else unit[-1] / mean_u - 1.0
            else:
                out = 0.0
            out = big if out > big else out
            return out if out > 0.0 else 0.0

        return one_env


_PAIRWISE_BLOCK = 128


def _numpy_sum(values: list[float]) -> float:
    """Sum in the order NumPy's pairwise summation uses for up to 128 values (bit-identical)."""
    n = len(values)
    if n < 8:
        total = 0.0
        for v in values:
            total += v
        return total
    r = values[:8]
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += values[i + j]
        i += 8
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for v in values[i:]:
        total += v
    return total
