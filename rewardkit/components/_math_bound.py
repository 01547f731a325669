"""``answer_match``'s ``mode: math``, bounded in time in any thread and in asyncio.

math-verify's own timeouts use ``signal.alarm``, which works only on the main thread; off it (veRL's
reward thread pool, ``asyncio.to_thread``, a server's request threads) a pathological answer such as
``\\boxed{9^{9^{9}}+1}`` runs sympy for minutes while holding the GIL. Two bounds hold instead:

- :func:`refusal` refuses, before sympy sees it, a text that would make it build a huge number (a
  power or factorial with more than ``MAX_DIGITS`` digits, as a numeric power tower has) or an
  answer longer than ``MAX_CHARS``;
- :class:`MathChecker` runs math-verify in a worker process (one per calling thread, reused) and
  kills it when one item takes over ``ITEM_TIMEOUT_S`` or the call's ``CALL_TIMEOUT_S`` are spent.

An item refused or cut off scores the failure value (0.0) and is counted by its term. This module
imports only the standard library at the top: the worker runs this very file as its script.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import select
import subprocess
import sys
import threading
import time
from typing import Any

#: the longest answer (or bare reference) given to sympy, in characters
MAX_CHARS = 1000
#: the most digits a power or factorial written in the text may have (``10^{100000}`` passes)
MAX_DIGITS = 100_000
#: the longest one item (parse both, verify) may run in the worker before it is killed
ITEM_TIMEOUT_S = 5.0
#: the longest one call (every item of a batch) may spend in the worker
CALL_TIMEOUT_S = 60.0
#: the longest a new worker may take to import math-verify and say it is ready
START_TIMEOUT_S = 120.0
#: workers kept idle between calls (one per thread that calls at the same time)
MAX_IDLE_WORKERS = 4

#: outcomes of one item
EQUAL, UNEQUAL, NO_REFERENCE = 1, 0, -1


# ---- refusing pathological input before sympy -------------------------------------------------
_COMMANDS = re.compile(r"\\(?:cdot|times|left|right|,|;|!|:| )")
_COMMAND_AS = {"\\cdot": "*", "\\times": "*"}
_TOKEN = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+|[-+*^!(){}\[\]])")
_POWER = re.compile(r"\^|\*\*|!")
#: an exponent written without braces: a number, and the powers it is raised to (``9**9**9``)
_CHAIN = re.compile(r"\d+(?:\.\d+)?(?:\s*(?:\^|\*\*)\s*(?:\d+(?:\.\d+)?|\{[^{}]*\}))*")
_LOG2 = math.log10(2.0)


class _NotNumeric(Exception):
    """The text is not a plain numeric expression (a symbol, a division, a command): no estimate."""


class _Bound:
    """An upper bound on the digits (``|log10|``) of the plain numeric expression in ``tokens``,
    read as sums, products, powers (right-associative) and factorials of numbers and groups.
    Raises :class:`_NotNumeric` on anything else."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.i = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _NotNumeric
        self.i += 1
        return token

    def expression(self) -> float:
        digits = self.term()
        while self.peek() in ("+", "-"):
            self.take()
            digits = max(digits, self.term()) + _LOG2
        return digits

    def term(self) -> float:
        digits = self.power()
        while self.peek() is not None and self.peek() not in ("+", "-", ")", "}", "]"):
            if self.peek() == "*":
                self.take()
            digits += self.power()  # juxtaposition multiplies too
        return digits

    def power(self) -> float:
        digits = self.atom()
        while self.peek() == "!":
            self.take()
            value = _value(digits)
            digits = value * math.log10(max(value, 2.0))  # log10(n!) <= n log10(n)
            _check(digits)
        if self.peek() == "^":
            self.take()
            digits = _value(self.power()) * digits  # digits of a^b: |b| |log10 a|
            _check(digits)
        return digits

    def atom(self) -> float:
        token = self.take()
        if token == "-" or token == "+":
            return self.atom()
        if token in ("(", "{", "["):
            digits = self.expression()
            if self.take() not in (")", "}", "]"):
                raise _NotNumeric
            return digits
        if token[0].isdigit() or token[0] == ".":
            value = float(token) if len(token) < 300 else math.inf
            return abs(math.log10(value)) if 0.0 < value < math.inf else (0.0 if value == 0.0 else len(token))
        raise _NotNumeric


def _value(digits: float) -> float:
    """An upper bound on the absolute value of a number with ``digits`` digits."""
    return math.inf if digits > 300 else 10.0 ** digits


def _check(digits: float) -> None:
    if digits > MAX_DIGITS:
        raise _Huge(digits)


class _Huge(Exception):
    def __init__(self, digits: float) -> None:
        super().__init__(digits)
        self.digits = digits


#: the longest operand of a power or factorial that :func:`refusal` reads (each operator costs at
#: most this much: linear in the text)
OPERAND_CHARS = 400


def _group_end(text: str, start: int) -> int:
    """The index after the group opening at ``text[start]`` (``{``, ``(`` or ``[``), or where
    reading stops (the text's end, or ``OPERAND_CHARS`` on)."""
    depth = 0
    for i in range(start, min(len(text), start + OPERAND_CHARS)):
        char = text[i]
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
            if depth == 0:
                return i + 1
    return min(len(text), start + OPERAND_CHARS)


def _numeric_tokens(text: str) -> list[str]:
    """``text`` (LaTeX spacing and ``\\cdot``, ``\\times`` removed or read as ``*``) as the tokens of
    a plain numeric expression (``**`` read as ``^``); :class:`_NotNumeric` if it holds anything else."""
    text = _COMMANDS.sub(lambda m: _COMMAND_AS.get(m.group(), " "), text).replace("**", "^")
    tokens, i = [], 0
    while i < len(text):
        found = _TOKEN.match(text, i)
        if found is None:
            if text[i:].isspace():
                break
            raise _NotNumeric
        tokens.append(found.group(1))
        i = found.end()
    return tokens


def refusal(text: str, *, max_chars: int | None = None) -> str | None:
    """Why ``text`` must not reach sympy, or ``None``: longer than ``max_chars`` (when given), or a
    power or factorial in it whose value would have more than ``MAX_DIGITS`` digits (``9^{9^{9}}``:
    about 370 million; ``1000000!``: over 5 million). Each ``^``, ``**`` or ``!`` is read with
    the numeric operand right of it (a group, a number, a tower) and the number left of it;
    symbolic operands (``2^{n}``, ``x^{10}``) are not estimated. Linear in ``text``: each operand
    is read up to ``OPERAND_CHARS`` characters."""
    if max_chars is not None and len(text) > max_chars:
        return f"{len(text)} characters (more than {max_chars})"
    if "^" not in text and "!" not in text and "**" not in text:
        return None
    for found in _POWER.finditer(text):
        op_end = found.end()
        left = _left_operand(text, found.start())
        if found.group() == "!":
            expression = left + "!"
        else:
            right_start = op_end
            while right_start < len(text) and text[right_start] == " ":
                right_start += 1
            if right_start >= len(text):
                continue
            if text[right_start] in "{([":
                right = text[right_start:_group_end(text, right_start)]
            else:
                chain = _CHAIN.match(text, right_start, min(len(text), right_start + OPERAND_CHARS))
                right = chain.group() if chain else text[right_start]
            expression = f"{left}^{right}" if left else right  # a symbolic base: the exponent alone
        try:
            _Bound(_numeric_tokens(expression)).expression()
        except _Huge as huge:
            return f"a power or factorial of about {_digits_text(huge.digits)} digits (more than {MAX_DIGITS:,})"
        except (_NotNumeric, OverflowError, ValueError, RecursionError):
            continue
    return None


def _left_operand(text: str, end: int) -> str:
    """The number or numeric group written right before ``text[end]`` (``""`` if none)."""
    i = end
    while i > 0 and text[i - 1] == " ":
        i -= 1
    if i > 0 and text[i - 1] in "})]":
        depth, j = 0, i - 1
        while j >= max(0, i - OPERAND_CHARS):
            if text[j] in "})]":
                depth += 1
            elif text[j] in "{([":
                depth -= 1
                if depth == 0:
                    return text[j:i]
            j -= 1
        return ""
    j = i
    while j > max(0, i - OPERAND_CHARS) and (text[j - 1].isdigit() or text[j - 1] == "."):
        j -= 1
    return text[j:i]


def _digits_text(digits: float) -> str:
    return "infinitely many" if digits == math.inf else f"{digits:,.0f}"


# ---- math-verify, as this module runs it (in the worker, or in process as a fallback) ------------
#: a space between a number and the letter it multiplies (``21 i``: math-verify reads no imaginary
#: unit there), and a thin space grouping thousands (``210\,679``: read as two numbers)
_TIDY = re.compile(r"(?<=\d)[ \t]+(?=[a-zA-Z])|(?<=\d)\\[,!;: ](?=\d{3}(?!\d))")


def tidy(latex: str) -> str:
    """``latex`` with the spacing math-verify misreads removed: ``1 + 21 i`` is ``1 + 21i``,
    ``210\\,679`` is ``210679`` (a command's letters are never joined: a backslash ends the match)."""
    return _TIDY.sub("", latex) if ("\\" in latex or " " in latex or "\t" in latex) else latex


_WORDED = re.compile(r"\\boxed|(?<!\\)\$|\\\(|\\\[")


class _Verifier:
    """math-verify's parse and verify for one item; references parsed once (cached)."""

    def __init__(self) -> None:
        from latex2sympy2_extended import NormalizationConfig
        from math_verify import LatexExtractionConfig, parse, verify

        self.parse, self.verify = parse, verify
        self.latex = [LatexExtractionConfig()]
        # a whole completion is read as TRL's accuracy_reward reads it: \boxed{} first, anchored answers only
        self.completion = [LatexExtractionConfig(normalization_config=NormalizationConfig(units=True),
                                                 boxed_match_priority=0, try_extract_without_anchor=False)]
        self._references: dict[str, Any] = {}

    def reference(self, reference: str, timeout: int | None) -> Any:
        """The parsed reference: a worded solution (``$``, ``\\boxed``) as TRL parses its
        ``solution`` column, bare LaTeX (MATH's ``answer`` column) wrapped in ``\\boxed{}`` first
        as veRL's ``math_verify`` scorer does (unwrapped, math-verify would read ``4\\sqrt{2}`` as 4)."""
        cached = self._references.get(reference)
        if cached is not None:
            return cached
        if _WORDED.search(reference):
            gold = self.parse(tidy(reference), parsing_timeout=timeout)
        else:
            gold = self.parse("\\boxed{" + tidy(reference) + "}", self.latex, parsing_timeout=timeout)
        if len(self._references) >= 4096:
            self._references.clear()
        self._references[reference] = gold
        return gold

    def check(self, answer: str, reference: str, whole: bool, box: str | None = None,
              timeout: int | None = None) -> int:
        """EQUAL, UNEQUAL, or NO_REFERENCE (math-verify cannot parse the reference). ``box``: the
        content of a whole completion's last closed ``\\boxed{}`` (else the answer its last
        sentence states), read as an extracted answer where TRL's reading of the completion finds
        no expression in it (``\\boxed{19\\sqrt3}``, ``The answer is 960.``)."""
        gold = self.reference(reference, timeout)
        if not gold:
            return NO_REFERENCE
        if whole:
            got = self.parse(tidy(answer), self.completion, extraction_mode="first_match", parsing_timeout=timeout)
            if all(isinstance(g, str) for g in got):  # the span TRL's reading chose, not understood as written
                if got:  # read again as an extracted answer (``$20\\sqrt7$`` after "final answer is")
                    got = self.parse("\\boxed{" + got[0] + "}", self.latex, parsing_timeout=timeout)
                if box is not None and all(isinstance(g, str) for g in got):
                    got = self.parse("\\boxed{" + tidy(box) + "}", self.latex, parsing_timeout=timeout)
        else:  # an extracted answer is bare LaTeX, read as the reference is
            got = self.parse("\\boxed{" + tidy(answer) + "}", self.latex, parsing_timeout=timeout)
        if not got:
            return UNEQUAL
        return EQUAL if self.verify(gold, got, timeout_seconds=timeout) else UNEQUAL


def _quiet_math_verify() -> None:
    import logging

    for name in ("math_verify", "math_verify.parser", "math_verify.grader", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _serve() -> None:
    """The worker: one JSON request a line on stdin (``[answer, reference, whole]``), one outcome a
    line on the protocol descriptor; library output goes to stderr."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        _quiet_math_verify()
        verifier = _Verifier()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
        protocol.write("error " + json.dumps(f"{type(exc).__name__}: {exc}") + "\n")
        return
    protocol.write("ready\n")
    for line in sys.stdin:
        try:
            answer, reference, whole, box = json.loads(line)
            outcome = verifier.check(answer, reference, bool(whole), box)
        except Exception:  # noqa: BLE001 - sympy and the parsers raise many kinds; no match
            outcome = UNEQUAL
        protocol.write(f"{outcome}\n")


# ---- the worker processes, seen from the parent -----------------------------------------------
class WorkerUnavailable(Exception):
    """No worker process could be started here (the reason is the message)."""


class _Worker:
    """One worker process: a request written, its outcome read within a deadline."""

    def __init__(self) -> None:
        if os.name != "posix":
            raise WorkerUnavailable("a worker needs POSIX pipes to be read with a deadline")
        if not sys.executable:
            raise WorkerUnavailable("no Python executable to start a worker with (sys.executable is empty)")
        code = ("import sys, runpy; sys.path.pop(0); "
                "runpy.run_path(sys.argv[1], run_name='__rewardkit_math_worker__')")
        try:
            self.process = subprocess.Popen([sys.executable, "-c", code, os.path.abspath(__file__)],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        except OSError as exc:
            raise WorkerUnavailable(f"the worker process did not start: {exc}") from None
        self.pid = os.getpid()  # the process that owns it (a fork's child must not use it)
        self._buffer = b""
        line = self._line(time.monotonic() + START_TIMEOUT_S)
        if line != "ready":
            self.kill()
            raise WorkerUnavailable(f"the worker did not start math-verify: {line or 'no answer'}")

    def _line(self, deadline: float) -> str | None:
        """The next line from the worker, or ``None`` past ``deadline`` or at its end."""
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def check(self, item: tuple[str, str, bool, str | None], deadline: float) -> int | None:
        """The outcome of ``item`` (:meth:`MathChecker.check_many`'s), or ``None`` if it was not
        done by ``deadline`` (the worker is then killed: the caller drops it)."""
        request = (json.dumps(item) + "\n").encode()
        try:
            self.process.stdin.write(request)  # type: ignore[union-attr]
            self.process.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            self.kill()
            return None
        line = self._line(deadline)
        if line is None:
            self.kill()
            return None
        try:
            return int(line)
        except ValueError:
            self.kill()
            return None

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a kill is not refused
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def close(self) -> None:
        """Ends the worker: its stdin closed (it exits at the end of its input), killed if it lingers."""
        try:
            self.process.stdin.close()  # type: ignore[union-attr]
            self.process.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _Pool:
    """Idle workers shared by every term of the process; a calling thread takes one for its call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.unavailable: str | None = None  # why workers cannot start here (then math runs in process)

    def take(self) -> _Worker:
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.pid == os.getpid() and worker.alive():
                    return worker
            if self.unavailable is not None:
                raise WorkerUnavailable(self.unavailable)
        try:
            return _Worker()
        except WorkerUnavailable as exc:
            with self.lock:
                first, self.unavailable = self.unavailable is None, str(exc)
            if first:
                import warnings

                warnings.warn(f"answer_match (mode: math): {exc}; math-verify runs in this process instead, "
                              "with its own timeouts on the main thread and none off it (powers and "
                              "factorials too large are still refused before sympy)", RuntimeWarning, stacklevel=4)
            raise

    def give_back(self, worker: _Worker) -> None:
        with self.lock:
            if worker.pid == os.getpid() and worker.alive() and len(self.idle) < MAX_IDLE_WORKERS:
                self.idle.append(worker)
                return
        if worker.pid == os.getpid():
            worker.close()

    def close_all(self) -> None:
        with self.lock:
            workers, self.idle = self.idle, []
        for worker in workers:
            if worker.pid == os.getpid():
                worker.close()

    def forget(self) -> None:
        """In a forked child: the parent's workers are the parent's (their pipes are shared)."""
        self.lock = threading.Lock()
        self.idle = []


POOL = _Pool()
atexit.register(POOL.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL.forget)

_IN_PROCESS: _Verifier | None = None
_IN_PROCESS_LOCK = threading.Lock()


def in_process_check(answer: str, reference: str, whole: bool, box: str | None) -> int:
    """One item in this process (no worker could start): math-verify's own signal timeouts on the
    main thread, no time bound off it (the guard :func:`refusal` still holds)."""
    global _IN_PROCESS
    with _IN_PROCESS_LOCK:
        if _IN_PROCESS is None:
            _quiet_math_verify()
            _IN_PROCESS = _Verifier()
    main = threading.current_thread() is threading.main_thread()
    try:
        return _IN_PROCESS.check(answer, reference, whole, box, timeout=5 if main else None)
    except Exception:  # noqa: BLE001 - as in the worker: no match
        return UNEQUAL


class MathChecker:
    """Items ``(answer, reference, whole, box)`` checked in a worker process within
    ``ITEM_TIMEOUT_S`` each and ``CALL_TIMEOUT_S`` for the call. Outcomes: EQUAL, UNEQUAL,
    NO_REFERENCE, or ``"timeout"`` / ``"call_budget"`` for an item cut off (its worker killed) or
    never sent."""

    def check_many(self, items: list[tuple[str, str, bool, str | None]]) -> list[int | str]:
        outcomes: list[int | str] = []
        if not items:
            return outcomes
        call_end = time.monotonic() + CALL_TIMEOUT_S
        worker: _Worker | None = None
        try:
            for item in items:
                now = time.monotonic()
                if now >= call_end:
                    outcomes.append("call_budget")
                    continue
                if worker is None:
                    try:
                        worker = POOL.take()
                    except WorkerUnavailable:
                        outcomes.append(in_process_check(*item))
                        continue
                    now = time.monotonic()  # a new worker's start is not the item's time
                item_end = now + ITEM_TIMEOUT_S
                deadline = min(item_end, call_end)
                outcome = worker.check(item, deadline)
                if outcome is None:
                    worker = None  # killed
                    outcomes.append("timeout" if deadline == item_end else "call_budget")
                else:
                    outcomes.append(outcome)
        finally:
            if worker is not None:
                POOL.give_back(worker)
        return outcomes


if __name__ == "__rewardkit_math_worker__":
    _serve()
