"""``littles_law_latency``'s fast paths: the same numbers as its definition
(:mod:`rewardkit.components.littles_law_latency`), computed faster.

- :func:`scalar_fn`: plain floats for one environment (the composer's scalar path); a negative
  input goes to the definition, which raises the explanatory error;
- :func:`scalar_block`: that function inlined into the composer's code.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._numeric import FLOAT_MAX
from ..littles_law_latency import LittlesLawLatency


def scalar_fn(self: LittlesLawLatency) -> Callable[..., float]:
    """Plain-float version of the definition for the composer's scalar path."""
    compute = self.compute

    def one_env(in_system: float, dt: float, terminated: bool, truncated: bool) -> float:
        if in_system < 0 or dt < 0:  # the array path raises the explanatory error
            compute({"in_system": np.array([in_system]), "dt": np.array([dt])}, np.zeros(1, bool), np.zeros(1, bool))
        out = in_system * dt
        return FLOAT_MAX if out > FLOAT_MAX else out

    return one_env


def scalar_block(self: LittlesLawLatency, args: list[str], env: dict[str, Any], tag: str
                 ) -> tuple[list[str], str] | None:
    """:func:`scalar_fn` inlined for the compiled scalar path (a negative input raises through it)."""
    env["_explain"], env["_FLOAT_MAX"] = self.scalar_fn(), FLOAT_MAX
    in_system, dt, out = args[0], args[1], f"{tag}_out"
    return ([f"if {in_system} < 0 or {dt} < 0: _explain({in_system}, {dt}, False, False)"],
            f"(_FLOAT_MAX if ({out} := {in_system} * {dt}) > _FLOAT_MAX else {out})")


def attach(cls: type[LittlesLawLatency]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_block = scalar_block  # type: ignore[method-assign]
