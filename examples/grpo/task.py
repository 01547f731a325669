"""The task: add two numbers and reply with the equation, ``a + b = c``.

SmolLM2-135M-Instruct cannot add in its head: its sampled bare numbers are right about 1 time in
20, its written-out equations about 2 in 5 (``benchmarks/bench_llm_demo.py --probe``: 5% and 39% of
192 replies at the demo's temperature). The prompt's one worked example still answers with the
bare number, as a format taught earlier would, so the base model follows the example about half
the time and the instruction the other half: the format is what a few minutes of GRPO can teach,
and learning it is what makes the answers right. A reply is
*compliant* when it is one equation ``a + b = c`` and *correct* when its last number is the sum
(what ``answer_match`` in ``numeric`` mode rewards against the ``reference`` column), whatever
its form.
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
    """Dataset columns for TRL: a chat ``prompt`` (the worked example, then the question) and the
    ``reference`` answer."""
    return {"prompt": [[*EXAMPLE, {"role": "user", "content": question(a, b)}] for a, b in pairs],
            "reference": [str(a + b) for a, b in pairs]}


def split(train: int = 64, held_out: int = 32, seed: int = 0) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Disjoint training and held-out problems (the held-out ones are never trained on)."""
    pairs = problems(train + held_out, seed)
    return pairs[:train], pairs[train:]


def compliant(reply: str) -> bool:
    """The reply is one equation ``a + b = c``."""
    return _EQUATION.fullmatch(reply) is not None


def correct(reply: str, a: int, b: int) -> bool:
    """The reply's last number is ``a + b`` (in any form: bare, an equation, a sentence)."""
    numbers = _NUMBER.findall(reply)
    return bool(numbers) and int(numbers[-1]) == a + b


def truth_from_prompt(prompt: str) -> int | None:
    """``a + b`` read back from a question (the scorer has only the prompt text), else None."""
    found = re.search(r"(-?\d+)\s*\+\s*(-?\d+)", prompt)
    return int(found.group(1)) + int(found.group(2)) if found else None
