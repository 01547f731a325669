"""Shared parsing for the instruction-constraint components (``keywords``, ``json_keys``, ...).

A constraint's per-sample value comes from a dataset column: a list of words or keys is one
string, items separated by ``|`` (``"river|stone"``; ``|`` because ``,`` may itself be an item).
An empty string means the sample carries no such constraint, and the term scores 1.0 for it.
"""

from __future__ import annotations

import re

#: a word as IFEval counts them (nltk's ``RegexpTokenizer(r"\w+")``): a run of word characters
WORD = re.compile(r"\w+")


def items(text: str) -> list[str]:
    """The non-empty, stripped ``|``-separated items of a column value (``"a | b|"`` -> ``["a", "b"]``)."""
    return [item.strip() for item in text.split("|") if item.strip()]


def count_words(text: str) -> int:
    """Words in ``text``: runs of word characters (so ``"don't"`` is two, ``"-"`` none)."""
    return len(WORD.findall(text))
