"""``regex_match``: 1.0 when a regular expression matches the completion, else 0.0 (format checks).

A pattern that backtracks catastrophically cannot hang a run. Each pattern is analysed once, on
construction, with the standard library's own parser: nested unbounded repeats (``(a+)+``), an
alternation under a repeat (``(a|aa)*``), back-references and repeats inside look-arounds can take
exponential time, and are always run by the ``regex`` package with a per-text ``timeout_s``.
Other patterns take at most about ``len(text) ** k`` steps (``k`` = their repeats, plus one for
``search``'s start positions): texts short enough for that to stay under 10 million steps run
on the standard ``re`` engine at full speed, longer ones under the timeout too. A text that times
out scores 0.0 (no match found within the budget), is counted in ``last_call_info()``
(``regex_timeouts``, shown in the breakdown) and raises one :class:`RegexTimeoutWarning` per term.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from typing import Any, Callable

import regex

from ..params import Param
from ..registry import register
from ._text import TextReward

#: Worst-case backtracking steps a pattern may take on the standard engine without a timeout.
STEP_BUDGET = 10_000_000


class RegexTimeoutWarning(RuntimeWarning):
    """A text took longer than ``timeout_s`` to match; it scored 0.0 (see ``regex_timeouts``)."""


def _pattern_param() -> Param:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError("a regular expression (a non-empty string)")
        for engine in (re, regex):
            try:
                engine.compile(value)
            except (re.error, regex.error) as exc:
                raise ValueError(f"a regular expression that compiles ({engine.__name__}: {exc})") from None
        return value

    return dataclasses.replace(Param.string(doc="regular expression (Python syntax)"),
                               expected="a regular expression", check=check)


def backtracking_degree(pattern: str, fullmatch: bool = False) -> int | None:
    """``k`` such that matching takes at most about ``len(text) ** k`` steps, or ``None`` when the
    pattern may backtrack exponentially (nested repeats, alternation under a repeat,
    back-references, repeats inside look-arounds) or cannot be analysed."""
    try:
        from re import _constants as c, _parser as parser  # the standard library's own parser
    except ImportError:  # another Python: no analysis, every text runs under the timeout
        return None
    repeat_ops = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}

    def walk(items: Any) -> tuple[int, bool, bool]:
        """(repeats, contains an alternation, exponential risk) of a parsed subpattern."""
        repeats, branches, risky = 0, False, False
        for op, av in items:
            if op in repeat_ops:
                _, high, body = av
                inner, inner_branch, inner_risky = walk(body)
                risky |= inner_risky
                if high > 1:
                    repeats += 1
                    risky |= inner > 0 or inner_branch
                else:
                    repeats += inner
                    branches |= inner_branch
            elif op == c.SUBPATTERN:
                inner, inner_branch, inner_risky = walk(av[-1])
                repeats, branches, risky = repeats + inner, branches or inner_branch, risky or inner_risky
            elif op == getattr(c, "ATOMIC_GROUP", None):
                inner, inner_branch, inner_risky = walk(av)
                repeats, branches, risky = repeats + inner, branches or inner_branch, risky or inner_risky
            elif op == c.BRANCH:
                branches = True
                for alternative in av[1]:
                    inner, _, inner_risky = walk(alternative)
                    repeats, risky = repeats + inner, risky or inner_risky
            elif op in (c.ASSERT, c.ASSERT_NOT):
                inner, inner_branch, inner_risky = walk(av[1])
                risky |= inner_risky or inner > 0
                branches |= inner_branch
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS):
                risky = True
        return repeats, branches, risky

    try:
        repeats, _, risky = walk(parser.parse(pattern))
    except Exception:  # noqa: BLE001 - an internal parser that changed: fall back to the timeout
        return None
    return None if risky else max(1, repeats + (0 if fullmatch else 1))


@register("regex_match")
class RegexMatch(TextReward):
    """1.0 if ``pattern`` matches the completion (``search`` anywhere, or ``fullmatch``), else 0.0.

    For format checks (``"^<answer>.*</answer>$"``). Catastrophically backtracking patterns are
    bounded: see the module docstring (``timeout_s`` per text, timeouts score 0.0 and are reported
    as ``regex_timeouts`` in the breakdown). No monotone direction: appending text can make or
    break a match.
    """

    params = {
        "pattern": _pattern_param(),
        "mode": Param.choice(("search", "fullmatch"), "search", "search: a match anywhere; fullmatch: the whole text"),
        "timeout_s": Param.positive(0.05, "time limit per text for patterns that may backtrack catastrophically"),
    }
    output_range = (0.0, 1.0)

    def _validate(self) -> None:
        fullmatch = self.mode == "fullmatch"
        self._fast = getattr(re.compile(self.pattern), self.mode)
        self._bounded = getattr(regex.compile(self.pattern), self.mode)
        degree = backtracking_degree(self.pattern, fullmatch)
        #: texts up to this length run on the standard engine (without a timeout)
        self.max_fast_length = -1 if degree is None else int(math.floor(STEP_BUDGET ** (1.0 / degree)))
        self._timeouts = 0
        self._warned = False

    def score(self, text: str) -> float:
        if len(text) <= self.max_fast_length:
            return 1.0 if self._fast(text) else 0.0
        try:
            return 1.0 if self._bounded(text, timeout=self.timeout_s) else 0.0
        except TimeoutError:
            self._timeouts += 1
            if not self._warned:
                self._warned = True
                warnings.warn(f"{self.name}: pattern {self.pattern!r} took over timeout_s={self.timeout_s} s on a "
                              f"text of {len(text)} characters; it scores 0.0 (counted as regex_timeouts)",
                              RegexTimeoutWarning, stacklevel=2)
            return 0.0

    def compute(self, x: Any, terminated: Any, truncated: Any) -> Any:
        self._timeouts = 0
        return super().compute(x, terminated, truncated)

    def scalar_fn(self) -> Callable[..., float]:
        """``score`` on one ``str``; the fast engine is called directly for short texts."""
        fast, limit, score = self._fast, self.max_fast_length, self.score
        component = self

        def one_env(completion: str, terminated: bool, truncated: bool) -> float:
            component._timeouts = 0
            if len(completion) <= limit:
                return 1.0 if fast(completion) else 0.0
            return score(completion)

        return one_env

    def last_call_info(self) -> dict[str, float]:
        """``regex_timeouts``: texts of the last call that hit ``timeout_s`` (scored 0.0)."""
        return {"regex_timeouts": float(self._timeouts)}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_fast"], state["_bounded"]  # compiled patterns' bound methods: rebuilt on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fast = getattr(re.compile(self.pattern), self.mode)
        self._bounded = getattr(regex.compile(self.pattern), self.mode)
