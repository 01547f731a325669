"""``length_penalty``: minus ``per_unit`` for each word (or character) beyond ``max``."""

from __future__ import annotations

import math

from ..params import Param
from ..registry import register
from ._numeric import FLOAT_MAX
from ._text import TextReward


@register("length_penalty")
class LengthPenalty(TextReward):
    """-per_unit*max(0, length-max) of the completion in words or chars: in (-inf, 0], non-increasing as text grows.

    ``unit: words`` counts whitespace-separated words (``len(text.split())``), ``unit: chars``
    counts characters (Unicode code points). Zero up to ``max``, then ``-per_unit`` per unit
    beyond it (saturating at the most negative finite float). Give it a positive weight: it is
    already a penalty.
    """

    params = {
        "unit": Param.choice(("words", "chars"), "words", "what is counted: whitespace-separated words or characters"),
        "max": Param.non_negative(doc="length allowed without penalty"),
        "per_unit": Param.non_negative(1.0, "penalty per word (or character) beyond max"),
    }
    output_range = (-math.inf, 0.0)
    monotone = {"completion": "decreasing"}

    def score(self, text: str) -> float:
        excess = (len(text.split()) if self.unit == "words" else len(text)) - self.max
        if excess <= 0:
            return 0.0
        value = self.per_unit * excess
        return -FLOAT_MAX if value > FLOAT_MAX else -value
