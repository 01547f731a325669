"""``word_count_bounds``: 1.0 when the completion's word count lies within per-sample bounds."""

from __future__ import annotations

from ..params import Param
from ..registry import register
from ._constraints import count_words
from ._text import TextReward


@register("word_count_bounds")
class WordCountBounds(TextReward):
    """1.0 if ``min_words <= words <= max_words``; outside, 0.0, or with ``soft > 0`` credit falling to 0 over ``soft`` words.

    Words are runs of word characters (``\\w+``, as IFEval's checker counts them). The bounds are
    per-sample dataset columns (``min_words``, ``max_words``; remap them with ``inputs``); a bound
    that is 0 or negative is no bound, so a sample with both at 0 always scores 1.0. For
    instruction-following rewards ("answer in 10 to 40 words"): ``soft: 0`` is the strict check,
    ``soft: 10`` partial credit that still grades a reply 5 words short (0.5).
    """

    inputs = {"completion": 0, "min_words": 0, "max_words": 0}
    text_inputs = frozenset({"completion"})
    params = {"soft": Param.non_negative(0.0, "words outside the bounds over which credit falls from 1 to 0 (0: all or nothing)")}
    output_range = (0.0, 1.0)

    def score(self, completion: str, min_words: float, max_words: float) -> float:
        words = count_words(completion)
        short = min_words - words if min_words > 0 else 0.0
        long = words - max_words if max_words > 0 else 0.0
        distance = max(short, long, 0.0)
        if distance == 0.0:
            return 1.0
        if self.soft == 0.0:
            return 0.0
        return max(0.0, 1.0 - float(distance) / self.soft)
