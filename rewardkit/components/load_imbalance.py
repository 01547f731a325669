"""``load_imbalance``: how unevenly load is spread over replicas, as one number per environment."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..backend import array_namespace, checking, clip, float_max, is_host, to_numpy
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register
from ._numeric import FEW_COLUMNS, overflow_ok, row_min_max, row_sum, saturate

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
    input_domains = {"replica_loads": (0.0, math.inf)}  # var, std and range accept any finite loads too

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        loads = x["replica_loads"]
        xp = array_namespace(loads)
        if loads.shape[-1] == 0:
            raise ValueError(f"{self.name} (load_imbalance): input 'replica_loads' needs at least one replica")
        if loads.__class__ is np.ndarray and loads.shape[-1] <= FEW_COLUMNS and loads.ndim == 2:
            return self._compute_columns(loads)
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

    def _compute_columns(self, loads: np.ndarray) -> np.ndarray:
        """:meth:`compute` on a NumPy batch of a few replicas, read as contiguous columns (one
        transposed copy): the same operations in the same order as the general path (so the same
        numbers), on contiguous memory and mostly in place."""
        n = loads.shape[-1]
        cols = np.ascontiguousarray(loads.T)  # cols[j]: replica j's load in every environment
        low, high = np.minimum.reduce(cols, axis=0), np.maximum.reduce(cols, axis=0)  # exact in any order
        least, most = float(np.minimum.reduce(low)), float(np.maximum.reduce(high))
        if least < 0 and self.statistic in ("cv", "max_over_mean"):
            raise ValueError(f"{self.name} (load_imbalance): statistic {self.statistic!r} needs non-negative "
                             f"'replica_loads', got {float(low[low < 0][0])!r}")
        with overflow_ok():
            if self.statistic == "range":
                return saturate(high - low)
            if max(-least, most) > _moderate(loads):  # loads whose squares could overflow: the general path
                huge = (high if self.statistic in ("cv", "max_over_mean") else np.maximum(-low, high)) > _moderate(loads)
                return np.where(huge, self._compute_rescaled(np, loads, low, high),
                                self._compute_direct(np, loads, low, high))
            positive_mean = least > 0
            if n == 1:
                mean = cols[0] / n
            else:  # left to right, as row_sum adds
                mean = cols[0] + cols[1]
                for j in range(2, n):
                    mean += cols[j]
                np.divide(mean, n, out=mean)
            positive = None if positive_mean or self.statistic in ("var", "std") else mean > 0
            if self.statistic == "max_over_mean":
                if positive_mean:
                    out = high / mean
                else:
                    out = np.where(positive, high / np.where(positive, mean, 1.0), 1.0)
                np.subtract(out, 1.0, out=out)
                np.maximum(out, 0.0, out=out)  # high >= mean, but rounding may leave a trace below
            else:
                dev = cols - mean
                np.multiply(dev, dev, out=dev)
                out = dev[0].copy()
                for j in range(1, n):
                    out += dev[j]
                np.divide(out, n, out=out)  # the variance: a sum of squares, never below 0
                if self.statistic in ("std", "cv"):
                    np.sqrt(out, out=out)
                if self.statistic == "cv":
                    if positive_mean:
                        np.divide(out, mean, out=out)
                    else:
                        out = np.where(positive, out / np.where(positive, mean, 1.0), 0.0)
            # Equal loads give exactly 0 (rounding in the mean could leave a trace); ``out`` is ours.
            np.copyto(out, 0.0, where=low == high)
            return out

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

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the scalar path (same order of additions)."""
        statistic, compute, sqrt = self.statistic, self.compute, math.sqrt
        no = np.zeros(1, dtype=bool)
        needs_non_negative = statistic in ("cv", "max_over_mean")
        moderate = _MODERATE

        def exact(loads: list[float]) -> float:
            return float(compute({"replica_loads": np.asarray(loads, dtype=np.float64)[None]}, no, no)[0])

        def one_env(replica_loads: list[float] | Array, terminated: bool, truncated: bool) -> float:
            loads = replica_loads if replica_loads.__class__ is list else np.asarray(replica_loads).tolist()
            n = len(loads)
            if n == 0 or n > FEW_COLUMNS:
                return exact(loads)
            ordered = sorted(loads)
            low, high = ordered[0], ordered[-1]
            if low == high:
                return 0.0 if not (needs_non_negative and low < 0) else exact(loads)  # exact() raises
            if low < -moderate or high > moderate or (needs_non_negative and low < 0):
                return exact(loads)
            if statistic == "range":
                return high - low
            mean = sum(loads) / n  # left to right, as row_sum adds on the batched path
            if statistic == "max_over_mean":
                out = high / mean - 1.0 if mean > 0 else 0.0
            else:
                var = 0.0
                for v in loads:
                    d = v - mean
                    var += d * d
                var /= n
                if statistic == "cv":
                    out = sqrt(var) / mean if mean > 0 else 0.0
                elif statistic == "std":
                    out = sqrt(var)
                else:
                    out = var
            return out if out > 0.0 else 0.0

        return one_env


    def scalar_block(self, args: list[str], env: dict[str, Any], tag: str) -> tuple[list[str], str] | None:
        """:meth:`scalar_fn` as inline statements specialised to the statistic (same operations)."""
        fn, loads, r = "_exact", args[0], f"{tag}_value"
        env[fn], env["_sorted"], env["_sqrt"] = self.scalar_fn(), sorted, math.sqrt
        o, n, m, v = f"{tag}_ordered", f"{tag}_n", f"{tag}_mean", f"{tag}_var"
        q, e = f"{tag}_load", f"{tag}_dev"
        if self.statistic in ("range", "max_over_mean"):
            return [], f"{fn}({loads}, False, False)"
        unsafe = f"{o}[0] < 0.0 or " if self.statistic == "cv" else f"{o}[0] < {-_MODERATE!r} or "
        result = {"var": v, "std": f"_sqrt({v})", "cv": f"(_sqrt({v}) / {m} if {m} > 0 else 0.0)"}[self.statistic]
        # The fast branch skips the sort: its conditions, read off the mean and variance, imply
        # what the sorted loads would have shown (some spread, no negative load for cv, no load
        # beyond _MODERATE), so it takes the direct branch below with the same operations.
        # Equal loads (variance within rounding of 0) and every other case take the careful one.
        tiny = f"1e-28 * {m} * {m} < {v}"
        if self.statistic == "cv":
            # a negative load would deviate from a positive mean by more than the mean itself
            fast = f"{m} > 0.0 and {tiny} and {v} * {n} < {m} * {m} and {loads}_sum <= {_MODERATE!r}"
        else:  # every |load| <= |mean| + sqrt(n * var) <= _MODERATE
            fast = f"{tiny} and {-_MODERATE / 2!r} <= {m} <= {_MODERATE / 2!r} and {v} * {n} <= {(_MODERATE / 2) ** 2!r}"
        direct = [
            f"{m} = {loads}_sum / {n}",  # the composer's sum(loads), left to right
            f"{v} = 0.0",
            f"for {q} in {loads}:",
            f"    {e} = {q} - {m}",
            f"    {v} += {e} * {e}",
            f"{v} /= {n}",
        ]
        return [
            f"{n} = len({loads})",
            f"if {n} == 0 or {n} > {FEW_COLUMNS}: {r} = {fn}({loads}, False, False)",
            "else:",
            *("    " + line for line in direct),
            f"    if {fast}: {r} = {result}",
            "    else:",
            f"        {o} = _sorted({loads})",
            f"        if {o}[0] == {o}[-1] and {o}[0] >= 0.0: {r} = 0.0",
            f"        elif {unsafe}{o}[0] == {o}[-1] or {o}[-1] > {_MODERATE!r}: {r} = {fn}({loads}, False, False)",
            "        else:",
            f"            {r} = {result}",
            f"            {r} = {r} if {r} > 0.0 else 0.0",
        ], r


#: loads up to this magnitude are reduced directly; beyond it they are rescaled first (float64;
#: float32 squares overflow far sooner, see :func:`_moderate`).
_MODERATE = 1e150
_MODERATE_32 = 1e15


def _moderate(loads: Array) -> float:
    """The load magnitude up to which squares cannot overflow in ``loads``' dtype."""
    return _MODERATE if float_max(loads) > 1e300 else _MODERATE_32
