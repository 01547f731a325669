"""``potential_shaping``'s fast paths: the same numbers as its definition
(:mod:`rewardkit.components.potential_shaping`), computed faster.

- :func:`scalar_fn`: plain floats for one environment, on the state's scalar slots (the
  composer's scalar path);
- :func:`scalar_block`: that function as inline statements in the composer's code.

:func:`attach` sets them on the class; the component tests prove each equal to the definition.
"""

from __future__ import annotations

from typing import Any, Callable

from .._numeric import FLOAT_MAX
from ..potential_shaping import PotentialShaping


def scalar_fn(self: PotentialShaping) -> Callable[..., float]:
    """Plain-float version of the definition for the scalar path."""
    state, gamma, big = self._state, self.gamma, FLOAT_MAX

    def one_env(potential: float, terminated: bool, truncated: bool) -> float:
        s = state.scalar_slots()  # [phi, started]
        phi_next = 0.0 if terminated else float(potential)
        if s[1] != 0.0:
            out = gamma * phi_next - s[0]
            out = big if out > big else (-big if out < -big else out)
            s[0] = phi_next
        else:
            out = 0.0
            s[0] = float(potential)
        s[1] = 1.0
        return out

    return one_env


def scalar_block(self: PotentialShaping, args: list[str], env: dict[str, Any], tag: str
                 ) -> tuple[list[str], str] | None:
    """:func:`scalar_fn` as inline statements (same operations) for the compiled scalar path."""
    env["_state"], env["_FLOAT_MAX"] = self._state, FLOAT_MAX
    s, phi, out, x = f"{tag}_slots", f"{tag}_phi", f"{tag}_out", args[0]
    return [
        f"{s} = _state.slots",
        f"if {s} is None: {s} = _state.scalar_slots()",  # [phi, started]
        f"{phi} = 0.0 if terminated else {x}",  # inputs arrive as floats
        f"if {s}[1] != 0.0:",
        f"    {out} = {self.gamma!r} * {phi} - {s}[0]",
        f"    {out} = _FLOAT_MAX if {out} > _FLOAT_MAX else (-_FLOAT_MAX if {out} < -_FLOAT_MAX else {out})",
        f"    {s}[0] = {phi}",
        "else:",
        f"    {out} = 0.0",
        f"    {s}[0] = {x}",
        f"{s}[1] = 1.0",
    ], out


def attach(cls: type[PotentialShaping]) -> None:
    """Give the class its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls.scalar_block = scalar_block  # type: ignore[method-assign]
