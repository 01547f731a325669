"""The task: add two numbers and reply with the sum alone.

SmolLM2-135M-Instruct adds small numbers fairly well but answers in sentences ("12 + 7 = 19",
"The answer is 19."): the reply format is what a few minutes of GRPO can teach it. A reply is
*compliant* when it is a bare number and *correct* when it is the right bare number (what
``answer_match`` in ``exact`` mode rewards against the ``reference`` column).
"""

from __future__ import annotations

import random
import re
from typing import Any

INSTRUCTION = "Reply with the number only."
#: a compliant reply: one integer, optionally followed by a full stop (the format term's pattern)
BARE_NUMBER = r"\s*-?\d+\.?\s*"
_BARE = re.compile(BARE_NUMBER)


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


#: one worked example before each question (without it the model almost never replies with a bare number)
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
    """The reply is a bare number."""
    return _BARE.fullmatch(reply) is not None


def correct(reply: str, a: int, b: int) -> bool:
    """The reply is the right bare number."""
    return compliant(reply) and int(reply.strip().rstrip(".")) == a + b


def truth_from_prompt(prompt: str) -> int | None:
    """``a + b`` read back from a question (the scorer has only the prompt text), else None."""
    found = re.search(r"(-?\d+)\s*\+\s*(-?\d+)", prompt)
    return int(found.group(1)) + int(found.group(2)) if found else None
