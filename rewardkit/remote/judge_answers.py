"""Reading a judge's verdict from an OpenAI-compatible answer: first-token logprobs, or its text.

A :class:`LabelScale` maps the allowed answers (labels such as ``0``..``9`` or ``no``/``yes``,
lowest first) to evenly spaced values in [0, 1]. From the first generated token's top
alternatives it takes the probability-weighted mean of the labels' values (variants such as
``" 7"`` and ``"7"`` add up; case is ignored); from text, the first label that appears as a word.
:func:`chat_answer` and :func:`completion_answers` read the two response shapes
(``/v1/chat/completions`` and ``/v1/completions``) into ``(text, top_logprobs)`` pairs.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

from ..params import describe
from .http import MalformedAnswer

#: the first token's alternatives: (token, log-probability) pairs.
TopLogprobs = list[tuple[str, float]]


class LabelScale:
    """Allowed answers, lowest first, each worth ``i / (k - 1)`` (see the module doc)."""

    def __init__(self, labels: Sequence[str]) -> None:
        if len(labels) < 2:
            raise ValueError("a scale needs at least two labels")
        self.labels = [label.lower() for label in labels]
        step = 1.0 / (len(labels) - 1)
        self.values = {label: i * step for i, label in enumerate(self.labels)}
        words = "|".join(re.escape(label) for label in sorted(self.labels, key=len, reverse=True))
        self._pattern = re.compile(rf"(?<!\w)({words})(?!\w)", re.IGNORECASE)

    def from_logprobs(self, top: TopLogprobs) -> tuple[float, float] | None:
        """(probability-weighted value, probability mass on the labels), or ``None`` when no label is among ``top``."""
        mass = 0.0
        weighted = 0.0
        for token, logprob in top:
            value = self.values.get(token.strip().lower())
            if value is not None:
                p = math.exp(logprob)
                mass += p
                weighted += p * value
        if mass <= 0.0:
            return None
        return weighted / mass, mass

    def from_text(self, text: str) -> float | None:
        """The value of the first label in ``text`` (as a whole word), or ``None``."""
        found = self._pattern.search(text)
        return None if found is None else self.values[found.group(1).lower()]


def chat_answer(body: Any) -> tuple[str, TopLogprobs | None]:
    """(text, first-token top logprobs) of a ``/v1/chat/completions`` answer; :class:`MalformedAnswer` otherwise."""
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        raise MalformedAnswer(f"expected a chat completion with choices[0].message.content, got {describe(body)}") from None
    if not isinstance(text, str):
        raise MalformedAnswer(f"expected text in choices[0].message.content, got {describe(text)}")
    top = None
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    if logprobs is not None and not isinstance(logprobs, dict):
        raise MalformedAnswer(f"expected an object or null in choices[0].logprobs, got {describe(logprobs)}")
    content = (logprobs or {}).get("content")
    if content:
        if not isinstance(content, list) or not isinstance(content[0], dict):
            raise MalformedAnswer(f"expected a list of token objects in choices[0].logprobs.content, got "
                                  f"{describe(content)}")
        alternatives = content[0].get("top_logprobs")
        if alternatives is not None and not (isinstance(alternatives, list)
                                             and all(isinstance(a, dict) for a in alternatives)):
            raise MalformedAnswer(f"expected a list of {{token, logprob}} objects in top_logprobs, got "
                                  f"{describe(alternatives)}")
        top = _pairs([(a.get("token"), a.get("logprob")) for a in alternatives or []])
    return text, top


def completion_answers(body: Any, n: int) -> list[tuple[str, TopLogprobs | None]]:
    """(text, first-token top logprobs) per prompt of a ``/v1/completions`` answer to ``n`` prompts, in order."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != n or not all(isinstance(c, dict) for c in choices):
        raise MalformedAnswer(f"expected a completion with {n} choices (one per prompt sent), got {describe(body)}")
    ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c.get("index"), int) else 0)
    out = []
    for choice in ordered:
        text = choice.get("text")
        if not isinstance(text, str):
            raise MalformedAnswer(f"expected text in choices[].text, got {describe(text)}")
        logprobs = choice.get("logprobs")
        if logprobs is not None and not isinstance(logprobs, dict):
            raise MalformedAnswer(f"expected an object or null in choices[].logprobs, got {describe(logprobs)}")
        tops = (logprobs or {}).get("top_logprobs")
        first = tops[0] if isinstance(tops, list) and tops else None
        if first is not None and not isinstance(first, dict):
            raise MalformedAnswer(f"expected a {{token: logprob}} object in logprobs.top_logprobs, got {describe(first)}")
        out.append((text, _pairs(list(first.items())) if first else None))
    return out


#: a log-probability this far above 0 is a rounding error (read as 0); further is malformed
_LOGPROB_SLACK = 1e-3


def _pairs(items: list[tuple[Any, Any]]) -> TopLogprobs | None:
    """(token, log-probability) pairs, ``None`` when there are none; :class:`MalformedAnswer` for a
    token that is not text or a log-probability that is not a number <= 0 (``-inf`` is p = 0)."""
    pairs = []
    for token, lp in items:
        if not isinstance(token, str):
            raise MalformedAnswer(f"expected a token string in top_logprobs, got {describe(token)}")
        if isinstance(lp, bool) or not isinstance(lp, (int, float)) or not lp <= _LOGPROB_SLACK:
            raise MalformedAnswer(f"expected a log-probability (a number <= 0) for token {describe(token)}, "
                                  f"got {describe(lp)}")
        pairs.append((token, min(float(lp), 0.0)))
    return pairs or None
