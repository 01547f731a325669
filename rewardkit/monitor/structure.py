"""What a monitor knows about the reward it watches: the declared structure of the config.

Built from a reward config by :meth:`RewardStructure.from_spec` (top-level terms, since TRL logs one
reward function per top-level term): each term's weight at a step, its documented output range when
its logged value is the component's raw output (no normalizer or transforms), which term is
``gold``, which pairs should ``agree`` and which terms to ``watch``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class RewardStructure:
    """Top-level term names, weights by step, output ranges, the gold term and agreeing pairs."""

    terms: tuple[str, ...]
    weights: dict[str, Callable[[int], float]] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    gold: str | None = None
    agree: tuple[tuple[str, str], ...] = ()
    #: terms known to pay a loophole (``monitor.watch``, or ``rewardkit audit --stress``)
    watch: tuple[str, ...] = ()

    def weight(self, term: str, step: int) -> float:
        """The term's weight at ``step`` (1.0 when the structure does not say)."""
        schedule = self.weights.get(term)
        return 1.0 if schedule is None else float(schedule(step))

    def ever_trained(self, term: str) -> bool:
        """Whether the term's weight is non-zero at some step (a piecewise weight can be zero at the
        start and at the end and still train the term in between)."""
        schedule = self.weights.get(term)
        if schedule is None:
            return True
        ever = getattr(schedule, "ever_nonzero", None)
        if ever is not None:
            return bool(ever())
        return any(float(schedule(s)) != 0.0 for s in (0, 10**6))

    def trained(self, step: int) -> list[str]:
        """Terms with a non-zero weight at ``step``: the ones the policy is optimized for."""
        return [t for t in self.terms if self.weight(t, step) != 0.0]

    def bounded_range(self, term: str) -> tuple[float, float] | None:
        """The term's declared output range when both ends are finite, else None."""
        found = self.ranges.get(term)
        if found is None or not all(math.isfinite(v) for v in found) or found[1] <= found[0]:
            return None
        return found

    @classmethod
    def from_spec(cls, spec: Any) -> "RewardStructure":
        """The structure of a validated config (a ``rewardkit.config.RewardSpec``; its ``monitor:``
        section gives gold and agree). A group has no declared range; a term does."""
        weights: dict[str, Callable[[int], float]] = {}
        ranges: dict[str, tuple[float, float]] = {}
        for node in spec.nodes:
            weights[node.name] = node.weight
            plain = node.normalizer is None and not node.transforms
            component = getattr(node, "component", None)  # groups have none
            if component is not None and plain:
                low, high = component.output_range
                ranges[node.name] = (float(low), float(high))
        settings = spec.monitor
        return cls(terms=tuple(n.name for n in spec.nodes), weights=weights, ranges=ranges,
                   gold=None if settings is None else settings.gold,
                   agree=() if settings is None else settings.agree,
                   watch=() if settings is None else settings.watch)
