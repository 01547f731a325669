"""``ema_delta``: how far a signal moved from its recent average, in units of its recent spread."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..backend import all_finite, array_namespace, is_host
from ..base import Array, BaseReward, PerEnvState
from ..params import Param
from ..registry import register
from ._numeric import FLOAT_MAX, overflow_ok, saturate


@register("ema_delta")
class EmaDelta(BaseReward):
    """(signal-ema_mean)/(ema_std+eps), 0 on an episode's first step: in (-inf, inf), increasing in signal.

    Per environment, with ``a = ema_alpha`` and ``x`` the signal, each call does, in this order:

    1. first call of an episode (after construction or ``reset``): set ``mean = x``, ``var = 0``
       and return 0;
    2. otherwise ``d = x - mean``; return ``d / (sqrt(var) + eps)`` if ``sqrt(var) > eps``, else 0
       (zero-variance rule: a signal that has not varied yet gives no spike);
    3. then update ``mean = (1-a)*mean + a*x`` and ``var = (1-a)*var + a*d**2``.

    ``var`` is the EMA of squared deviations from the previous mean. Monotone in the signal for a
    fixed history. Values beyond the float64 range saturate, so output and state stay finite.
    """

    inputs = {"signal": 0}
    params = {
        "signal": Param.string(doc="context key of the signal to track"),
        "ema_alpha": Param.fraction(0.1, "weight of the newest value in the moving averages", open_low=True),
        "eps": Param.positive(1e-8, "standard deviations at or below this count as zero"),
    }
    output_range = (-math.inf, math.inf)
    monotone = {"signal": "increasing"}
    stateful = True
    atomic_update = True  # the scalar and batched paths can only fail before writing state

    def __init__(self, name: str | None = None, inputs: Mapping[str, str] | None = None, **params: Any) -> None:
        super().__init__(name, inputs, **params)
        self._state = PerEnvState(mean=0.0, var=0.0, started=0.0)

    def default_input_keys(self) -> dict[str, str]:
        return {"signal": self.signal}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        value = x["signal"]
        state = self._state
        s = state.ensure(value.shape[0], like=value)
        # every environment past its first step (a host-side flag): no first-step selection needed
        started = state.started_everywhere
        if started and value.__class__ is np.ndarray:
            return self._compute_numpy(value, s)
        xp = array_namespace(value)
        first = None if started else s["started"] == 0.0
        a, eps = self.ema_alpha, self.eps
        mean, var = s["mean"], s["var"]
        with overflow_ok():
            std = xp.sqrt(var)
            scored = std > eps if started else (std > eps) & ~first
            # On the host the plain steps run first and are kept when every result is finite (a
            # cheap check there); otherwise, and always on a device, each result saturates at the
            # dtype's largest finite float. Both give the same numbers for finite results.
            exact = is_host(value)
            if exact:
                d = value - mean
                delta = xp.where(scored, d / (std + eps), 0.0)
                new_mean = (1.0 - a) * mean + a * value
                new_var = (1.0 - a) * var + a * (d * d)
                exact = all_finite(delta, new_mean, new_var)
            if not exact:
                delta, new_mean, new_var = self._saturated(xp, value, mean, var, std, scored)
        if started:
            s["mean"], s["var"] = new_mean, new_var
        else:
            s["mean"] = xp.where(first, value, new_mean)
            s["var"] = xp.where(first, 0.0, new_var)
            s["started"] = xp.ones_like(value)
            state.started_everywhere = True
        return delta

    def _compute_numpy(self, value: np.ndarray, s: dict[str, Any]) -> np.ndarray:
        """:meth:`compute` on NumPy arrays once every environment has started: the same
        operations, written in place, with one finiteness test."""
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

    def _saturated(self, xp: Any, value: Array, mean: Array, var: Array, std: Array, scored: Array) -> tuple:
        """``(delta, mean, var)`` with each result saturated at the dtype's largest finite float."""
        a, eps = self.ema_alpha, self.eps
        d = saturate(value - mean)
        delta = xp.where(scored, saturate(d / (std + eps)), 0.0)
        return delta, saturate((1.0 - a) * mean + a * value), saturate((1.0 - a) * var + a * (d * d))

    def reset(self, mask: Array | None = None) -> None:
        self._state.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        return self._state.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._state.load_state_dict(state)

    def snapshot(self) -> Any:
        return self._state.snapshot()

    def restore(self, saved: Any) -> None:
        self._state.restore(saved)

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` (same order of operations) for the scalar path."""
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

    def scalar_block(self, args: list[str], env: dict[str, Any], tag: str) -> tuple[list[str], str] | None:
        """:meth:`scalar_fn` as inline statements (same operations) for the compiled scalar path."""
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


_LEAST_EPS: dict[Any, float] = {}


def _least_eps(dtype: Any) -> float:
    """The smallest ``eps`` for which an overflowing delta implies an overflowing variance (1/sqrt
    of the dtype's largest float), per NumPy dtype."""
    least = _LEAST_EPS.get(dtype)
    if least is None:
        least = _LEAST_EPS[dtype] = 1.0 / math.sqrt(float(np.finfo(dtype).max))
    return least
