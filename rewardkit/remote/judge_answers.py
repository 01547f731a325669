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
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice, dict) else None
    if content:
        first = content[0] if isinstance(content, list) else None
        alternatives = first.get("top_logprobs") if isinstance(first, dict) else None
        top = _pairs([(a.get("token"), a.get("logprob")) for a in alternatives if isinstance(a, dict)]
                     if isinstance(alternatives, list) else [])
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
        first = None
        if isinstance(logprobs, dict) and isinstance(logprobs.get("top_logprobs"), list) and logprobs["top_logprobs"]:
            first = logprobs["top_logprobs"][0]
        out.append((text, _pairs(list(first.items())) if isinstance(first, dict) else None))
    return out


def _pairs(items: list[tuple[Any, Any]]) -> TopLogprobs | None:
    """Well-formed (token, finite logprob) pairs; ``None`` when there are none."""
    pairs = [(token, float(lp)) for token, lp in items
             if isinstance(token, str) and isinstance(lp, (int, float)) and not isinstance(lp, bool)
             and lp == lp and lp != math.inf]
    return pairs or None
