"""Shared maths of the sigmoid components: ``1/(1+exp(-(x-center)/width))`` on one input.

``throughput_sigmoid`` and ``logistic_latency`` differ only in the input they read and the names
of their two params; both subclass :class:`ScaledSigmoid`. The logit is clipped to +-700, which
keeps ``exp`` finite and changes the result by less than float64 resolution.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from ..backend import array_namespace, clip
from ..base import Array, BaseReward
from ._numeric import overflow_ok


class ScaledSigmoid(BaseReward):
    """Base of the sigmoid components; subclasses name the input and the center/width params."""

    center_param: ClassVar[str] = ""
    width_param: ClassVar[str] = ""
    output_range = (0.0, 1.0)

    @property
    def _input(self) -> str:
        return next(iter(self.inputs))

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        value = x[self._input]
        width = getattr(self, self.width_param)
        if value.__class__ is np.ndarray and width <= 2.0 ** 512:
            # NumPy: one array written in place, and the negation folded into the subtraction:
            # (center - x) / width is exactly -((x - center) / width), and min(t, 700) is -max(z, -700),
            # so these are the same numbers as the general path below
            with overflow_ok():
                t = np.subtract(getattr(self, self.center_param), value)
                np.divide(t, width, out=t)
                np.minimum(t, 700.0, out=t)
                np.exp(t, out=t)
                np.add(t, 1.0, out=t)
                return np.divide(1.0, t, out=t)
        xp = array_namespace(value)
        with overflow_ok():  # a huge (x - center) / width becomes +-inf, clipped below; exp may overflow to inf
            # a width beyond 2**512: numerator and width halved by 2**512 alike (exact), as XLA divides
            # through the reciprocal, which would be subnormal and flushed to zero
            if width > 2.0 ** 512:
                z = ((value - getattr(self, self.center_param)) * 2.0 ** -512) / (width * 2.0 ** -512)
            else:
                z = (value - getattr(self, self.center_param)) / width
            # clipped at -700 as the scalar path clips (exp(700) is finite); above +700 both give 1.0
            return 1.0 / (1.0 + xp.exp(-clip(z, -700.0, None)))

    def scalar_fn(self) -> Callable[..., float]:
        """Plain-float version of :meth:`compute` for the composer's scalar path."""
        center, width, exp = getattr(self, self.center_param), getattr(self, self.width_param), math.exp

        def one_env(value: float, terminated: bool, truncated: bool) -> float:
            z = (value - center) / width
            z = 700.0 if z > 700.0 else (-700.0 if z < -700.0 else z)
            return 1.0 / (1.0 + exp(-z))

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Inlined form of :meth:`scalar_fn` for the composer's compiled scalar path."""
        env["_exp"] = math.exp
        z = f"{tag}_z"
        center, width = getattr(self, self.center_param), getattr(self, self.width_param)
        return (f"(1.0 / (1.0 + _exp(-(700.0 if ({z} := ({args[0]} - {center!r}) / {width!r}) > 700.0 "
                f"else (-700.0 if {z} < -700.0 else {z})))))")
