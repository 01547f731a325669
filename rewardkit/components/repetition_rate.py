"""``repetition_rate``: the fraction of a completion's word n-grams that repeat an earlier one."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..backend import call_dtype
from ..base import Array
from ..inputs import TokenIdColumn
from ..params import Param
from ..registry import register
from ._text import TextReward


def _all_ints(ids: list[Any]) -> bool:
    """Whether every item is exactly an ``int`` (one C pass and a count; none is all)."""
    kinds = [*map(type, ids)]
    return not kinds or (kinds[0] is int and kinds.count(int) == len(kinds))


@register("repetition_rate")
class RepetitionRate(TextReward):
    """(n-grams - distinct n-grams) / n-grams over the completion's words, in [0, 1]; 0 with no n-gram.

    Words are whitespace-separated (``text.split()``), compared exactly. ``n: 1`` measures
    repeated words, ``n: 3`` (the default) repeated phrases: a degenerate loop ("the cat the cat
    the cat") scores near 1. Give it a negative weight to discourage repetition.
    """

    params = {"n": Param.integer(3, "length of the word n-grams compared", minimum=1)}
    output_range = (0.0, 1.0)
    #: token ids (TRL's completion_ids) are counted as ids, not written as text and split again
    token_id_inputs = frozenset({"completion"})

    def score(self, text: str) -> float:
        return self.of_words(text.split())

    def of_words(self, words: list[Any]) -> float:
        """The rate over a sequence of words (or of integer token ids: each id is one word, as in
        the text ``" ".join(map(str, ids))``, since ``str`` writes distinct integers differently)."""
        total = len(words) - self.n + 1
        if total <= 1:
            return 0.0
        if self.n == 1:
            return (total - len(set(words))) / total
        return (total - len(set(zip(*(words[i:] for i in range(self.n)), strict=False)))) / total

    def _rate(self) -> Callable[[list[Any]], float]:
        """:meth:`of_words` as a function of this ``n`` (up to 3, the words zipped with iterators
        started one and two words on instead of copies: the same n-grams, the same arithmetic)."""
        n = self.n
        if n > 3:
            return self.of_words

        def rate(words: list[Any]) -> float:
            total = len(words) - n + 1
            if total <= 1:
                return 0.0
            if n == 1:
                return (total - len(set(words))) / total
            second = iter(words)  # the words from the second on, without copying them (total > 1: there are)
            next(second)
            if n == 2:
                return (total - len(set(zip(words, second, strict=False)))) / total
            third = iter(words)
            next(third)
            next(third)
            return (total - len(set(zip(words, second, third, strict=False)))) / total

        return rate

    def compute(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        texts = x["completion"]
        rate = self._rate()
        if texts.__class__ is not TokenIdColumn:  # a list of str (checked by the reader): their words
            values = np.fromiter([rate(text.split()) for text in texts], dtype=np.float64, count=len(texts))
        else:  # ids that are all Python ints are the words of their text; anything else is read as that text
            score = self.score
            values = np.fromiter([rate(ids) if _all_ints(ids) else score(" ".join(map(str, ids))) for ids in texts],
                                 dtype=np.float64, count=len(texts))
        dtype = call_dtype(np.float64)  # float32 contexts stay float32, as TextReward.compute (values in [0, 1])
        return values if dtype == np.float64 else values.astype(dtype)
