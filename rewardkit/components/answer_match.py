"""``answer_match``: 1.0 when the completion's answer equals the reference, else 0.0."""

from __future__ import annotations

import math
import re
import string

from ..params import Param
from ..registry import register
from ._text import TextReward

#: A decimal number: sign, digits with optional thousands commas, fraction, exponent.
NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
_SPACES = re.compile(r"\s+")
#: ASCII punctuation removed by the exact comparison (str.translate: one C pass per text)
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """``exact`` mode's normal form: case-folded, ASCII punctuation removed, runs of whitespace
    made one space, no leading or trailing whitespace (``" The  Answer: 42. "`` -> ``"the answer 42"``)."""
    return _SPACES.sub(" ", text.casefold().translate(_NO_PUNCTUATION)).strip()


def final_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands commas allowed), or ``None``."""
    found = NUMBER.findall(text)
    if not found:
        return None
    try:
        value = float(found[-1].replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@register("answer_match")
class AnswerMatch(TextReward):
    """1.0 if the completion's answer equals ``reference`` (exact after normalization, or numeric), else 0.0.

    ``mode: exact`` compares both texts after :func:`normalize` (case-folded, ASCII punctuation
    removed, whitespace collapsed and trimmed). ``mode: numeric`` compares the final number of
    the completion with the final number of the reference: equal within ``tolerance``
    (absolute). A completion (or reference) with no number scores 0.0. Reads ``completion`` and
    ``reference`` (a dataset column) from the context.
    """

    inputs = {"completion": 0, "reference": 0}
    text_inputs = frozenset({"completion", "reference"})
    params = {
        "mode": Param.choice(("exact", "numeric"), "exact", "exact: normalized texts equal; numeric: final numbers equal"),
        "tolerance": Param.non_negative(1e-6, "numeric mode: largest absolute difference that still matches"),
    }
    output_range = (0.0, 1.0)

    def score(self, completion: str, reference: str) -> float:
        if self.mode == "exact":
            return 1.0 if normalize(completion) == normalize(reference) else 0.0
        got, want = final_number(completion), final_number(reference)
        if got is None or want is None:
            return 0.0
        return 1.0 if abs(got - want) <= self.tolerance else 0.0
