"""``length_penalty``: minus ``per_unit`` for each word, character or token beyond ``max``.

This module is the definition; faster paths that give the same numbers live in
``components/_fast/_length.py``, shared by the length components.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import array_namespace
from ..params import Param
from ..registry import register
from ._length import LengthReward, saturated, unit_param


@register("length_penalty")
class LengthPenalty(LengthReward):
    """-per_unit*max(0, length-max) of the completion in words, chars or tokens: in (-inf, 0], non-increasing as it grows.

    ``unit: words`` counts whitespace-separated words (``len(text.split())``), ``unit: chars``
    counts characters (Unicode code points), ``unit: tokens`` reads the completion's token count
    from the context key ``completion_tokens`` (TRL: ``len(completion_ids)``). Zero up to
    ``max``, then ``-per_unit`` per unit beyond it, saturating at the most negative finite float
    of the call's float dtype (float32 in, float32 out: never ``-inf``). Give it a positive
    weight: it is already a penalty.
    """

    params = {
        "unit": unit_param("words", "the length"),
        "max": Param.non_negative(doc="length allowed without penalty"),
        "per_unit": Param.non_negative(1.0, "penalty per word (character, token) beyond max"),
    }
    output_range = (-math.inf, 0.0)
    monotone = {"completion": "decreasing"}

    def of_length(self, length: float) -> float:
        excess = length - self.max
        if excess <= 0:
            return 0.0
        return -saturated(self.per_unit * excess)

    def of_lengths(self, lengths: Any) -> Any:
        xp = array_namespace(lengths)
        return -(xp.maximum(lengths - self.max, 0.0) * self.per_unit)
