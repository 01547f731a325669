"""Edits of generated source by token: renaming, dropping ``is None`` tests of values known present,
listing names. Components' inlined snippets pass through here before they join a function."""

from __future__ import annotations

import io
import math
import tokenize
from typing import Iterable, Mapping

_LAYOUT = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)


def rename_names(code: str, mapping: Mapping[str, str]) -> str:
    """``code`` with every name token in ``mapping`` renamed (attributes and strings untouched)."""
    if not mapping:
        return code
    rows = code.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in mapping and not (
                previous is not None and previous.type == tokenize.OP and previous.string == "."):
            edits.append((tok.start[0] - 1, tok.start[1], tok.end[1], mapping[tok.string]))
        if tok.type not in _LAYOUT:
            previous = tok
    for row, start, end, new in reversed(edits):
        rows[row] = rows[row][:start] + new + rows[row][end:]
    return "\n".join(rows)


def known_present(code: str, names: Iterable[str]) -> str:
    """``code`` with ``<name> is None`` read as ``False`` (and ``is not None`` as ``True``) for
    variables known to hold a value, so the compiler drops the test (chained comparisons left alone)."""
    names = set(names)
    skip = _LAYOUT + (tokenize.ENDMARKER,)
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, SyntaxError):
        return code  # left as written: the compiler reports what is wrong with it
    chaining = {"<", ">", "==", ">=", "<=", "!=", "is", "in", "not", "."}
    rows = code.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    for i, tok in enumerate(toks):
        if tok.type != tokenize.NAME or tok.string not in names or (i and toks[i - 1].string in chaining):
            continue
        following = [t.string for t in toks[i + 1:i + 4]]
        if following[:2] == ["is", "None"]:
            last, value = i + 2, "False"
        elif following == ["is", "not", "None"]:
            last, value = i + 3, "True"
        else:
            continue
        if last + 1 < len(toks) and toks[last + 1].string in chaining or toks[last].end[0] != tok.start[0]:
            continue  # a chained comparison, or a test over several lines: left as written
        edits.append((tok.start[0] - 1, tok.start[1], toks[last].end[1], value))
    for row, begin, stop, text in reversed(edits):
        rows[row] = rows[row][:begin] + text + rows[row][stop:]
    return "\n".join(rows)


def names_in(code: str) -> set[str]:
    """Every name token in a snippet of generated code."""
    if not code:
        return set()
    return {tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type == tokenize.NAME}


def is_finite_literal(expr: str) -> bool:
    """Whether a generated weight expression is a plain finite number literal (a constant weight)."""
    try:
        return math.isfinite(float(expr))
    except ValueError:
        return False
