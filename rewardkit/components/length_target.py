"""``length_target``: minus ``per_unit`` for each word, character or token away from ``target``.

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


@register("length_target")
class LengthTarget(LengthReward):
    """-per_unit*|length-target| of the completion in words, chars or tokens: in (-inf, 0], 0 at the target.

    One term for "about this long": TRL's quick-start reward ``-abs(20 - len(completion))`` is
    ``{target: 20, unit: chars}``. ``unit`` counts as in ``length_penalty`` (``tokens`` reads the
    context key ``completion_tokens``). Saturates at the most negative finite float of the
    call's float dtype.
    """

    params = {
        "target": Param.non_negative(doc="the length that scores 0"),
        "unit": unit_param("words", "the length"),
        "per_unit": Param.non_negative(1.0, "penalty per word (character, token) away from target"),
    }
    output_range = (-math.inf, 0.0)

    def of_length(self, length: float) -> float:
        return -saturated(self.per_unit * abs(length - self.target))

    def of_lengths(self, lengths: Any) -> Any:
        xp = array_namespace(lengths)
        return -(xp.abs(lengths - self.target) * self.per_unit)
