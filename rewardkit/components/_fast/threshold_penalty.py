"""``threshold_penalty``'s fast paths: the same numbers as its definition
(:mod:`rewardkit.components.threshold_penalty`), computed faster.

- :func:`compute_fast`: with ``threshold >= 0`` and ``slope <= 1`` (nothing to saturate), a NumPy
  batch computed in one array written in place; otherwise the definition itself;
- :func:`scalar_fn`: plain floats for one environment (the composer's scalar path);
- :func:`scalar_source`: that function inlined into the composer's code, with the same clamps left out.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ...base import Array
from .._numeric import FLOAT_MAX, overflow_ok
from ..threshold_penalty import ThresholdPenalty


def compute_fast(self: ThresholdPenalty, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
    """The definition's ``compute``, in place on NumPy arrays where nothing needs saturating."""
    latency = x["latency"]
    if self.threshold >= 0 and self.slope <= 1.0 and latency.__class__ is np.ndarray:
        # the definition's unsaturated case on one array written in place (slope * e and e * slope
        # are the same number; backend.clip takes np.maximum on NumPy arrays, as here)
        with overflow_ok():
            excess = np.subtract(latency, self.threshold)
            np.maximum(excess, 0.0, out=excess)
            return excess if self.slope == 1.0 else np.multiply(excess, self.slope, out=excess)
    return self.compute(x, terminated, truncated)


def scalar_fn(self: ThresholdPenalty) -> Callable[..., float]:
    """Plain-float version of the definition for the composer's scalar path."""
    threshold, slope = self.threshold, self.slope

    def one_env(latency: float, terminated: bool, truncated: bool) -> float:
        excess = latency - threshold
        excess = 0.0 if excess < 0.0 else (FLOAT_MAX if excess > FLOAT_MAX else excess)
        out = slope * excess
        return FLOAT_MAX if out > FLOAT_MAX else out

    return one_env


def scalar_source(self: ThresholdPenalty, args: list[str], env: dict[str, Any], tag: str) -> str | None:
    """:func:`scalar_fn` as one expression for the compiled scalar path, without the clamps that
    cannot trigger (``threshold >= 0``: the excess; ``slope <= 1``: the product)."""
    env["_FLOAT_MAX"] = FLOAT_MAX
    e, o = f"{tag}_excess", f"{tag}_out"
    if self.threshold >= 0:
        excess = f"(0.0 if ({e} := {args[0]} - {self.threshold!r}) < 0.0 else {e})"
    else:
        excess = f"(0.0 if ({e} := {args[0]} - {self.threshold!r}) < 0.0 else (_FLOAT_MAX if {e} > _FLOAT_MAX else {e}))"
    if self.slope <= 1.0:
        return f"({self.slope!r} * {excess})"
    return f"(_FLOAT_MAX if ({o} := {self.slope!r} * {excess}) > _FLOAT_MAX else {o})"


def attach(cls: type[ThresholdPenalty]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.compute_fast = compute_fast  # type: ignore[attr-defined]
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_source = scalar_source  # type: ignore[method-assign]
