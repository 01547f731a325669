"""``overlong_penalty``: DAPO's soft overlong punishment of completions near or past ``max_length``.

This module is the definition; faster paths that give the same numbers live in
``components/_fast/_length.py``, shared by the length components.
"""

from __future__ import annotations

from typing import Any

from ..backend import array_namespace
from ..params import Param
from ..registry import register
from ._length import LengthReward, unit_param


@register("overlong_penalty")
class OverlongPenalty(LengthReward):
    """0 up to max_length-cache_length, then linear down to -1 at max_length, -1 beyond: in [-1, 0].

    DAPO's soft overlong punishment (Eq. 13 of the DAPO paper; TRL's
    ``get_soft_overlong_punishment(max_completion_len, soft_punish_cache)``): with
    ``L = max_length`` and ``C = cache_length``, a completion of length ``n`` scores 0 when
    ``n <= L - C``, ``(L - C - n) / C`` when ``L - C < n <= L`` and -1 beyond ``L``
    (``cache_length: 0``: 0 up to ``L``, -1 beyond; ``cache_length`` above ``L`` starts the ramp
    below zero length, as TRL's function does). ``unit`` is ``tokens`` by default (context
    key ``completion_tokens``), or ``words``/``chars`` of the completion.
    """

    params = {
        "max_length": Param.positive(doc="length at which the penalty reaches -1 (TRL: max_completion_len)"),
        "cache_length": Param.non_negative(doc="width of the linear ramp before max_length (TRL: soft_punish_cache)"),
        "unit": unit_param("tokens", "the length"),
    }
    output_range = (-1.0, 0.0)
    monotone = {"completion": "decreasing"}

    def _validate(self) -> None:
        self._start = self.max_length - self.cache_length
        super()._validate()

    def of_length(self, length: float) -> float:
        if length <= self._start:
            return 0.0
        if length <= self.max_length:
            return (self._start - length) / self.cache_length
        return -1.0

    def of_lengths(self, lengths: Any) -> Any:
        xp = array_namespace(lengths)
        if self.cache_length == 0:
            return xp.where(lengths > self.max_length, -1.0, 0.0 * lengths)
        ramp = xp.clip((self._start - lengths) / self.cache_length, -1.0, 0.0)
        return xp.where(lengths > self.max_length, -1.0, ramp)
