"""``bullet_count``: 1.0 when the completion is a list of exactly the sample's number of bullets."""

from __future__ import annotations

import re

from ..params import Param
from ..registry import register
from ._text import TextReward

#: a bullet line as IFEval counts them: ``* item`` (not ``**bold``) or ``- item``; a line holding a lone
#: ``*`` is not a bullet (IFEval's pattern lets the character after ``*`` be the line break, so a lone
#: ``*`` line followed by any other line counts once for the two)
BULLET = re.compile(r"^[^\S\n]*(?:\*[^*\n]|-)", re.MULTILINE)


def count_bullets(text: str) -> int:
    """Lines of ``text`` that start (after spaces) with ``*`` followed by something other than
    ``*``, or with ``-``."""
    return len(BULLET.findall(text))


@register("bullet_count")
class BulletCount(TextReward):
    """1.0 for exactly ``bullets`` bullet lines (``* `` or ``- ``); with ``partial``, max(0, 1 - |count - bullets| / bullets).

    ``bullets`` is a per-sample dataset column (a number, rounded); 0 or less means no such
    constraint for that sample (1.0). IFEval's "answer with exactly N bullet points".
    """

    inputs = {"completion": 0, "bullets": 0}
    text_inputs = frozenset({"completion"})
    params = {"partial": Param.boolean(True, "true: credit for a count close to the target; false: exact count only")}
    output_range = (0.0, 1.0)

    def score(self, completion: str, bullets: float) -> float:
        if bullets < 0.5:
            return 1.0
        wanted = float(round(bullets))
        found = count_bullets(completion)
        if found == wanted:
            return 1.0
        return max(0.0, 1.0 - abs(found - wanted) / wanted) if self.partial else 0.0
