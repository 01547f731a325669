"""``answer_match``: 1.0 when the completion's answer equals the reference, else 0.0.

The answer is the whole completion or the part ``extract`` picks (the last ``\\boxed{...}``, the
number after GSM8K's ``####``, the last number, or a regular expression's group); it is compared
with the reference exactly (normalized text), numerically, or as mathematics (``math-verify``).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
import string
import threading
import time
import warnings
from itertools import repeat
from typing import Any, Callable

import numpy as np
import regex

from ..backend import call_dtype, quiet, saturate
from ..errors import ConfigError
from ..params import Param
from ..inputs import IntegerColumn
from ..registry import register
from ._text import TextReward
from . import _math_bound
from . import regex_match as _regex_match
from .regex_match import RegexTimeoutWarning


class MathBoundWarning(RuntimeWarning):
    """A ``mode: math`` item was refused before sympy, or cut off at its time bound (scored 0.0)."""

#: A decimal number: sign, digits with optional thousands commas, fraction, exponent.
NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
#: Characters that write a minus sign (U+2212 minus, U+FE63 small and U+FF0D fullwidth
#: hyphen-minus, U+2796 heavy minus), read as ASCII ``-``.
MINUS_SIGNS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-", "\u2796": "-"})
_SPACES = re.compile(r"\s+")
#: ASCII punctuation removed by the exact comparison (str.translate: one C pass per text)
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)
_NAN = float("nan")
#: GSM8K's final answer: the number after ``####``
_GSM8K = re.compile(r"####\s*([-+]?[\d,]*\.?\d+)")
EXTRACTORS = ("none", "boxed", "gsm8k", "last_number")
#: time limit per text of an ``extract`` regular expression that may backtrack catastrophically
EXTRACT_TIMEOUT_S = 0.05
#: time budget of one batched call for such a pattern, all its texts together
EXTRACT_CALL_S = 1.0


#: where a number's sign, decimal point or grouping comma is written (``-5``, ``69.1``, ``1,234``):
#: texts without one take the plain normal form
_NUMBER_MARKS = re.compile(r"-\.?\d|\.\d|\d,\d")
#: a number as ``normalize`` keeps it: a sign, digits in thousands groups or plain, a fraction
_NORMAL_NUMBER = re.compile(r"(-?)(\d{1,3}(?:,\d{3})+(?!\d)|\d+|(?=\.\d))((?:\.\d+)?)")


def normalize(text: str) -> str:
    """``exact`` mode's normal form: case-folded, ASCII punctuation removed, runs of whitespace
    made one space, no leading or trailing whitespace (``" The  Answer: 42. "`` -> ``"the answer 42"``).

    Numbers keep what makes them that number: a minus sign (``-175`` is not ``175``; any Unicode
    minus reads as ``-``), a decimal point between digits (``69.1`` is not ``691``); thousands
    commas go (``1,234`` is ``1234``). A hyphen right after a digit is not a sign, and digits that
    punctuation separated stay apart (``5-7`` and ``1,2`` read ``5 7`` and ``1 2``, not ``57``, ``12``)."""
    text = text.casefold()
    if not text.isascii():
        text = text.translate(MINUS_SIGNS)
    if _NUMBER_MARKS.search(text) is None:
        return _SPACES.sub(" ", text.translate(_NO_PUNCTUATION)).strip()
    pieces: list[str] = []
    last, digit_last = 0, False  # digit_last: what is written so far ends with a digit
    for found in _NORMAL_NUMBER.finditer(text):
        start = found.start()
        before = text[last:start].translate(_NO_PUNCTUATION)
        sign, digits, fraction = found.groups()
        if sign and start > 0 and text[start - 1].isdigit():
            sign = ""  # "5-7": a hyphen between numbers
        if before:
            digit_last = before[-1].isdigit()
        if digit_last and not sign:
            before += " "  # digits that punctuation separated stay apart
        pieces += (before, sign, digits.replace(",", ""), fraction)
        last, digit_last = found.end(), True
    pieces.append(text[last:].translate(_NO_PUNCTUATION))
    return _SPACES.sub(" ", "".join(pieces)).strip()


def last_number_text(text: str) -> str | None:
    """The last number written in ``text`` as written (Unicode minus signs made ``-``), or ``None``.

    A sign directly after a number (spaces allowed between) is a hyphen or a subtraction, not a
    sign: the last number of ``"between 5-7"`` is ``7``, of ``"= −5"`` is ``-5``.
    """
    if not text.isascii():  # a C scan; translating with a mapping costs a lookup per character
        text = text.translate(MINUS_SIGNS)
    last = None
    for last in NUMBER.finditer(text):  # noqa: B007 - the last match is kept
        pass
    if last is None:
        return None
    found = last.group()
    if found[0] in "+-":
        before = text[:last.start()].rstrip()
        if before and before[-1].isdigit():
            found = found[1:]
    return found


def final_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands commas allowed, see :func:`last_number_text`), or ``None``."""
    if text.isdigit() and text.isascii():  # a plain integer (an answer column): no scan
        return float(text)
    found = last_number_text(text)
    if found is None:
        return None
    try:
        value = float(found.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


#: from here on float64 cannot tell every two integers apart (2**53 + 1 reads as 2**53)
_EXACT_FLOAT = float(2 ** 53)


def exact_number(text: str) -> int | float | None:
    """The last number in ``text`` (see :func:`last_number_text`): an ``int`` when written without
    a point or exponent (compared exactly: ``123456789012345678`` is not ``...679``), else a
    float; ``None`` for no number or one beyond the float range."""
    if text.isdigit() and text.isascii():
        found = text
    else:
        found = last_number_text(text)
        if found is None:
            return None
        found = found.replace(",", "")
    try:
        if "." in found or "e" in found or "E" in found:
            value = float(found)
            return value if math.isfinite(value) else None
        if len(found) > 310:  # beyond the float range (as final_number reads it): no number
            return None
        integer = int(found)
        return integer if abs(integer) <= _FLOAT_MAX_INT else None
    except ValueError:
        return None


_FLOAT_MAX_INT = int(np.finfo(np.float64).max)


def numbers_match(answer: str, reference: str, tolerance: float) -> bool:
    """``numeric`` mode on one pair: both final numbers found and within ``tolerance`` (two
    integers compared exactly, an integer and a float in float64)."""
    got, want = exact_number(answer), exact_number(reference)
    if got is None or want is None:
        return False
    if got.__class__ is int and want.__class__ is int:
        return abs(got - want) <= tolerance
    return abs(float(got) - float(want)) <= tolerance


def _number(text: str) -> float:
    """:func:`final_number` with NaN for no number (compares unequal to everything)."""
    value = final_number(text)
    return _NAN if value is None else value


#: what the one pass of :func:`last_boxed`'s fallback reads: a box's opening or a brace
_BOX_TOKENS = re.compile(r"\\boxed\{|[{}]")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` whose braces close (nested braces allowed), or ``None``.

    Linear in the text: the last box is scanned to its closing brace (the common case: the answer
    ends the text); if it never closes, one pass over every brace of the text finds the last box
    that does (an unclosed box is not rescanned to the end for each earlier one)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for i in range(start + 6, len(text)):  # text[start + 6] is the box's "{"
        char = text[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start + 7:i]
    return _last_closed_box(text, start)


def _last_closed_box(text: str, end: int) -> str | None:
    """The content of the box starting last before ``end`` whose braces close, in one pass over
    the braces of ``text`` (a stack of the open ones: a ``}`` closes the latest open brace, as the
    scan from a box's own start would find)."""
    stack: list[int] = []  # start of each open brace's box, -1 for a plain brace
    best_start, best = -1, None
    for token in _BOX_TOKENS.finditer(text):
        kind = token.group()
        if kind == "}":
            if stack:
                opened = stack.pop()
                if opened > best_start and opened < end:
                    best_start, best = opened, text[opened + 7:token.start()]
        else:
            stack.append(token.start() if len(kind) > 1 else -1)
    return best


def gsm8k_answer(text: str) -> str | None:
    """The number after the last ``####`` followed by one (GSM8K's answer line, as veRL's
    ``gsm8k`` scorer reads it: a completion that corrects itself ends with its final answer;
    thousands commas removed), or ``None``. Linear: each ``####`` is tried once, from the end."""
    if not text.isascii():
        text = text.translate(MINUS_SIGNS)
    end = len(text)
    while (start := text.rfind("####", 0, end)) >= 0:
        found = _GSM8K.match(text, start)
        if found is not None:
            return found.group(1).replace(",", "")
        end = start + 3  # a run of more than four "#" is tried at each of its positions
    return None


def _gsm8k_many(texts: list[str]) -> list[Any]:
    """For each text the match of GSM8K's answer after its last ``####`` (``None``: none), or the
    text's :func:`gsm8k_answer` (a ``str``) where the last ``####`` has no number after it and an
    earlier one may (rare: then the text is read again). A search from the end and one match per
    text for the common case."""
    starts = [*map(str.rfind, texts, repeat("####"))]
    match = _GSM8K.match
    founds = [match(text, start) if start >= 0 else None for text, start in zip(texts, starts, strict=True)]
    if founds.count(None) != starts.count(-1):  # a last "####" without its number (or a Unicode minus)
        founds = [gsm8k_answer(text) if found is None and start >= 0 else found
                  for text, start, found in zip(texts, starts, founds, strict=True)]
    return founds


def _gsm8k_numbers(texts: list[str]) -> Any:
    """:func:`gsm8k_answer` of each text read with ``float()`` (NaN: none), a float64 array. The
    group is a sign, digits and a point, which float() reads as _number does (an infinity where
    _number has NaN: neither matches anything)."""
    return np.array([_NAN if found is None else float((found if found.__class__ is str else found[1]).replace(",", ""))
                     for found in _gsm8k_many(texts)], dtype=np.float64)


def _extract_param() -> Param:
    pattern_check = _regex_match._pattern_param().check  # regex_match's own checks (compiles, bounded size)

    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError("'none', 'boxed', 'gsm8k', 'last_number' or a regular expression with one group")
        if value in EXTRACTORS:
            return value
        value = pattern_check(value)
        groups = _compile(value).groups
        if groups != 1:
            raise ValueError(f"a regular expression with exactly one capture group (its first match's group is "
                             f"the answer), not {groups}")
        return value

    return dataclasses.replace(
        Param.string("none", "what the answer is: none (the whole text), boxed, gsm8k, last_number, or a regex "
                             "with one group"),
        expected="'none', 'boxed', 'gsm8k', 'last_number' or a regular expression with one group", check=check)


def _compile(pattern: str) -> Any:
    with warnings.catch_warnings():  # regex warns of syntax whose meaning may change in later versions
        warnings.simplefilter("ignore", FutureWarning)
        return regex.compile(pattern)


def _fast_length(pattern: str) -> int:
    """The longest text the pattern searches without a timer, as regex_match bounds its own
    patterns (-1: every text runs under the time limit)."""
    bound = getattr(_regex_match, "max_fast_length", None)
    if bound is not None:
        return bound(pattern)
    degree = _regex_match.backtracking_degree(pattern)
    return -1 if degree is None else int(math.floor(_regex_match.STEP_BUDGET ** (1.0 / degree)))


def _whole(text: str) -> str:
    return text


class _Extractor:
    """One ``extract`` setting as a function ``fn(text) -> answer or None`` (and ``many(texts)``).

    A regular expression runs without a timer on texts up to :func:`_fast_length`, else on the
    ``regex`` package within ``EXTRACT_TIMEOUT_S`` per text and, in a batched call,
    ``EXTRACT_CALL_S`` for all of the call's texts (``deadline``). The untimed search uses the
    standard ``re`` when both engines read the pattern alike (``regex_match.same_in_re``, decided
    once per pattern, as ``regex_match`` decides it), else ``regex`` too: a pattern means one thing
    on every text."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._search = None if spec in EXTRACTORS else _compile(spec).search
        self._max_fast = -1 if self._search is None else _fast_length(spec)
        #: the untimed search: ``re``'s when both engines read the pattern alike (faster), else ``regex``'s
        self._fast_search = self._search
        if self._search is not None and _regex_match.same_in_re(spec):
            try:
                self._fast_search = re.compile(spec).search
            except re.error:
                pass
        self._warned = False
        #: end of the current batched call's time budget (``None``: no call budget)
        self.deadline: float | None = None
        #: the extraction as one function (the named ones called directly)
        self.fn = {"none": _whole, "boxed": last_boxed, "gsm8k": gsm8k_answer,
                   "last_number": last_number_text}.get(spec) or self._regex_fn()

    def _regex_fn(self) -> Callable[[str], str | None]:
        """The first match's group of the ``extract`` pattern."""
        search, limit, bounded = self._fast_search, self._max_fast, self._bounded

        def group(text: str) -> str | None:
            if len(text) <= limit:
                found = search(text)
                return None if found is None else found.group(1)
            return bounded(text)

        return group

    def many(self, texts: list[str]) -> list[str | None]:
        """``fn`` on each text (the same answers), with no Python call per text where it can."""
        if self._search is not None:
            if texts and max(map(len, texts)) <= self._max_fast:  # every text untimed: one search per text
                return [None if found is None else found[1] for found in map(self._fast_search, texts)]
            return [*map(self.fn, texts)]
        if self.spec == "gsm8k":
            return [found if found is None or found.__class__ is str else found[1].replace(",", "")
                    for found in _gsm8k_many(texts)]
        if self.spec == "none":
            return texts
        return [*map(self.fn, texts)]

    def numbers(self, texts: list[str]) -> Any:
        """Each text's answer read as its final number (``numeric`` mode; NaN: no answer, or none
        in it), a float64 array."""
        if self.spec == "gsm8k":
            return _gsm8k_numbers(texts)
        return np.fromiter([_NAN if a is None else float(a) if a.isdigit() and a.isascii() else _number(a)
                            for a in self.many(texts)], dtype=np.float64, count=len(texts))

    def equal_many(self, texts: list[str], wanted: list[str]) -> Any:
        """Whether each text's answer is its reference as written (``strict`` against whole
        references: no answer equals none), a boolean array; ``many`` then ``==``, in one pass
        where every text is searched untimed."""
        if self._search is not None and texts and max(map(len, texts)) <= self._max_fast:
            search = self._fast_search
            return np.array([found is not None and found[1] == reference
                             for found, reference in zip(map(search, texts), wanted, strict=True)], dtype=np.bool_)
        return np.fromiter(map(operator.eq, self.many(texts), wanted), dtype=np.bool_, count=len(texts))

    def _bounded(self, text: str) -> str | None:
        """The group within the time limits; a text not searched in time has no answer."""
        limit = EXTRACT_TIMEOUT_S
        if self.deadline is not None:
            limit = min(limit, self.deadline - time.perf_counter())
            if limit <= 0.0:
                return self._timed_out(text, f"was not searched: the call's {EXTRACT_CALL_S} s were spent")
        try:
            found = self._search(text, timeout=limit)
        except TimeoutError:
            return self._timed_out(text, f"took over {limit:.3g} s")
        return None if found is None else found.group(1)

    def _timed_out(self, text: str, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"answer_match: extract pattern {self.spec!r} {why} on a text of {len(text)} characters; "
                          "no answer was found in it (scored 0.0)", RegexTimeoutWarning, stacklevel=3)
        return None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]


#: outcomes of one ``mode: math`` item counted by the term (see :meth:`AnswerMatch.bound_counts`)
BOUND_COUNTS = ("refused", "timed_out", "over_call_budget", "reference_unparsed")
#: LaTeX that does not change what an answer says, dropped by :func:`plain_math`
_LATEX_SPACING = re.compile(r"\\(?:left|right|displaystyle|[,;:! ])|\$|\s+")
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\{([^{}]*)\}")


def plain_math(text: str) -> str:
    """The normal form ``mode: math`` compares when math-verify cannot parse the reference:
    spacing, ``\\left``/``\\right`` and ``$`` removed, ``\\text{...}`` unwrapped,
    ``\\dfrac``/``\\tfrac`` read as ``\\frac``, case-folded, a final ``.`` dropped. Punctuation
    stays (``(1,2)`` is not ``[1,2]``): text equal in this form is the same answer."""
    text = _LATEX_TEXT.sub(r"\1", text)
    text = _LATEX_SPACING.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return text.casefold().rstrip(".")


#: a completion that ends with its answer stated in words, without LaTeX delimiters ("The answer
#: is 7\\sqrt{3}."): the statement runs to the end of the text, with no sentence after it
_TAIL_ANSWER = re.compile(r"(?i)\banswer\s*(?:is|:)\s*\**\s*((?:[^.\n]|\.(?=\d))+?)\s*\.?\s*$")
#: how much of a completion's end :func:`tail_answer` reads
_TAIL_CHARS = 300


def tail_answer(text: str) -> str | None:
    """The answer a completion states in its last sentence (``... The answer is 960.``), or ``None``:
    ``mode: math``'s reading of a whole completion where neither a ``\\boxed{}`` nor LaTeX in
    delimiters gives one. Nothing may follow the statement (a check after it, ``The answer is 5.
    Check: 5 * 2 = 10``, is no answer: its last number is not what was answered)."""
    found = _TAIL_ANSWER.search(text[-_TAIL_CHARS:])
    return None if found is None else found.group(1)


class _MathTerm:
    """``mode: math`` for one term: items refused before sympy (:func:`_math_bound.refusal`),
    checked in a worker process within the per-item and per-call bounds, a reference math-verify
    cannot parse compared as :func:`plain_math` text; each bounded or unparsed item counted."""

    def __init__(self, whole: bool) -> None:
        import importlib.util

        for module in ("math_verify", "latex2sympy2_extended"):
            if importlib.util.find_spec(module) is None:
                raise ConfigError("expected the math-verify package installed for mode 'math': "
                                  "pip install 'rewardkit[math]'", path="params.mode")
        self.whole = whole
        self.lock = threading.Lock()
        self.counts = dict.fromkeys(BOUND_COUNTS, 0)
        self._warned: set[str] = set()
        self.checker = _math_bound.MathChecker()

    def _count(self, kind: str, n: int, why: str) -> None:
        with self.lock:
            self.counts[kind] += n
            first = kind not in self._warned
            self._warned.add(kind)
        if first:
            warnings.warn(f"answer_match (mode: math): {why}; such items score 0.0 and are counted in "
                          f"bound_counts()[{kind!r}] (this warning is shown once per term and kind)",
                          MathBoundWarning, stacklevel=4)

    def _item(self, answer: str, reference: str) -> tuple[tuple[str, str, bool, str | None] | None, str | None]:
        """The worker's item for one pair, or ``(None, why)`` when the guard refuses it."""
        guarded, box = answer, None
        if self.whole:  # what math-verify reads first: the last box, else the text's end
            box = last_boxed(answer)
            guarded = answer[-_math_bound.MAX_CHARS:] if box is None else box[:_math_bound.MAX_CHARS]
            if box is None:
                box = tail_answer(answer)
        bare = not _math_bound._WORDED.search(reference)
        reason = (_math_bound.refusal(guarded, max_chars=None if self.whole else _math_bound.MAX_CHARS)
                  or _math_bound.refusal(reference, max_chars=_math_bound.MAX_CHARS if bare else None))
        if reason is not None:
            return None, reason
        return (answer, reference, self.whole, box), None

    def scores(self, answers: list[str | None], references: list[str | None]) -> list[float]:
        """1.0 or 0.0 per item (``None``: no answer or no reference, 0.0)."""
        values = [0.0] * len(answers)
        items, where = [], []
        refused = 0
        why = ""
        for i, (answer, reference) in enumerate(zip(answers, references, strict=True)):
            if answer is None or reference is None:
                continue
            item, reason = self._item(answer, reference)
            if item is None:
                refused += 1
                why = why or f"an answer or reference was refused before sympy ({reason})"
                continue
            items.append(item)
            where.append(i)
        if refused:
            self._count("refused", refused, why)
        if not items:
            return values
        outcomes = self.checker.check_many(items)
        timed_out = over_budget = unparsed = 0
        for i, (answer, reference, _, box), outcome in zip(where, items, outcomes, strict=True):
            if outcome == _math_bound.EQUAL:
                values[i] = 1.0
            elif outcome == _math_bound.NO_REFERENCE:
                unparsed += 1
                got = box if self.whole else answer
                values[i] = 1.0 if got is not None and plain_math(got) == plain_math(reference) else 0.0
            elif outcome == "timeout":
                timed_out += 1
            elif outcome == "call_budget":
                over_budget += 1
        if timed_out:
            self._count("timed_out", timed_out,
                        f"an item took over {_math_bound.ITEM_TIMEOUT_S} s in math-verify (its worker was killed)")
        if over_budget:
            self._count("over_call_budget", over_budget,
                        f"a call spent its {_math_bound.CALL_TIMEOUT_S} s in math-verify before every item was checked")
        if unparsed:
            with self.lock:  # not a failure: compared as text, counted without a warning
                self.counts["reference_unparsed"] += unparsed
        return values


@register("answer_match")
class AnswerMatch(TextReward):
    """1.0 if the completion's answer equals ``reference`` (exact text, numeric, or math equivalence), else 0.0.

    ``extract`` picks the answer in the completion: ``none`` (the whole text), ``boxed`` (the
    content of the last ``\\boxed{...}`` whose braces close, nested braces allowed), ``gsm8k`` (the
    number after the last ``####`` followed by one, as veRL's ``gsm8k`` scorer reads it: a
    completion that corrects itself ends with its final answer), ``last_number``, or a regular
    expression with exactly one capture group (the group of its first match, as ``re.search``
    finds it, read as the ``regex`` package reads it, as ``regex_match`` reads its patterns; one
    written only in syntax both engines read alike runs on the faster ``re``; one that may
    backtrack catastrophically runs with a time limit of 50 ms per text and 1 s per batched call).
    The named extractions are linear in the text. No answer found scores 0.0.
    ``extract_reference`` does the same to the reference (a GSM8K ``answer`` column: ``gsm8k``).

    Then ``mode: exact`` compares both after :func:`normalize` (case-folded, ASCII punctuation
    removed, whitespace collapsed, but a number keeps its minus sign and decimal point: ``-175`` is
    not ``175``, ``69.1`` not ``691``); ``mode: strict`` compares them as written (Python's ``==``,
    as TRL's documented ``\\boxed{}`` example does); ``mode: numeric`` compares their final numbers
    within ``tolerance`` (absolute; two integers exactly, whatever their size; Unicode minus signs
    are minus signs, a hyphen between two numbers is not a sign).

    ``mode: math`` asks ``math-verify`` whether they are the same mathematical object (``pip install
    'rewardkit[math]'``). A whole completion is read as TRL's ``accuracy_reward`` reads it (the last
    ``\\boxed{}`` first, else anchored LaTeX such as ``final answer is $x$``); where math-verify
    understands nothing in what that reading chose (``\\boxed{19\\sqrt3}``), the chosen span, else
    the last box's content, else the answer a last sentence states (``The answer is 960.``, with
    nothing after it: a check that follows is no answer) is read as an extracted answer. A reference written
    as bare LaTeX (MATH's ``answer`` column: ``4\\sqrt{2}``, ``[35,39)``, ``\\{1,6,8\\}``), and an
    extracted answer, are wrapped in ``\\boxed{}`` before parsing, as veRL's ``math_verify`` scorer
    does (unwrapped, math-verify reads ``4\\sqrt{2}`` as 4); a reference with ``$`` or ``\\boxed``
    (a worded solution) is parsed as it is. A reference math-verify still cannot parse is compared
    as text (:func:`plain_math`: spacing, ``\\left``/``\\right``, ``\\text{}`` and ``\\dfrac`` read
    away) and counted (``bound_counts()["reference_unparsed"]``), where TRL's ``accuracy_reward``
    returns None for every completion. Bounds, in any thread and in asyncio (math-verify's own
    timeouts need the main thread): an answer over 1,000 characters, or holding a power or
    factorial of more than 100,000 digits (``9^{9^{9}}``), is refused before sympy; math-verify
    runs in a worker process (one per calling thread, reused) killed when an item takes over 5 s
    or the call over 60 s (``_math_bound.ITEM_TIMEOUT_S``, ``CALL_TIMEOUT_S``). An item at a
    bound scores 0.0, is counted in :meth:`bound_counts` and warned of once per term and kind.

    A sample whose reference is ``None`` scores 0.0 (the failure value) and the others are scored
    as usual; TRL's ``accuracy_reward`` returns None there (the sample is left out of the reward),
    veRL's ``gsm8k`` scores 0: a term's value is a number for every sample, so a missing reference
    pays nothing rather than dropping out of a weighted sum. Reads ``completion`` and ``reference``
    (a dataset column: numbers are read as text).
    """

    inputs = {"completion": 0, "reference": 0}
    text_inputs = frozenset({"completion", "reference"})
    params = {
        "mode": Param.choice(("exact", "strict", "numeric", "math"), "exact",
                             "exact: normalized texts equal; strict: texts equal as written; numeric: final numbers "
                             "equal; math: math-verify equivalence"),
        "tolerance": Param.non_negative(1e-6, "numeric mode: largest absolute difference that still matches"),
        "extract": _extract_param(),
        "extract_reference": dataclasses.replace(_extract_param(), doc="the same, applied to the reference"),
    }
    output_range = (0.0, 1.0)
    #: a sample may have no reference (``None``): it scores 0.0, the others as usual
    none_text_inputs = frozenset({"reference"})
    #: text inputs this component may receive as an ``IntegerColumn`` (set per instance)
    integer_text_inputs: frozenset[str] = frozenset()

    def _validate(self) -> None:
        self._answer = _Extractor(self.extract)
        self._reference = _Extractor(self.extract_reference)
        self._math = _MathTerm(self.extract == "none") if self.mode == "math" else None
        self.score = self._scorer()  # type: ignore[method-assign]
        if self.mode == "numeric" and self.extract_reference == "none":  # compared as numbers: no digits needed
            self.integer_text_inputs = frozenset({"reference"})

    def bound_counts(self) -> dict[str, int]:
        """``mode: math`` items scored 0.0 at a bound, since this term was built (or loaded):
        ``refused`` (before sympy: too long, or a power or factorial too large), ``timed_out``
        (over the per-item time, its worker killed), ``over_call_budget`` (not checked: the
        call's time was spent); and ``reference_unparsed``: references math-verify could not
        parse, compared as text instead. All zero in the other modes."""
        if self._math is None:
            return dict.fromkeys(BOUND_COUNTS, 0)
        with self._math.lock:
            return dict(self._math.counts)

    def _scorer(self) -> Callable[[str, str | None], float]:
        """``score`` as one closure for this mode and these extractors (no per-call dispatch)."""
        answer_of, reference_of = self._answer.fn, self._reference.fn
        whole_reference = self.extract_reference == "none"
        mode, tolerance, math_term = self.mode, self.tolerance, self._math

        def score(completion: str, reference: str | None) -> float:
            if reference is None:  # a sample without a reference: the failure value (TRL would skip it)
                return 0.0
            answer = answer_of(completion)
            if answer is None:
                return 0.0
            if not whole_reference:
                reference = reference_of(reference)
                if reference is None:
                    return 0.0
            if mode == "numeric":  # plain integers (an answer column, GSM8K's answer) need no scan
                return 1.0 if numbers_match(answer, reference, tolerance) else 0.0
            if mode == "strict":
                return 1.0 if answer == reference else 0.0
            if mode == "exact":
                return 1.0 if normalize(answer) == normalize(reference) else 0.0
            return math_term.scores([answer], [reference])[0]

        return score

    def compute(self, x: Any, terminated: Any, truncated: Any) -> Any:
        """``score`` over the batch; a regular expression's texts share one time budget."""
        if self._answer._search is None and self._reference._search is None:
            return self._compute(x, terminated, truncated)
        self._answer.deadline = self._reference.deadline = time.perf_counter() + EXTRACT_CALL_S
        try:
            return self._compute(x, terminated, truncated)
        finally:
            self._answer.deadline = self._reference.deadline = None

    def _compute(self, x: Any, terminated: Any, truncated: Any) -> Any:
        """The values ``score`` gives, batch at a time: each extraction over all texts, then one
        comparison pass (an integer reference column compared as its integers, not its digits).
        A ``None`` reference scores 0.0."""
        completions, references = x["completion"], x["reference"]
        missing = None
        if references.__class__ is list and None in references:
            missing = np.array([r is None for r in references], dtype=np.bool_)
            references = ["" if r is None else r for r in references]
        values = self._values(completions, references)
        if missing is not None:
            values[missing] = 0.0
        return self._as_call_dtype(values)

    def _values(self, completions: list[str], references: Any) -> Any:
        """:meth:`_compute`'s float64 values, every reference a text (or an integer column)."""
        whole_reference = self.extract_reference == "none"
        if self.mode == "math":
            answers = self._answer.many(completions)
            wanted = references if whole_reference else self._reference.many(references)
            return np.array(self._math.scores(answers, wanted), dtype=np.float64)
        if self.mode == "strict" and whole_reference:  # each text's answer against its reference, in one pass
            return self._answer.equal_many(completions, references).astype(np.float64)
        if self.mode == "numeric":
            got = self._answer.numbers(completions)
            want = None
            integers = references.__class__ is IntegerColumn
            if integers:  # read as integers (integer_text_inputs)
                try:  # float(i) is float(str(i)), str(i)'s number, for every integer within float range
                    want = np.array(references, dtype=np.float64)  # NumPy's float(i) for each, in C
                except OverflowError:
                    references = references.texts()
                    integers = False
            if want is None:
                want = self._reference.numbers(references)
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: no match, as in score
                values = (np.abs(got - want) <= self.tolerance).astype(np.float64)
                # beyond 2**53 float64 rounds integers together: those items are compared exactly
                wide = np.flatnonzero((np.abs(got) >= _EXACT_FLOAT) | (np.abs(want) >= _EXACT_FLOAT))
            for i in wide.tolist():
                reference = str(references[i]) if integers else references[i]
                values[i] = self.score(completions[i], reference)
            return values
        answers = self._answer.many(completions)
        wanted = references if whole_reference else self._reference.many(references)
        n = len(answers)
        if self.mode == "exact":
            answers = [None if a is None else normalize(a) for a in answers]
            wanted = [None if r is None else normalize(r) for r in wanted]
        if whole_reference:  # references are text: a missing answer (None) equals none of them
            equal = map(operator.eq, answers, wanted)
        else:
            equal = (a is not None and r is not None and a == r for a, r in zip(answers, wanted, strict=True))
        return np.fromiter(equal, dtype=np.bool_, count=n).astype(np.float64)  # bools: cheaper to read

    @staticmethod
    def _as_call_dtype(values: Any) -> Any:
        """float64 ``values`` in the call's float dtype: float32 contexts stay float32 (the dtype
        policy), as TextReward's."""
        dtype = call_dtype(np.float64)
        if dtype != np.float64:
            with quiet():
                values = saturate(values.astype(dtype))
        return values

    def score(self, completion: str, reference: str | None) -> float:  # replaced per instance by _scorer()
        return self._scorer()(completion, reference)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("score", None)  # a closure: rebuilt on load
        state["_math"] = None  # its lock and counts are this process's: a new one on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.mode == "math":
            self._math = _MathTerm(self.extract == "none")
        self.score = self._scorer()  # type: ignore[method-assign]
