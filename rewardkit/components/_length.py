"""Shared base of the length components (``length_penalty``, ``length_target``, ``overlong_penalty``).

A length is counted in one of three units. ``words`` and ``chars`` count the ``completion`` text
(whitespace-separated words, Unicode code points); ``tokens`` reads the number of the
completion's tokens from the context key ``completion_tokens`` (a number per environment:
``TRLRewardFunctions`` fills it with ``len(completion_ids)``, the token ids the trainer passes).
With ``unit: tokens`` the component reads numbers, not text, and computes on whole arrays.
This module is the definition; faster paths that give the same numbers (texts counted by C-level
maps, no saturation where no result can overflow, plain floats) live in ``components/_fast/_length.py``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..backend import call_dtype, quiet, saturate
from ..base import Array
from ..params import Param
from ._numeric import FLOAT_MAX
from ._text import TextReward

UNITS = ("words", "chars", "tokens")
#: the context key a ``unit: tokens`` component reads: the completion's number of tokens
TOKENS_KEY = "completion_tokens"
#: largest token count accepted (far beyond any context window; keeps float maths exact)
MAX_TOKENS = float(2**53)
#: longer than any text's length in words or characters (a Python length is at most 2**63 - 1)
LONGEST_TEXT = float(2**63)


def unit_param(default: str, what: str) -> Param:
    """The ``unit`` parameter: words, chars or tokens."""
    return Param.choice(UNITS, default, f"what {what} counts: whitespace-separated words, characters, or the "
                                        f"completion's tokens (context key {TOKENS_KEY!r})")


class LengthReward(TextReward):
    """A function of the completion's length in ``self.unit``; subclasses implement :meth:`of_length`
    (floats) and :meth:`of_lengths` (arrays in the inputs' library)."""

    def _validate(self) -> None:
        if self.unit == "tokens":  # a number per environment instead of the text
            self.inputs = {TOKENS_KEY: 0}
            self.text_inputs = frozenset()
            self.input_domains = {TOKENS_KEY: (0.0, MAX_TOKENS)}
            self.monotone = {TOKENS_KEY: direction} if (direction := self.monotone.get("completion")) else {}

    def of_length(self, length: float) -> float:
        """The raw value for a completion of ``length`` units (a float, never NaN)."""
        raise NotImplementedError

    def of_lengths(self, lengths: Any) -> Any:
        """:meth:`of_length` on an array of lengths (any array library, its float dtype kept)."""
        raise NotImplementedError

    def score(self, text: Any) -> float:
        if self.unit == "words":
            return self.of_length(len(text.split()))
        if self.unit == "chars":
            return self.of_length(len(text))
        return self.of_length(float(text))

    def compute(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        if self.unit == "tokens":
            lengths = x[TOKENS_KEY]
        else:  # the lengths of the texts, then the same array maths as tokens
            texts = x["completion"]
            counts = [len(text.split()) for text in texts] if self.unit == "words" else [len(text) for text in texts]
            lengths = np.array(counts, dtype=np.int64).astype(call_dtype(np.float64))
        with quiet():
            return saturate(self.of_lengths(lengths))


def saturated(value: float) -> float:
    """``value`` clamped to the finite float64 range."""
    return FLOAT_MAX if value > FLOAT_MAX else -FLOAT_MAX if value < -FLOAT_MAX else value
