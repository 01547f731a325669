"""The task: add two numbers and reply with the equation, ``a + b = c``.

SmolLM2-135M-Instruct cannot add in its head: its sampled bare numbers are right about 1 time in
20, its written-out equations about 2 in 5 (``benchmarks/bench_llm_demo.py --probe``: 5% and 39% of
192 replies at the demo's temperature). The prompt's one worked example still answers with the
bare number, as a format taught earlier would, so the base model follows the example about half
the time and the instruction the other half: the format is what a few minutes of GRPO can teach,
and learning it is what makes the answers right.

The held-out metrics are strict: a reply is *compliant* (:func:`strict_compliant`) when it is
exactly one equation whose operands are the question's own (in either order), and *correct*
(:func:`strict_correct`) when it is that equation with the right sum. ``23 + 23 = 46`` for
``27 + 23`` is neither. The lenient readings the reward's ``answer_match`` term uses (the last
number is the sum, in any form: :func:`correct`) are reported beside them as *answer*. Held-out
questions never share an unordered operand pair with a training question (``27 + 23`` is not
held out when ``23 + 27`` is trained on).
"""

from __future__ import annotations

import random
import re
from typing import Any

INSTRUCTION = "Reply with the equation."
#: a compliant reply: one equation ``a + b = c``, optionally followed by a full stop (the format term's pattern)
EQUATION = r"\s*\d+\s*\+\s*\d+\s*=\s*-?\d+\.?\s*"
_EQUATION = re.compile(EQUATION)
_NUMBER = re.compile(r"-?\d+")


def question(a: int, b: int) -> str:
    """The user message for ``a + b``."""
    return f"What is {a} + {b}? {INSTRUCTION}"


def problems(n: int, seed: int, low: int = 2, high: int = 30) -> list[tuple[int, int]]:
    """``n`` distinct pairs ``(a, b)`` drawn with ``seed``."""
    rng = random.Random(seed)
    seen: set[tuple[int, int]] = set()
    while len(seen) < n:
        seen.add((rng.randint(low, high), rng.randint(low, high)))
    return sorted(seen, key=lambda _: rng.random())


#: one worked example before each question, answered with the bare number (the earlier format)
EXAMPLE = [{"role": "user", "content": question(3, 4)}, {"role": "assistant", "content": "7"}]


def rows(pairs: list[tuple[int, int]]) -> dict[str, list[Any]]:
    """Dataset columns for TRL: a chat ``prompt`` (the worked example, then the question), the
    ``reference`` answer and the ``operands`` (``"27|23"``, for the ``keywords`` term)."""
    return {"prompt": [[*EXAMPLE, {"role": "user", "content": question(a, b)}] for a, b in pairs],
            "reference": [str(a + b) for a, b in pairs],
            "operands": [f"{a}|{b}" for a, b in pairs]}


def split(train: int = 64, held_out: int = 32, seed: int = 0) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Training and held-out problems with no unordered operand pair in common (a held-out
    question is never a training question with its numbers swapped)."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(2, 31) for b in range(a, 31)]  # unordered: a <= b (435 of them)
    if train + held_out > len(pairs):
        raise ValueError(f"at most {len(pairs)} distinct unordered pairs, asked for {train} + {held_out}")
    rng.shuffle(pairs)
    oriented = [(a, b) if rng.random() < 0.5 else (b, a) for a, b in pairs[:train + held_out]]
    return oriented[:train], oriented[train:]


def compliant(reply: str) -> bool:
    """The reply is one equation ``a + b = c`` (any operands: the lenient reading; see :func:`strict_compliant`)."""
    return _EQUATION.fullmatch(reply) is not None


_STRICT = re.compile(r"\s*(\d+)\s*\+\s*(\d+)\s*=\s*(-?\d+)\.?\s*")


def strict_compliant(reply: str, a: int, b: int) -> bool:
    """The reply is exactly one equation ``x + y = z`` whose operands are ``a`` and ``b`` (either order)."""
    found = _STRICT.fullmatch(reply)
    return found is not None and sorted((int(found.group(1)), int(found.group(2)))) == sorted((a, b))


def strict_correct(reply: str, a: int, b: int) -> bool:
    """The reply is that equation, and its sum is right."""
    found = _STRICT.fullmatch(reply)
    return strict_compliant(reply, a, b) and found is not None and int(found.group(3)) == a + b


def scores(replies: list[str], pairs: list[tuple[int, int]]) -> dict[str, float]:
    """Held-out metrics: ``compliant`` and ``correct`` (strict), ``answer`` (the last number is the sum)."""
    n = len(pairs)
    return {"compliant": sum(strict_compliant(r, a, b) for r, (a, b) in zip(replies, pairs, strict=True)) / n,
            "correct": sum(strict_correct(r, a, b) for r, (a, b) in zip(replies, pairs, strict=True)) / n,
            "answer": sum(correct(r, a, b) for r, (a, b) in zip(replies, pairs, strict=True)) / n}


def correct(reply: str, a: int, b: int) -> bool:
    """The reply's last number is ``a + b`` (in any form: bare, an equation, a sentence)."""
    numbers = _NUMBER.findall(reply)
    return bool(numbers) and int(numbers[-1]) == a + b


def truth_from_prompt(prompt: str) -> int | None:
    """``a + b`` read back from a question (the scorer has only the prompt text), else None."""
    found = re.search(r"(-?\d+)\s*\+\s*(-?\d+)", prompt)
    return int(found.group(1)) + int(found.group(2)) if found else None
