"""Gold terms for the stress examples besides rewardkit's own (``--import examples.stress.terms``).

- ``json_exact``: 1.0 when the whole reply is a JSON object whose ``name`` is the reference and
  whose ``age`` is a positive integer, else 0.0: what the JSON rewards should have checked.
- ``strict_equation``: re-exported from ``examples.monitor.terms`` (the question's own operands and
  the right sum).
"""

from __future__ import annotations

import json

from examples.monitor.terms import StrictEquation  # noqa: F401  (registers strict_equation)
from rewardkit import register
from rewardkit.components._text import TextReward


@register("json_exact")
class JsonExact(TextReward):
    """1.0 if the reply is a JSON object with ``name`` equal to the reference and a positive integer ``age``."""

    inputs = {"completion": 0, "reference": 0}
    text_inputs = frozenset({"completion", "reference"})
    output_range = (0.0, 1.0)

    def score(self, completion: str, reference: str) -> float:
        try:
            value = json.loads(completion)
        except ValueError:
            return 0.0
        if not isinstance(value, dict):
            return 0.0
        age = value.get("age")
        ok = value.get("name") == reference and isinstance(age, int) and not isinstance(age, bool) and age > 0
        return 1.0 if ok else 0.0
