"""The GRPO demo's gold term, registered by name (``examples.grpo`` imports it before building a reward).

``arithmetic_strict``: 1.0 when the reply is exactly one equation written with the question's own
operands (the ``operands`` column, ``"27|23"``, either order) and the right sum, else 0.0: the
held-out metric ``task.strict_correct`` as a reward term. The composed reward pays it, and names
it as the gold term of ``monitor:`` and ``stress:``.
"""

from __future__ import annotations

from rewardkit import register
from rewardkit.components._text import TextReward

from .task import strict_correct


@register("arithmetic_strict")
class ArithmeticStrict(TextReward):
    """1.0 if the reply is one equation with the question's own operands and the right sum, else 0.0."""

    inputs = {"completion": 0, "operands": 0}
    text_inputs = frozenset({"completion", "operands"})
    output_range = (0.0, 1.0)

    def score(self, completion: str, operands: str) -> float:
        parts = operands.split("|")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            return 0.0
        return 1.0 if strict_correct(completion, int(parts[0]), int(parts[1])) else 0.0
