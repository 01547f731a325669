"""The sigmoid components' fast paths (``throughput_sigmoid``, ``logistic_latency``): the same
numbers as their definition (:class:`rewardkit.components._sigmoid.ScaledSigmoid`), computed faster.

- :func:`compute_fast`: a NumPy batch in one array written in place, else the definition itself;
- :func:`scalar_fn`: plain floats for one environment (the composer's scalar path);
- :func:`scalar_source`: that function as one expression inlined into the composer's code.

:func:`attach` sets them on each subclass; the component tests prove each equal to the definition.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ...base import Array
from .._numeric import overflow_ok
from .._sigmoid import ScaledSigmoid


def compute_fast(self: ScaledSigmoid, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
    """The definition's ``compute``, with a NumPy batch computed in one array written in place."""
    value = x[self._input]
    width = getattr(self, self.width_param)
    if value.__class__ is np.ndarray and width <= 2.0 ** 512:
        # the negation folded into the subtraction: (center - x) / width is exactly -((x - center) / width),
        # and min(t, 700) is -max(z, -700), so these are the definition's numbers
        with overflow_ok():
            t = np.subtract(getattr(self, self.center_param), value)
            np.divide(t, width, out=t)
            np.minimum(t, 700.0, out=t)
            np.exp(t, out=t)
            np.add(t, 1.0, out=t)
            return np.divide(1.0, t, out=t)
    return self.compute(x, terminated, truncated)


def scalar_fn(self: ScaledSigmoid) -> Callable[..., float]:
    """Plain-float version of the definition for the composer's scalar path."""
    center, width, exp = getattr(self, self.center_param), getattr(self, self.width_param), math.exp

    def one_env(value: float, terminated: bool, truncated: bool) -> float:
        z = (value - center) / width
        z = 700.0 if z > 700.0 else (-700.0 if z < -700.0 else z)
        return 1.0 / (1.0 + exp(-z))

    return one_env


def scalar_source(self: ScaledSigmoid, args: list[str], env: dict[str, Any], tag: str) -> str | None:
    """:func:`scalar_fn` as one expression, inlined into the composer's compiled scalar path."""
    env["_exp"] = math.exp
    z = f"{tag}_z"
    center, width = getattr(self, self.center_param), getattr(self, self.width_param)
    return (f"(1.0 / (1.0 + _exp(-(700.0 if ({z} := ({args[0]} - {center!r}) / {width!r}) > 700.0 "
            f"else (-700.0 if {z} < -700.0 else {z})))))")


def attach(cls: type[ScaledSigmoid]) -> None:
    """Give a sigmoid component its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.compute_fast = compute_fast  # type: ignore[attr-defined]
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_source = scalar_source  # type: ignore[method-assign]
