"""``ema_delta``'s fast paths: the same numbers as its definition (:mod:`rewardkit.components.ema_delta`),
computed faster.

- :func:`compute_fast`: NumPy arrays once every environment has started: the definition's
  operations written in place, with one finiteness test; else the definition itself;
- :func:`scalar_fn`: plain floats for one environment, on the state's scalar slots (the
  composer's scalar path);
- :func:`scalar_block`: that function as inline statements in the composer's code.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ...backend import all_finite
from ...base import Array
from .._numeric import FLOAT_MAX, overflow_ok
from ..ema_delta import EmaDelta


def compute_fast(self: EmaDelta, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
    """The definition's ``compute``, in place on NumPy arrays once every environment has started."""
    value = x["signal"]
    state = self._state
    s = state.ensure(value.shape[0], like=value)  # as compute does first (it may clear started_everywhere)
    if state.started_everywhere and value.__class__ is np.ndarray:
        return _started(self, value, s)
    return self.compute(x, terminated, truncated)


def _started(self: EmaDelta, value: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    """``compute`` on NumPy arrays once every environment has started: the same operations,
    written in place, with one finiteness test."""
    a, eps = self.ema_alpha, self.eps
    mean, var = s["mean"], s["var"]
    with overflow_ok():
        std = np.sqrt(var)
        scored = std > eps
        d = value - mean
        delta = d / (std + eps)
        if not np.logical_and.reduce(scored, axis=None):  # some are not scored: 0 there
            delta = np.where(scored, delta, 0.0)
        new_mean = (1.0 - a) * mean
        new_mean += a * value
        new_var = d * d
        np.multiply(new_var, a, out=new_var)
        new_var += (1.0 - a) * var
        # An overflowing delta means |d| > 2 * eps * largest float: with eps at least
        # 1/sqrt(largest float) its square, and so new_var, overflowed too. One sum settles
        # the rest (a sum of finite values that overflows only sends the call to the
        # saturating steps, which give the same numbers).
        if eps >= _least_eps(value.dtype):
            exact = math.isfinite(np.add.reduce(new_mean + new_var, axis=None))
        else:
            exact = all_finite(delta, new_mean, new_var)
        if not exact:
            delta, new_mean, new_var = self._saturated(np, value, mean, var, std, scored)
    dict.update(s, mean=new_mean, var=new_var)  # NumPy arrays: nothing to detach
    return delta


_LEAST_EPS: dict[Any, float] = {}


def _least_eps(dtype: Any) -> float:
    """The smallest ``eps`` for which an overflowing delta implies an overflowing variance (1/sqrt
    of the dtype's largest float), per NumPy dtype."""
    least = _LEAST_EPS.get(dtype)
    if least is None:
        least = _LEAST_EPS[dtype] = 1.0 / math.sqrt(float(np.finfo(dtype).max))
    return least


def scalar_fn(self: EmaDelta) -> Callable[..., float]:
    """Plain-float version of the definition (same order of operations) for the scalar path."""
    state, a, eps, sqrt = self._state, self.ema_alpha, self.eps, math.sqrt
    big = FLOAT_MAX

    def one_env(value: float, terminated: bool, truncated: bool) -> float:
        s = state.scalar_slots()  # [mean, var, started]
        if s[2] == 0.0:
            s[0], s[1], s[2] = float(value), 0.0, 1.0
            return 0.0
        d = value - s[0]
        d = big if d > big else (-big if d < -big else d)
        std = sqrt(s[1])
        if std > eps:
            delta = d / (std + eps)
            delta = big if delta > big else (-big if delta < -big else delta)
        else:
            delta = 0.0
        mean = (1.0 - a) * s[0] + a * value
        var = (1.0 - a) * s[1] + a * (d * d)
        s[0] = big if mean > big else (-big if mean < -big else mean)
        s[1] = big if var > big else var
        return delta

    return one_env


def scalar_block(self: EmaDelta, args: list[str], env: dict[str, Any], tag: str) -> tuple[list[str], str] | None:
    """:func:`scalar_fn` as inline statements (same operations) for the compiled scalar path."""
    st, s, d, r = "_state", f"{tag}_slots", f"{tag}_d", f"{tag}_delta"
    std, m, v = f"{tag}_std", f"{tag}_mean", f"{tag}_var"
    env[st], env["_FLOAT_MAX"], env["_sqrt"] = self._state, FLOAT_MAX, math.sqrt
    x, a, eps = args[0], self.ema_alpha, self.eps
    return [
        f"{s} = {st}.slots",
        f"if {s} is None: {s} = {st}.scalar_slots()",
        f"if {s}[2] == 0.0:",
        f"    {s}[0] = {x}; {s}[1] = 0.0; {s}[2] = 1.0; {r} = 0.0",  # inputs arrive as floats
        "else:",
        f"    {d} = {x} - {s}[0]",
        f"    {d} = _FLOAT_MAX if {d} > _FLOAT_MAX else (-_FLOAT_MAX if {d} < -_FLOAT_MAX else {d})",
        f"    {std} = _sqrt({s}[1])",
        f"    if {std} > {eps!r}:",
        f"        {r} = {d} / ({std} + {eps!r})",
        f"        {r} = _FLOAT_MAX if {r} > _FLOAT_MAX else (-_FLOAT_MAX if {r} < -_FLOAT_MAX else {r})",
        "    else:",
        f"        {r} = 0.0",
        f"    {m} = (1.0 - {a!r}) * {s}[0] + {a!r} * {x}",
        f"    {v} = (1.0 - {a!r}) * {s}[1] + {a!r} * ({d} * {d})",
        f"    {s}[0] = _FLOAT_MAX if {m} > _FLOAT_MAX else (-_FLOAT_MAX if {m} < -_FLOAT_MAX else {m})",
        f"    {s}[1] = _FLOAT_MAX if {v} > _FLOAT_MAX else {v}",
    ], r


def attach(cls: type[EmaDelta]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.compute_fast = compute_fast  # type: ignore[attr-defined]
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_block = scalar_block  # type: ignore[method-assign]
