"""``info_value``: pass through any number the environment reports, with a fallback."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..backend import array_namespace, call_dtype, device_of, wide_float
from ..base import Array, BaseReward
from ..params import Param
from ..registry import register


@register("info_value")
class InfoValue(BaseReward):
    """ctx[key], or default when the key is absent: range of the signal, increasing in it.

    Lets a config reward any signal (an ``info`` entry, say) without a dedicated component. The
    single input ``value`` reads the context key named by ``key`` and is optional: when the key is
    missing, every environment gets ``default``.
    """

    inputs = {"value": 0}
    optional_inputs = frozenset({"value"})
    params = {
        "key": Param.string(doc="context key to read"),
        "default": Param.number(0.0, "value used when the key is absent from the context"),
    }
    output_range = (-math.inf, math.inf)
    monotone = {"value": "increasing"}

    def default_input_keys(self) -> dict[str, str]:
        return {"value": self.key}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        if "value" in x:
            value = x["value"]  # a new array: callers may modify the result
            return value.copy() if value.__class__ is np.ndarray else value * 1.0
        # Without the input the batch size and library come from the (n_envs,) episode flags.
        xp = array_namespace(terminated)
        if isinstance(terminated, np.ndarray):
            return np.full(terminated.shape[0], self.default, dtype=call_dtype(np.float64))
        dtype = call_dtype(wide_float(xp))  # the call's dtype: float32 contexts stay float32
        return xp.full((terminated.shape[0],), self.default, dtype=dtype, device=device_of(terminated))

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        default = self.default

        def one_env(value: float | None, terminated: bool, truncated: bool) -> float:
            return default if value is None else float(value)

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path."""
        # the composer's scalar path hands inputs over as Python floats already
        return f"({self.default!r} if {args[0]} is None else {args[0]})"
