"""``RewardShaper``: the weight of each term as a schedule over the global training step."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from .schedules import Constant, Schedule, make_schedule


class RewardShaper:
    """Holds one weight schedule per term name and evaluates them at a step.

    The composer owns one; ``composer.shaper.set_weight("latency", {...})`` changes a weight
    between steps (a curriculum decided at run time rather than in the config).
    """

    def __init__(self, schedules: Mapping[str, Schedule] | None = None) -> None:
        self._schedules: dict[str, Schedule] = dict(schedules or {})
        self._listeners: list[Any] = []

    def set_weight(self, name: str, spec: Any) -> None:
        """Replace the weight of ``name`` with a number or a schedule spec."""
        if name not in self._schedules:
            raise KeyError(f"no term named {name!r}; terms: {', '.join(self._schedules)}")
        # errors name the key path the weight has in a config: components.<group>.components.<term>.weight
        path = "components." + ".components.".join(name.split("/")) + ".weight"
        self._schedules[name] = make_schedule(spec, path=path)
        for listener in self._listeners:
            listener()

    def schedule(self, name: str) -> Schedule:
        """The schedule of term ``name``."""
        return self._schedules[name]

    def weight(self, name: str, step: int) -> float:
        """Weight of ``name`` at ``step``."""
        return self._schedules[name](step)

    def weights(self, step: int) -> dict[str, float]:
        """Every term's weight at ``step``."""
        return {name: s(step) for name, s in self._schedules.items()}

    def is_constant(self, name: str) -> bool:
        return isinstance(self._schedules[name], Constant)

    def on_change(self, callback: Any) -> None:
        """Call ``callback()`` whenever a weight is replaced (the composer recompiles)."""
        self._listeners.append(callback)

    def __iter__(self) -> Iterator[str]:
        return iter(self._schedules)

    def __len__(self) -> int:
        return len(self._schedules)
