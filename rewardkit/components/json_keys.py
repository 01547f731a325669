"""``json_keys``: 1.0 when the completion is a JSON object holding the sample's keys."""

from __future__ import annotations

import json
import re

from ..params import Param
from ..registry import register
from ._constraints import items
from ._text import TextReward

#: a Markdown code fence around the whole reply (``` or ```json), which IFEval's checker strips
_FENCE = re.compile(r"^```(?:json|JSON|Json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_object(text: str) -> dict | None:
    """The JSON object the whole reply is (code fences stripped), or ``None``."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@register("json_keys")
class JsonKeys(TextReward):
    """1.0 if the whole completion is a JSON object with every key in ``keys``; with ``partial``, graded credit (see below).

    ``keys`` is a per-sample dataset column, keys separated by ``|`` (``"name|city"``); an empty
    value scores 1.0 (no such constraint for that sample). The reply may sit in a Markdown code fence, as IFEval's
    checker allows. ``partial: true`` grades a weak policy's attempts: an object scores
    0.5 + 0.5 x the share of keys it holds; text that is not one scores 0.25 x the share of keys
    written as quoted strings (``"name"``) in it.
    """

    inputs = {"completion": 0, "keys": 0}
    text_inputs = frozenset({"completion", "keys"})
    params = {"partial": Param.boolean(True, "true: graded credit for near misses; false: 1.0 or 0.0")}
    output_range = (0.0, 1.0)

    def score(self, completion: str, keys: str) -> float:
        wanted = items(keys)
        if not wanted:
            return 1.0
        found = parse_object(completion)
        if found is not None:
            share = sum(k in found for k in wanted) / len(wanted)
            if share == 1.0:
                return 1.0
            return 0.5 + 0.5 * share if self.partial else 0.0
        if not self.partial:
            return 0.0
        return 0.25 * sum(f'"{k}"' in completion for k in wanted) / len(wanted)
