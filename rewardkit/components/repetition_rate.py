"""``repetition_rate``: the fraction of a completion's word n-grams that repeat an earlier one."""

from __future__ import annotations

from ..params import Param
from ..registry import register
from ._text import TextReward


@register("repetition_rate")
class RepetitionRate(TextReward):
    """(n-grams - distinct n-grams) / n-grams over the completion's words, in [0, 1]; 0 with no n-gram.

    Words are whitespace-separated (``text.split()``), compared exactly. ``n: 1`` measures
    repeated words, ``n: 3`` (the default) repeated phrases: a degenerate loop ("the cat the cat
    the cat") scores near 1. Give it a negative weight to discourage repetition.
    """

    params = {"n": Param.integer(3, "length of the word n-grams compared", minimum=1)}
    output_range = (0.0, 1.0)

    def score(self, text: str) -> float:
        words = text.split()
        total = len(words) - self.n + 1
        if total <= 1:
            return 0.0
        if self.n == 1:
            return (total - len(set(words))) / total
        return (total - len(set(zip(*(words[i:] for i in range(self.n)), strict=False)))) / total
