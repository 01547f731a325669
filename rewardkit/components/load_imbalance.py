"""``load_imbalance``: how unevenly load is spread over replicas, as one number per environment."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..backend import array_namespace, checking, clip, float_max, is_host, to_numpy
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, row_min_max, row_sum, saturate

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

    This module is the definition; the composer runs faster paths that give the same numbers
    (``components/_fast/load_imbalance.py``: a few replicas read as columns, plain floats for one
    environment, inlined code), attached when the package is imported and checked against it.
    """

    inputs = {"replica_loads": 1}
    params = {
        "statistic": Param.choice(STATISTICS, "std", "dispersion measure: " + ", ".join(STATISTICS)),
    }
    output_range = (0.0, math.inf)
    monotone: dict[str, str] = {}
    input_domains = {"replica_loads": (0.0, math.inf)}  # var, std and range accept any finite loads too

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        loads = x["replica_loads"]
        xp = array_namespace(loads)
        if loads.shape[-1] == 0:
            raise ValueError(f"{self.name} (load_imbalance): input 'replica_loads' needs at least one replica")
        low, high = row_min_max(loads)
        ratio = self.statistic in ("cv", "max_over_mean")
        host = is_host(loads)
        if host:  # two reductions read on the host settle both questions below
            least, most = float(low.min()), float(high.max())
        # an input check: reads one boolean back from a device (skipped with check_inputs=False)
        if ratio and (least < 0 if host else checking() and bool(xp.any(low < 0))):
            values = to_numpy(low)
            raise ValueError(
                f"{self.name} (load_imbalance): statistic {self.statistic!r} needs non-negative "
                f"'replica_loads', got {float(values[values < 0][0])!r}"
            )
        with overflow_ok():
            if self.statistic == "range":
                return saturate(high - low)
            # Rows with loads beyond _moderate are computed on rescaled loads (squares would overflow);
            # the choice is per row, so a row's value never depends on the other environments. On
            # a device both are computed and where() picks, with no synchronisation.
            moderate = _moderate(loads)
            if host and max(-least, most) <= moderate:
                return self._compute_direct(xp, loads, low, high, positive_mean=least > 0)
            huge = (high if ratio else xp.maximum(-low, high)) > moderate
            return xp.where(huge, self._compute_rescaled(xp, loads, low, high),
                            self._compute_direct(xp, loads, low, high))

    def _compute_direct(self, xp: Any, loads: Array, low: Array, high: Array, positive_mean: bool = False) -> Array:
        """The statistics on loads of moderate magnitude (no overflow possible); ``positive_mean``:
        every load is known positive, so no mean needs guarding."""
        n = loads.shape[-1]
        mean = row_sum(loads) / n
        positive = None if positive_mean else mean > 0
        if self.statistic == "max_over_mean":
            ratio = high / mean if positive_mean else xp.where(positive, high / xp.where(positive, mean, 1.0), 1.0)
            out = clip(ratio - 1.0, 0.0, None)  # high >= mean, but rounding may leave a trace below
        else:
            dev = loads - mean[:, None]
            var = row_sum(dev * dev) / n  # a sum of squares: never below 0
            if self.statistic == "var":
                out = var
            elif self.statistic == "std":
                out = xp.sqrt(var)
            elif positive_mean:
                out = xp.sqrt(var) / mean
            else:
                out = xp.where(positive, xp.sqrt(var) / xp.where(positive, mean, 1.0), 0.0)
        # Equal loads give exactly 0 (rounding in the mean could leave a trace).
        return xp.where(low == high, 0.0, out)

    def _compute_rescaled(self, xp: Any, loads: Array, low: Array, high: Array) -> Array:
        """The same statistics on loads divided by their largest magnitude (no overflow)."""
        scale = xp.maximum(xp.abs(low), xp.abs(high))
        scale = xp.where(scale > 0, scale, 1.0)
        # Both scaled by a power of two first (exact): XLA divides through the reciprocal, and
        # 1/scale of a load near the largest float would be subnormal, which it flushes to zero.
        pre = 2.0 ** -512 if float_max(loads) > 1e300 else 2.0 ** -64
        unit = (loads * pre) / (scale * pre)[:, None]
        mean_u = xp.mean(unit, axis=-1)
        std_u = xp.sqrt(xp.mean((unit - mean_u[:, None]) ** 2, axis=-1))
        if self.statistic == "std":
            out = saturate(scale * std_u)
        elif self.statistic == "var":
            out = saturate(scale * std_u * std_u * scale)
        else:
            safe_mean = xp.where(mean_u > 0, mean_u, 1.0)
            ratio = std_u / safe_mean if self.statistic == "cv" else high / scale / safe_mean - 1.0
            out = xp.where(mean_u > 0, ratio, 0.0)
        return xp.where(low == high, 0.0, clip(out, 0.0, None))


#: loads up to this magnitude are reduced directly; beyond it they are rescaled first (float64;
#: float32 squares overflow far sooner, see :func:`_moderate`).
_MODERATE = 1e150
_MODERATE_32 = 1e15


def _moderate(loads: Array) -> float:
    """The load magnitude up to which squares cannot overflow in ``loads``' dtype."""
    return _MODERATE if float_max(loads) > 1e300 else _MODERATE_32
