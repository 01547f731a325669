"""``ends_with``: 1.0 when the completion ends with the sample's phrase."""

from __future__ import annotations

from ..params import Param
from ..registry import register
from ._text import TextReward


@register("ends_with")
class EndsWith(TextReward):
    """1.0 if the completion (stripped, lower-cased) ends with ``ending``; ``elsewhere`` if the phrase is only earlier, else 0.0.

    ``ending`` is a per-sample dataset column; an empty value scores 1.0 (no such constraint).
    IFEval's "finish your response with this exact phrase" (its checker also strips and
    lower-cases). Lower-casing, not case-folding: folding would pay look-alikes (``endſ`` for
    ``ends``, ``ß`` for ``ss``) that IFEval refuses. ``elsewhere: 0.5`` is partial credit for a
    phrase written, then followed by more.
    """

    inputs = {"completion": 0, "ending": 0}
    text_inputs = frozenset({"completion", "ending"})
    params = {"elsewhere": Param.fraction(0.0, "score when the phrase appears but not at the end (0 to 1)")}
    output_range = (0.0, 1.0)

    def score(self, completion: str, ending: str) -> float:
        phrase = ending.strip().lower()
        if not phrase:
            return 1.0
        text = completion.strip().lower()
        if text.endswith(phrase):
            return 1.0
        return self.elsewhere if phrase in text else 0.0
