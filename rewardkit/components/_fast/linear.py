"""``linear``'s fast paths: the same numbers as its definition (:mod:`rewardkit.components.linear`),
computed faster.

- :func:`scalar_fn`: plain floats for one environment (the composer's scalar path): the saturation
  at +-largest float folded into the clip bounds;
- :func:`scalar_source`: that function as one expression inlined into the composer's code.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

from typing import Any, Callable

from .._numeric import FLOAT_MAX
from ..linear import Linear


def _bounds(self: Linear) -> tuple[float, float]:
    """The clip bounds with the saturation folded in: the result lies in them."""
    low, high = self.clip if self.clip is not None else (-FLOAT_MAX, FLOAT_MAX)
    return max(low, -FLOAT_MAX), min(high, FLOAT_MAX)


def scalar_fn(self: Linear) -> Callable[..., float]:
    """Plain-float version of the definition for the composer's scalar path."""
    scale = self.scale
    low, high = _bounds(self)

    def one_env(value: float, terminated: bool, truncated: bool) -> float:
        out = scale * value
        return low if out < low else (high if out > high else out)

    return one_env


def scalar_source(self: Linear, args: list[str], env: dict[str, Any], tag: str) -> str | None:
    """:func:`scalar_fn` as one expression, inlined into the composer's compiled scalar path."""
    low, high = _bounds(self)
    o = f"{tag}_out"
    return f"({low!r} if ({o} := {self.scale!r} * {args[0]}) < {low!r} else ({high!r} if {o} > {high!r} else {o}))"


def attach(cls: type[Linear]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_source = scalar_source  # type: ignore[method-assign]
