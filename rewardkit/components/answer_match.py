"""``answer_match``: 1.0 when the completion's answer equals the reference, else 0.0.

The answer is the whole completion or the part ``extract`` picks (the last ``\\boxed{...}``, the
number after GSM8K's ``####``, the last number, or a regular expression's group); it is compared
with the reference exactly (normalized text), numerically, or as mathematics (``math-verify``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import operator
import re
import string
import threading
import time
import warnings
from typing import Any, Callable

import numpy as np
import regex

from ..backend import call_dtype, quiet, saturate
from ..errors import ConfigError
from ..params import Param
from ..inputs import IntegerColumn
from ..registry import register
from ._text import TextReward
from . import regex_match as _regex_match
from .regex_match import RegexTimeoutWarning

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


def normalize(text: str) -> str:
    """``exact`` mode's normal form: case-folded, ASCII punctuation removed, runs of whitespace
    made one space, no leading or trailing whitespace (``" The  Answer: 42. "`` -> ``"the answer 42"``)."""
    return _SPACES.sub(" ", text.casefold().translate(_NO_PUNCTUATION)).strip()


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


def _number(text: str) -> float:
    """:func:`final_number` with NaN for no number (compares unequal to everything)."""
    value = final_number(text)
    return _NAN if value is None else value


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` whose braces close (nested braces allowed), or ``None``."""
    end = len(text)
    while True:
        start = text.rfind("\\boxed{", 0, end)
        if start < 0:
            return None
        depth, i = 0, start + len("\\boxed")
        for i in range(start + len("\\boxed"), len(text)):
            char = text[i]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len("\\boxed{"):i]
        end = start  # unclosed: try the one before


def gsm8k_answer(text: str) -> str | None:
    """The number after the first ``####`` (GSM8K's answer line; thousands commas removed), or ``None``."""
    found = _GSM8K.search(text if text.isascii() else text.translate(MINUS_SIGNS))
    return None if found is None else found.group(1).replace(",", "")


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
            if not all(map(str.isascii, texts)):
                texts = [text if text.isascii() else text.translate(MINUS_SIGNS) for text in texts]
            return [None if found is None else found[1].replace(",", "") for found in map(_GSM8K.search, texts)]
        if self.spec == "none":
            return texts
        return [*map(self.fn, texts)]

    def numbers(self, texts: list[str]) -> Any:
        """Each text's answer read as its final number (``numeric`` mode; NaN: no answer, or none
        in it), a float64 array."""
        if self.spec == "gsm8k":
            # searched and read in one pass: the group is a sign, digits and a point, which float()
            # reads as _number does (an infinity where _number has NaN: neither matches anything)
            if not all(map(str.isascii, texts)):
                texts = [text if text.isascii() else text.translate(MINUS_SIGNS) for text in texts]
            return np.array([_NAN if found is None else float(found[1].replace(",", ""))
                             for found in map(_GSM8K.search, texts)], dtype=np.float64)
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


class _MathVerify:
    """``math-verify``'s parse and verify as TRL's ``accuracy_reward`` calls them (imported once)."""

    def __init__(self) -> None:
        try:
            from latex2sympy2_extended import NormalizationConfig
            from math_verify import LatexExtractionConfig, parse, verify
        except ImportError:
            raise ConfigError("expected the math-verify package installed for mode 'math': "
                              "pip install 'rewardkit[math]'", path="params.mode") from None
        self.parse, self.verify = parse, verify
        # the completion is read as TRL reads it: LaTeX, \boxed{} tried first, only anchored answers
        self.answer_config = [LatexExtractionConfig(normalization_config=NormalizationConfig(units=True),
                                                    boxed_match_priority=0, try_extract_without_anchor=False)]

    def equal(self, answer: str, reference: str, whole_completion: bool) -> bool:
        # math-verify's timeouts use signal.alarm, which works only in the main thread (as in TRL)
        main = threading.current_thread() is threading.main_thread()
        if not main:
            logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
            logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
        timeout = 10 if main else None
        gold = self.parse(reference, parsing_timeout=timeout)
        if not gold:
            return False
        if whole_completion:
            got = self.parse(answer, extraction_config=self.answer_config, extraction_mode="first_match",
                             parsing_timeout=timeout)
        else:  # an extracted answer is read like the reference
            got = self.parse(answer, parsing_timeout=timeout)
        return bool(self.verify(gold, got, timeout_seconds=5 if main else None))


@register("answer_match")
class AnswerMatch(TextReward):
    """1.0 if the completion's answer equals ``reference`` (exact text, numeric, or math equivalence), else 0.0.

    ``extract`` picks the answer in the completion: ``none`` (the whole text), ``boxed`` (the
    content of the last ``\\boxed{...}``, nested braces allowed), ``gsm8k`` (the number after
    ``####``), ``last_number``, or a regular expression with exactly one capture group (the group
    of its first match, as ``re.search`` finds it, read as the ``regex`` package reads it, as
    ``regex_match`` reads its patterns; one written only in syntax both engines read alike runs on
    the faster ``re``; one that may backtrack catastrophically runs with a time limit of 50 ms per
    text and 1 s per batched call). No answer found scores 0.0. ``extract_reference`` does the same to the reference (a GSM8K
    ``answer`` column: ``gsm8k``). Then ``mode: exact`` compares both after :func:`normalize`
    (case-folded, ASCII punctuation removed, whitespace collapsed); ``mode: strict`` compares them as
    written (Python's ``==``, as TRL's documented ``\\boxed{}`` example does); ``mode: numeric`` compares
    their final numbers within ``tolerance`` (absolute; Unicode minus signs are minus signs, a
    hyphen between two numbers is not a sign); ``mode: math`` asks ``math-verify`` whether they are
    the same mathematical object, as TRL's ``accuracy_reward`` does (``pip install
    'rewardkit[math]'``; a reference it cannot parse scores 0.0 where TRL returns None). Reads
    ``completion`` and ``reference`` (a dataset column: numbers are read as text).
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
    #: text inputs this component may receive as an ``IntegerColumn`` (set per instance)
    integer_text_inputs: frozenset[str] = frozenset()

    def _validate(self) -> None:
        self._answer = _Extractor(self.extract)
        self._reference = _Extractor(self.extract_reference)
        self._math = _MathVerify() if self.mode == "math" else None
        self.score = self._scorer()  # type: ignore[method-assign]
        if self.mode == "numeric" and self.extract_reference == "none":  # compared as numbers: no digits needed
            self.integer_text_inputs = frozenset({"reference"})

    def _scorer(self) -> Callable[[str, str], float]:
        """``score`` as one closure for this mode and these extractors (no per-call dispatch)."""
        answer_of, reference_of = self._answer.fn, self._reference.fn
        whole_reference = self.extract_reference == "none"
        mode, tolerance, math_verify, whole = self.mode, self.tolerance, self._math, self.extract == "none"

        def score(completion: str, reference: str) -> float:
            answer = answer_of(completion)
            if answer is None:
                return 0.0
            if not whole_reference:
                reference = reference_of(reference)
                if reference is None:
                    return 0.0
            if mode == "numeric":  # plain integers (an answer column, GSM8K's answer) need no scan
                got = float(answer) if answer.isdigit() and answer.isascii() else final_number(answer)
                want = float(reference) if reference.isdigit() and reference.isascii() else final_number(reference)
                return 1.0 if got is not None and want is not None and abs(got - want) <= tolerance else 0.0
            if mode == "strict":
                return 1.0 if answer == reference else 0.0
            if mode == "exact":
                return 1.0 if normalize(answer) == normalize(reference) else 0.0
            return 1.0 if math_verify.equal(answer, reference, whole) else 0.0

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
        comparison pass (an integer reference column compared as its integers, not its digits)."""
        if self.mode == "math":
            return super().compute(x, terminated, truncated)
        completions, references = x["completion"], x["reference"]
        whole_reference = self.extract_reference == "none"
        if self.mode == "strict" and whole_reference:  # each text's answer against its reference, in one pass
            return self._as_call_dtype(self._answer.equal_many(completions, references).astype(np.float64))
        if self.mode == "numeric":
            got = self._answer.numbers(completions)
            want = None
            if references.__class__ is IntegerColumn:  # read as integers (integer_text_inputs)
                try:  # float(i) is float(str(i)), str(i)'s number, for every integer within float range
                    want = np.array(references, dtype=np.float64)  # NumPy's float(i) for each, in C
                except OverflowError:
                    references = references.texts()
            if want is None:
                want = self._reference.numbers(references)
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: no match, as in score
                values = (np.abs(got - want) <= self.tolerance).astype(np.float64)
        else:
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
            values = np.fromiter(equal, dtype=np.bool_, count=n).astype(np.float64)  # bools: cheaper to read
        return self._as_call_dtype(values)

    @staticmethod
    def _as_call_dtype(values: Any) -> Any:
        """float64 ``values`` in the call's float dtype: float32 contexts stay float32 (the dtype
        policy), as TextReward's."""
        dtype = call_dtype(np.float64)
        if dtype != np.float64:
            with quiet():
                values = saturate(values.astype(dtype))
        return values

    def score(self, completion: str, reference: str) -> float:  # replaced per instance by _scorer()
        return self._scorer()(completion, reference)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("score", None)  # a closure: rebuilt on load
        state["_math"] = None  # math-verify's functions are imported again on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.mode == "math":
            self._math = _MathVerify()
        self.score = self._scorer()  # type: ignore[method-assign]
