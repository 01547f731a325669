"""What a probe is, and where a row's control keeps its final answer.

A probe is a completion built from a row that should be paid less than the row's control. Its
``verdict`` says what its construction knows: ``WRONG`` (built to be wrong: the oracle need not
confirm it), ``KEEPS`` (built to keep the control's substance: it must not be paid *more* than the
control) or ``UNKNOWN`` (only the gold term can say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .rows import Row

WRONG, KEEPS, UNKNOWN = "wrong", "keeps", "unknown"

#: a number as an answer is written: optional sign, ASCII digits, thousands commas, a decimal part
NUMBER = re.compile(r"(?<![\w.])-?[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?(?![0-9])")
BOXED = "\\boxed{"


@dataclass(frozen=True)
class Probe:
    """One completion to try, the family that built it, and what its construction knows."""

    text: str
    family: str
    verdict: str = WRONG


@dataclass(frozen=True)
class AnswerSpan:
    """Where the control writes its final answer: ``control[start:end]``."""

    start: int
    end: int
    text: str

    def replaced(self, control: str, new: str) -> str:
        """The control with its final answer replaced by ``new``."""
        return control[:self.start] + new + control[self.end:]


def number_value(text: str) -> float | None:
    """``text`` read as one number (thousands commas allowed), else None."""
    cleaned = text.strip().replace(",", "")
    if not re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?", cleaned):
        return None
    return float(cleaned)


def boxed_span(text: str) -> tuple[int, int] | None:
    """The content span of the last closed ``\\boxed{...}`` (braces balanced), else None: one pass
    over the braces with a stack, so unclosed openers cost nothing more (linear in the text)."""
    stack: list[int | None] = []  # content start of a boxed opener, None for a plain brace
    best: tuple[int, int] | None = None
    for m in _BRACES.finditer(text):
        token = m.group()
        if token == "}":
            if stack:
                opened = stack.pop()
                if opened is not None and (best is None or opened > best[0]):
                    best = (opened, m.start())
        else:
            stack.append(m.end() if token == BOXED else None)
    return best


_BRACES = re.compile(r"\\boxed\{|\{|\}")


def answer_span(row: Row) -> AnswerSpan | None:
    """The control's final answer: the last occurrence of the reference, else the last ``\\boxed{}``,
    else what follows the last ``####``, else the last number; None when there is none."""
    control, reference = row.control, row.reference
    if reference and reference.strip():
        found = find_reference(control, reference.strip())
        if found is not None:
            return AnswerSpan(found[0], found[1], control[found[0]:found[1]])
    boxed = boxed_span(control)
    if boxed is not None and boxed[1] > boxed[0]:
        return AnswerSpan(boxed[0], boxed[1], control[boxed[0]:boxed[1]])
    marker = control.rfind("####")
    if marker >= 0:
        rest = control[marker + 4:]
        stripped = rest.strip()
        if stripped:
            start = marker + 4 + rest.index(stripped)
            return AnswerSpan(start, start + len(stripped), stripped)
    numbers = list(NUMBER.finditer(control))
    if numbers:
        last = numbers[-1]
        return AnswerSpan(last.start(), last.end(), last.group())
    return None


def find_reference(text: str, reference: str) -> tuple[int, int] | None:
    """The span of the last place ``text`` states ``reference``: a number equal to it (numbers
    compared by value, so ``1,000`` states ``1000``), or the reference's text as a whole word,
    ignoring case. None when it is nowhere."""
    value = number_value(reference)
    if value is not None:
        last = None
        for m in NUMBER.finditer(text):
            if number_value(m.group()) == value:
                last = (m.start(), m.end())
        return last
    pattern = re.compile(rf"(?<!\w){re.escape(reference)}(?!\w)", re.IGNORECASE)
    last = None
    for m in pattern.finditer(text):
        last = (m.start(), m.end())
    return last


def states_reference(text: str, reference: str | None) -> bool | None:
    """Whether ``text`` states the reference anywhere; None without a reference."""
    if reference is None or not reference.strip():
        return None
    return find_reference(text, reference.strip()) is not None
