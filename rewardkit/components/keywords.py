"""``keywords``: the share of per-sample words a completion includes (or avoids)."""

from __future__ import annotations

import re
from functools import lru_cache

from ..params import Param
from ..registry import register
from ._constraints import items
from ._text import TextReward


@lru_cache(maxsize=4096)
def _pattern(item: str, whole_word: bool) -> re.Pattern[str]:
    escaped = re.escape(item)
    return re.compile(rf"(?<!\w){escaped}(?!\w)" if whole_word else escaped, re.IGNORECASE)


@register("keywords")
class Keywords(TextReward):
    """Share of the sample's ``words`` present (``include``) or absent (``exclude``); ``partial: false``: 1.0 only if all are;
    ``any``: 1.0 when at least one is present.

    Matching ignores case. ``words`` is a per-sample dataset column, items separated by ``|`` (``"river|stone"``); an
    empty value scores 1.0 (no such constraint for that sample). ``match: word`` finds an item as
    a whole word (not inside a longer word), ``match: substring`` anywhere: ``exclude`` with the
    item ``,`` and ``substring`` is IFEval's "no commas". Required, forbidden and "use the word X"
    instructions, each as its own term; ``any`` is "mention one of these" (a reply on its topic
    uses one of the topic's words: a fragment that meets the other constraints does not).
    """

    inputs = {"completion": 0, "words": 0}
    text_inputs = frozenset({"completion", "words"})
    params = {
        "mode": Param.choice(("include", "exclude", "any"), "include",
                             "include: the words must appear; exclude: they must not; any: one of them must"),
        "match": Param.choice(("word", "substring"), "word", "word: whole words only; substring: anywhere in the text"),
        "partial": Param.boolean(True, "true: the share of items satisfied; false: 1.0 only when every item is"),
    }
    output_range = (0.0, 1.0)

    def score(self, completion: str, words: str) -> float:
        wanted = items(words)
        if not wanted:
            return 1.0
        whole_word, include = self.match == "word", self.mode != "exclude"
        if self.mode == "any":
            return 1.0 if any(_pattern(w, whole_word).search(completion) is not None for w in wanted) else 0.0
        met = sum((_pattern(w, whole_word).search(completion) is not None) == include for w in wanted)
        if self.partial:
            return met / len(wanted)
        return 1.0 if met == len(wanted) else 0.0
