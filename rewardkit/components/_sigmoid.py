"""Shared maths of the sigmoid components: ``1/(1+exp(-(x-center)/width))`` on one input.

``throughput_sigmoid`` and ``logistic_latency`` differ only in the input they read and the names
of their two params; both subclass :class:`ScaledSigmoid`. The logit is clipped to +-700, which
keeps ``exp`` finite and changes the result by less than float64 resolution. This module is the
definition; faster paths that give the same numbers (one NumPy array written in place, plain
floats, inlined code) live in ``components/_fast/_sigmoid.py``.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

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
        xp = array_namespace(value)
        with overflow_ok():  # a huge (x - center) / width becomes +-inf, clipped below; exp may overflow to inf
            # a width beyond 2**512: numerator and width halved by 2**512 alike (exact), as XLA divides
            # through the reciprocal, which would be subnormal and flushed to zero
            if width > 2.0 ** 512:
                z = ((value - getattr(self, self.center_param)) * 2.0 ** -512) / (width * 2.0 ** -512)
            else:
                z = (value - getattr(self, self.center_param)) / width
            # clipped at -700 (exp(700) is finite); above +700 the result is 1.0 either way
            return 1.0 / (1.0 + xp.exp(-clip(z, -700.0, None)))
