"""``ema_delta``: how far a signal moved from its recent average, in units of its recent spread.

This module is the definition; faster paths that give the same numbers (NumPy arrays written in
place once every environment has started, plain floats on the single environment's state
slots, inlined code) live in ``components/_fast/ema_delta.py``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..backend import all_finite, array_namespace, is_host
from ..base import Array, BaseReward, PerEnvState
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, saturate


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
