"""``regex_match``: 1.0 when a regular expression matches the completion, else 0.0 (format checks).

One meaning: a pattern means what the ``regex`` package reads (a superset of Python's ``re``
syntax: ``[[:alpha:]]`` is a POSIX class, ``\\p{L}`` a Unicode property) on every text, short or
long. Python's faster ``re`` engine runs only patterns both engines provably read alike: made of
literal characters, ``.``, sets of characters and ranges, anchors, groups, alternations, repeats
and look-arounds, without case-insensitivity (no ``\\w``, ``\\d``, ``\\b``, POSIX classes or
properties, whose Unicode tables differ between the engines).

A pattern cannot hang a run. Each pattern is analysed once, on construction, on ``regex``'s own
parse tree: every choice the matcher can backtrack over (a repeat whose bounds differ, ``a?``
included, an alternation) multiplies the number of paths it may try. Patterns whose paths grow
exponentially with the text (a repeat of something with choices in it: ``(a+)+``, ``(a|aa)*``,
back-references, conditionals, fuzzy matching) or whose constant factor is huge
(``(?:a?){30}``) always run with a per-text ``timeout_s``; the others run without a timer on texts
short enough that their worst case stays under :data:`STEP_BUDGET` steps, and under it beyond.
A whole call is bounded too: once ``max_call_s`` has passed, the call's remaining texts are not
matched. A text that times out, or is not matched because the call's budget was spent, scores
0.0, is counted in ``last_call_info()`` (``regex_timeouts``, shown in the breakdown) and raises
one :class:`RegexTimeoutWarning` per term. Counted repeats are expanded by the engine when the
pattern compiles, so a pattern whose counts expand to more than :data:`MAX_EXPANSION` copies
(``a{10000000}``) is refused when the config loads.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import regex

from ..backend import call_dtype
from ..params import Param, describe
from ..registry import register
from ._text import TextReward

#: Worst-case backtracking steps a pattern may take on one text without a timer.
STEP_BUDGET = 10_000_000
#: Most copies counted repeats may expand to when a pattern compiles (``x{n}`` nested multiply).
MAX_EXPANSION = 100_000
#: Longest time limit accepted (the engine's timer misreads huge ones as already expired).
MAX_SECONDS = 3600.0
#: Repeats with more possible counts than this are priced as a factor of the text's length.
_SMALL_RANGE = 64


class RegexTimeoutWarning(RuntimeWarning):
    """A text took longer than ``timeout_s`` to match, or the call's ``max_call_s`` was spent; it
    scored 0.0 (see ``regex_timeouts``)."""


def parse_tree(pattern: str) -> Any | None:
    """``regex``'s parse tree of ``pattern`` (its internal node objects), or ``None`` when the
    internals are not available or the pattern does not parse."""
    try:
        from regex import _regex_core as core

        global_flags = 0
        for _ in range(4):  # a global flag found mid-pattern restarts the parse, as regex.compile does
            source = core.Source(pattern)
            info = core.Info(global_flags, source.char_type, {})
            info.guess_encoding = core.UNICODE
            source.ignore_space = bool(info.flags & core.VERBOSE)
            try:
                tree = core._parse_pattern(source, info)
            except core._UnscopedFlagSet:
                global_flags = info.global_flags
                continue
            return tree if source.at_end() else None
    except Exception:  # noqa: BLE001 - internals changed or a syntax error: no analysis (everything timed)
        return None
    return None


def _children(node: Any) -> list[Any]:
    for attr in ("items", "branches"):
        if isinstance(getattr(node, attr, None), list):
            return list(getattr(node, attr))
    sub = getattr(node, "subpattern", None)
    return [] if sub is None else [sub]


def expansion(node: Any) -> int:
    """How many node copies compiling the tree makes: counted repeats multiply their body."""
    name = type(node).__name__
    size = 1 + sum(expansion(child) for child in _children(node))
    if name in ("GreedyRepeat", "LazyRepeat", "PossessiveRepeat"):
        count = node.max_count if node.max_count is not None else node.min_count + 1
        size = 1 + max(1, count) * (size - 1)
    return size


_SEQUENCES = {"Sequence"}
_WRAPPERS = {"Group", "Atomic", "LookAround"}
_REPEATS = {"GreedyRepeat", "LazyRepeat", "PossessiveRepeat"}
#: nodes that may force exponential backtracking whatever surrounds them
_RISKY = {"RefGroup", "Conditional", "LookAroundConditional", "CallGroup", "CallRef", "Fuzzy", "StringSet"}


def _paths(node: Any) -> tuple[float, int] | None:
    """``(c, k)``: the matcher tries at most about ``c * (n + 1) ** k`` paths through ``node`` on a
    text of ``n`` characters; ``None`` when the number can grow exponentially with ``n``."""
    name = type(node).__name__
    if name in _RISKY:
        return None
    if name in _SEQUENCES or name in _WRAPPERS:
        c, k = 1.0, 0
        for child in _children(node):
            part = _paths(child)
            if part is None:
                return None
            c, k = c * part[0], k + part[1]
        return c, k
    if name == "Branch":
        parts = [_paths(child) for child in node.branches]
        if any(part is None for part in parts):
            return None
        return sum(p[0] for p in parts), max(p[1] for p in parts)  # type: ignore[index]
    if name in _REPEATS:
        body = _paths(node.subpattern)
        if body is None:
            return None
        low, high = node.min_count, node.max_count
        if body == (1.0, 0):  # one way to match the body: only the count is chosen
            if high is None or high - low + 1 > _SMALL_RANGE:
                return 1.0, 1
            return float(high - low + 1), 0
        if high is None:  # a repeat of something with choices in it: exponential in the text's length
            return None
        c = (high - low + 1) * body[0] ** high
        return (c, body[1] * high) if math.isfinite(c) else (math.inf, 0)
    if _children(node):  # a container this analysis does not know
        return None
    return 1.0, 0  # characters, sets, properties, strings, anchors, boundaries


def max_fast_length(pattern: str, fullmatch: bool = False) -> int:
    """The longest text on which ``pattern`` takes at most :data:`STEP_BUDGET` steps at worst
    (``search`` also tries every start position), or -1 when no length is safe."""
    tree = parse_tree(pattern)
    paths = None if tree is None else _paths(tree)
    if paths is None:
        return -1
    c, k = paths
    degree = max(1, k + (0 if fullmatch else 1))  # search also tries every start position
    if c > STEP_BUDGET:
        return -1
    return int(math.floor((STEP_BUDGET / c) ** (1.0 / degree))) - 1


#: regex parse-tree nodes both engines read alike (plain code points, anchors, structure)
_PLAIN_NODES = {"Sequence", "Branch", "Group", "Atomic", "LookAround", "GreedyRepeat", "LazyRepeat", "PossessiveRepeat",
                "Character", "String", "Literal", "Range", "SetUnion", "Any", "AnyAll", "StartOfString",
                "EndOfString", "EndOfStringLine", "StartOfLine", "EndOfLine"}


def same_in_re(pattern: str) -> bool:
    """Whether Python's ``re`` reads ``pattern`` exactly as ``regex`` does (see the module doc):
    both parse it into nothing but plain code points, sets of them, anchors and structure."""
    tree = parse_tree(pattern)
    return tree is not None and _plain_in_regex(tree) and _plain_in_re(pattern)


def _plain_in_regex(node: Any) -> bool:
    if type(node).__name__ not in _PLAIN_NODES or getattr(node, "case_flags", 0):
        return False
    members = getattr(node, "items", []) if type(node).__name__ == "SetUnion" else []
    return all(_plain_in_regex(child) for child in [*_children(node), *members])


def _plain_in_re(pattern: str) -> bool:
    try:
        from re import _constants as c, _parser as parser

        parsed = parser.parse(pattern)
    except Exception:  # noqa: BLE001 - re refuses it, or its internals changed
        return False
    if parsed.state.flags & (c.SRE_FLAG_IGNORECASE | c.SRE_FLAG_LOCALE):
        return False
    todo = [parsed]
    while todo:
        for op, av in todo.pop():
            parts = _re_parts(c, op, av)
            if parts is None:
                return False
            todo.extend(parts)
    return True


def _re_parts(c: Any, op: Any, av: Any) -> list[Any] | None:
    """The sub-patterns of one item of ``re``'s parse to check further; ``None`` when it is not plain."""
    if op in (c.LITERAL, c.NOT_LITERAL, c.ANY):
        return []
    if op == c.IN:
        return [] if all(kind in (c.LITERAL, c.RANGE, c.NEGATE) for kind, _ in av) else None
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        return [av[2]]
    if op == c.SUBPATTERN:
        return None if av[1] & c.SRE_FLAG_IGNORECASE else [av[3]]
    if op == c.BRANCH:
        return list(av[1])
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [av[1]]
    if op == getattr(c, "ATOMIC_GROUP", None):
        return [av]
    if op == c.AT:
        return [] if av in (c.AT_BEGINNING, c.AT_BEGINNING_STRING, c.AT_END, c.AT_END_STRING) else None
    return None


def _pattern_param() -> Param:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError("a regular expression (a non-empty string)")
        tree = parse_tree(value)
        if tree is not None:
            copies = expansion(tree)
            if copies > MAX_EXPANSION:
                raise ValueError(f"a regular expression whose counted repeats expand to at most {MAX_EXPANSION:,} "
                                 f"copies (this one expands to {copies:,}; use an unbounded repeat such as + or "
                                 f"{{n,}} instead)")
        elif any(int(n) > MAX_EXPANSION for n in regex.findall(r"\{\s*(\d+)", value)):
            raise ValueError(f"a regular expression with counted repeats of at most {MAX_EXPANSION:,}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                regex.compile(value)
        except (regex.error, ValueError, OverflowError) as exc:
            raise ValueError(f"a regular expression that compiles (regex: {exc})") from None
        return value

    return dataclasses.replace(Param.string(doc="regular expression (the regex package's syntax, a superset of "
                                                "Python's re)"),
                               expected="a regular expression", check=check)


def _compiled(pattern: str, mode: str) -> Callable[..., Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return getattr(regex.compile(pattern), mode)


@register("regex_match")
class RegexMatch(TextReward):
    """1.0 if ``pattern`` matches the completion (``search`` anywhere, or ``fullmatch``), else 0.0.

    For format checks (``"^<answer>.*</answer>$"``). Patterns use the ``regex`` package's syntax.
    No pattern can hang a run: see the module docstring (``timeout_s`` per text, ``max_call_s``
    per call; texts not matched in time score 0.0 and are reported as ``regex_timeouts`` in the
    breakdown). No monotone direction: appending text can make or break a match.
    """

    params = {
        "pattern": _pattern_param(),
        "mode": Param.choice(("search", "fullmatch"), "search", "search: a match anywhere; fullmatch: the whole text"),
        "timeout_s": Param.between(0.001, MAX_SECONDS, 0.05,
                                   "time limit per text for patterns that may backtrack catastrophically"),
        "max_call_s": Param.between(0.001, MAX_SECONDS, 1.0,
                                    "time budget of one call, all its texts: once spent, the remaining texts score "
                                    "0.0 (counted as regex_timeouts)"),
    }
    output_range = (0.0, 1.0)

    def _validate(self) -> None:
        self._compile()
        #: texts up to this length run without a timer
        self.max_fast_length = max_fast_length(self.pattern, self.mode == "fullmatch")
        self._timeouts = 0
        self._warned = False

    def _compile(self) -> None:
        self._bounded = _compiled(self.pattern, self.mode)
        #: no timer: only on texts up to max_fast_length; Python's re when it reads the pattern alike
        self._fast = getattr(re.compile(self.pattern), self.mode) if same_in_re(self.pattern) else self._bounded

    def _timed_out(self, text: str, why: str) -> float:
        self._timeouts += 1
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.name}: pattern {describe(self.pattern)} {why} on a text of {len(text)} characters; "
                          "it scores 0.0 (counted as regex_timeouts)", RegexTimeoutWarning, stacklevel=3)
        return 0.0

    def _match(self, text: str, limit: float) -> float:
        """1.0 or 0.0 for one text, matched without a timer when short enough, else within ``limit`` s."""
        if len(text) <= self.max_fast_length:
            return 1.0 if self._fast(text) else 0.0
        try:
            return 1.0 if self._bounded(text, timeout=limit) else 0.0
        except TimeoutError:
            return self._timed_out(text, f"took over {limit:g} s (timeout_s={self.timeout_s:g})")

    def score(self, text: str) -> float:
        return self._match(text, min(self.timeout_s, self.max_call_s))

    def _scores(self, texts: Sequence[str]) -> list[float]:
        """Each text's score; once the call's ``max_call_s`` is spent the rest are not matched (the
        clock is read before every timed text and every 8th untimed one: those are bounded)."""
        clock, fast, limit, timeout = time.perf_counter, self._fast, self.max_fast_length, self.timeout_s
        deadline = clock() + self.max_call_s
        spent = f"was not matched: the call's max_call_s={self.max_call_s:g} s was spent"
        scores: list[float] = []
        append = scores.append
        for i, text in enumerate(texts):
            if len(text) <= limit and (i & 7 or clock() < deadline):
                append(1.0 if fast(text) else 0.0)
                continue
            left = deadline - clock()
            append(self._timed_out(text, spent) if left <= 0.0 else self._match(text, min(timeout, left)))
        return scores

    def compute(self, x: Any, terminated: Any, truncated: Any) -> Any:
        self._timeouts = 0
        return np.array(self._scores(x["completion"]), dtype=call_dtype(np.float64))

    def scalar_fn(self) -> Callable[..., float]:
        """``score`` on one ``str``; short texts go to the engine directly."""
        fast, limit, score = self._fast, self.max_fast_length, self.score
        component = self

        def one_env(completion: str, terminated: bool, truncated: bool) -> float:
            component._timeouts = 0
            if len(completion) <= limit:
                return 1.0 if fast(completion) else 0.0
            return score(completion)

        return one_env

    def last_call_info(self) -> dict[str, float]:
        """``regex_timeouts``: texts of the last call not matched in time (scored 0.0)."""
        return {"regex_timeouts": float(self._timeouts)}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_fast"], state["_bounded"]  # compiled patterns' bound methods: rebuilt on load
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compile()
