"""``load_imbalance``: how unevenly load is spread over replicas, as one number per environment."""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import FEW_COLUMNS, FLOAT_MAX, overflow_ok, row_min_max, row_sum, saturate

STATISTICS = ("var", "std", "cv", "range", "max_over_mean")


@register("load_imbalance")
class LoadImbalance(BaseReward):
    """statistic of replica_loads (var, std, cv, range or max/mean-1): 0 when loads are equal, in [0, inf).

    ``var`` and ``std`` are population statistics, ``cv = std/mean``, ``range = max - min`` and
    ``max_over_mean = max/mean - 1``. The two ratios need non-negative loads (``ValueError``
    otherwise) and are 0 when the mean is 0 (all loads 0). The value does not depend on the order
    of replicas (to floating-point rounding of the sums: a permutation may move the last bit),
    and it is exactly 0 whenever all loads are equal (``var`` also underflows to 0 for loads below
    about 1e-154). Loads beyond 1e150 in magnitude are rescaled first so squares cannot overflow.
    Give it a negative weight.
    """

    inputs = {"replica_loads": 1}
    params = {
        "statistic": Param.choice(STATISTICS, "std", "dispersion measure: " + ", ".join(STATISTICS)),
    }
    output_range = (0.0, math.inf)
    monotone: dict[str, str] = {}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        loads = x["replica_loads"]
        if loads.shape[-1] == 0:
            raise ValueError(f"{self.name} (load_imbalance): input 'replica_loads' needs at least one replica")
        low, high = row_min_max(loads)
        if self.statistic in ("cv", "max_over_mean") and np.any(low < 0):
            raise ValueError(
                f"{self.name} (load_imbalance): statistic {self.statistic!r} needs non-negative "
                f"'replica_loads', got {float(low[low < 0][0])!r}"
            )
        if self.statistic == "range":
            with overflow_ok():
                return saturate(high - low)
        # Rows with loads beyond _MODERATE are computed on rescaled loads (squares would overflow);
        # the choice is per row, so a row's value never depends on the other environments.
        huge = np.maximum(-low, high) > _MODERATE
        if huge.any():
            out = np.empty(len(loads))
            ok = ~huge
            out[ok] = self._compute_direct(loads[ok], low[ok], high[ok])
            out[huge] = self._compute_rescaled(loads[huge], low[huge], high[huge])
            return out
        return self._compute_direct(loads, low, high)

    def _compute_direct(self, loads: Array, low: Array, high: Array) -> Array:
        """The statistics on loads of moderate magnitude (no overflow possible)."""
        n = loads.shape[-1]
        mean = row_sum(loads) / n
        if self.statistic == "max_over_mean":
            out = np.where(mean > 0, high / np.where(mean > 0, mean, 1.0) - 1.0, 0.0)
        else:
            dev = loads - mean[:, None]
            var = row_sum(dev * dev) / n
            if self.statistic == "var":
                out = var
            elif self.statistic == "std":
                out = np.sqrt(var)
            else:
                out = np.where(mean > 0, np.sqrt(var) / np.where(mean > 0, mean, 1.0), 0.0)
        # Equal loads give exactly 0 (rounding in the mean could leave a trace); never below 0.
        return np.where(low == high, 0.0, np.maximum(out, 0.0))

    def _compute_rescaled(self, loads: Array, low: Array, high: Array) -> Array:
        """The same statistics on loads divided by their largest magnitude (no overflow)."""
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
            else:
                safe_mean = np.where(mean_u > 0, mean_u, 1.0)
                ratio = std_u / safe_mean if self.statistic == "cv" else high / scale / safe_mean - 1.0
                out = np.where(mean_u > 0, ratio, 0.0)
        return np.where(low == high, 0.0, np.maximum(out, 0.0))

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the scalar path (same order of additions)."""
        statistic, compute, sqrt, big = self.statistic, self.compute, math.sqrt, FLOAT_MAX
        no = np.zeros(1, dtype=bool)

        def one_env(replica_loads: list[float] | Array, terminated: bool, truncated: bool) -> float:
            loads = replica_loads.tolist() if isinstance(replica_loads, np.ndarray) else replica_loads
            n = len(loads)
            if n == 0 or n > FEW_COLUMNS:
                return float(compute({"replica_loads": np.asarray(loads, dtype=np.float64)[None]}, no, no)[0])
            low, high = min(loads), max(loads)
            if statistic in ("cv", "max_over_mean") and low < 0:
                compute({"replica_loads": np.asarray(loads, dtype=np.float64)[None]}, no, no)  # raises
            if low == high:
                return 0.0
            if statistic == "range":
                out = high - low
                return big if out > big else out
            if -low > _MODERATE or high > _MODERATE:
                return float(compute({"replica_loads": np.asarray(loads, dtype=np.float64)[None]}, no, no)[0])
            mean = sum(loads) / n  # left to right, as row_sum adds on the batched path
            if statistic == "max_over_mean":
                out = high / mean - 1.0 if mean > 0 else 0.0
            else:
                var = sum([(v - mean) * (v - mean) for v in loads]) / n
                if statistic == "var":
                    out = var
                elif statistic == "std":
                    out = sqrt(var)
                else:
                    out = sqrt(var) / mean if mean > 0 else 0.0
            return out if out > 0.0 else 0.0

        return one_env


#: loads up to this magnitude are reduced directly; beyond it they are rescaled first.
_MODERATE = 1e150
