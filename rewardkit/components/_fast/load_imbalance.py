"""``load_imbalance``'s fast paths: the same numbers as its definition
(:mod:`rewardkit.components.load_imbalance`), computed faster.

- :func:`compute_fast`: a NumPy batch of a few replicas read as contiguous columns (one transposed
  copy, mostly in place), else the definition itself;
- :func:`scalar_fn`: plain floats for one environment (the composer's scalar path);
- :func:`scalar_block`: that function inlined into the composer's compiled code, specialised to the
  statistic.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ...base import Array
from .._numeric import FEW_COLUMNS, overflow_ok, saturate
from ..load_imbalance import _MODERATE, LoadImbalance, _moderate


def compute_fast(self: LoadImbalance, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
    """The definition's ``compute``, with a NumPy batch of a few replicas read as columns."""
    loads = x["replica_loads"]
    if loads.__class__ is np.ndarray and loads.shape[-1] <= FEW_COLUMNS and loads.ndim == 2 and loads.shape[-1]:
        return _columns(self, loads)
    return self.compute(x, terminated, truncated)


def _columns(self: LoadImbalance, loads: np.ndarray) -> np.ndarray:
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


def scalar_fn(self: LoadImbalance) -> Callable[..., float]:
    """Plain-float version of the definition for the scalar path (same order of additions)."""
    statistic, compute, sqrt = self.statistic, self.compute, math.sqrt  # compute: the definition
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


def scalar_block(self: LoadImbalance, args: list[str], env: dict[str, Any], tag: str) -> tuple[list[str], str] | None:
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


def attach(cls: type[LoadImbalance]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.compute_fast = compute_fast  # type: ignore[attr-defined]
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_block = scalar_block  # type: ignore[method-assign]
