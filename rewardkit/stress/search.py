"""The adaptive search of ``rewardkit stress``: random edits of the control and of the best wrong
probes so far, kept when the oracle still says wrong and the total rises.

A hill climb over tokens (words, numbers, punctuation, whitespace): each round takes the best
few candidates of a row, applies one or two edits to each (change a number, delete, duplicate,
swap or insert a token, append a phrase, cut the end) and hands the children to the caller to
score. It stops for a row after ``patience`` rounds without a better wrong probe.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .families import FILLER, JUDGE_PHRASES
from .probes import NUMBER

_TOKENS = re.compile(r"\s+|[0-9]+|\w+|[^\w\s]")
MAX_TEXT = 20_000


@dataclass
class RowSearch:
    """One row's search state: its candidates (text -> total, wrong ones and the control), the
    best wrong total so far and the rounds since it last rose."""

    row: int
    control: str
    vocabulary: list[str]
    pool: dict[str, float] = field(default_factory=dict)
    best: float = float("-inf")
    stale: int = 0
    seen: set[str] = field(default_factory=set)

    def parents(self, k: int) -> list[str]:
        """The ``k`` best candidates to edit next."""
        return sorted(self.pool, key=lambda t: (-self.pool[t], len(t)))[:k]

    def offer(self, text: str, total: float, wrong: bool) -> bool:
        """Record a scored child; True when it is a new best wrong probe."""
        if not wrong:
            return False
        self.pool[text] = total
        if len(self.pool) > 16:  # keep the best few
            for worst in sorted(self.pool, key=self.pool.__getitem__)[:len(self.pool) - 16]:
                if worst != self.control:
                    del self.pool[worst]
        if total > self.best + 1e-12:
            self.best = total
            return True
        return False


def vocabulary(prompt: str, control: str, reference: str | None) -> list[str]:
    """Tokens the edits may insert: the prompt's and the control's words and numbers, a few phrases."""
    words = [t for t in _TOKENS.findall(prompt + " " + control) if t.strip()]
    words += JUDGE_PHRASES[:2] + (FILLER.strip(),)
    if reference:
        words.append(reference)
    return list(dict.fromkeys(words))


def mutate(text: str, rng: random.Random, vocab: Sequence[str]) -> str:
    """``text`` with one or two random edits."""
    for _ in range(rng.choice((1, 1, 2))):
        text = _edit(text, rng, vocab)
    return text[:MAX_TEXT]


def _edit(text: str, rng: random.Random, vocab: Sequence[str]) -> str:
    tokens = _TOKENS.findall(text)
    op = rng.randrange(8)
    if op == 0:  # change a number
        numbers = list(NUMBER.finditer(text))
        if numbers:
            m = rng.choice(numbers)
            try:
                value = int(m.group().replace(",", ""))
            except ValueError:
                value = rng.randint(0, 99)
            new = rng.choice((value + 1, value - 1, 0, rng.randint(0, 99), value * 2, value + rng.randint(2, 20)))
            return text[:m.start()] + str(new) + text[m.end():]
    if op == 1 and tokens:  # delete a token
        i = rng.randrange(len(tokens))
        return "".join(tokens[:i] + tokens[i + 1:])
    if op == 2 and tokens:  # duplicate a token
        i = rng.randrange(len(tokens))
        return "".join(tokens[:i + 1] + tokens[i:])
    if op == 3 and len(tokens) > 1:  # swap two tokens
        i, j = rng.sample(range(len(tokens)), 2)
        tokens[i], tokens[j] = tokens[j], tokens[i]
        return "".join(tokens)
    if op == 4 and vocab:  # insert a known token
        i = rng.randrange(len(tokens) + 1)
        return "".join(tokens[:i] + [" ", rng.choice(vocab), " "] + tokens[i:])
    if op == 5:  # append or prepend a phrase
        phrase = rng.choice((*JUDGE_PHRASES, FILLER.strip()))
        return f"{text} {phrase}" if rng.random() < 0.7 else f"{phrase} {text}"
    if op == 6 and len(text) > 1:  # cut the end
        return text[:rng.randrange(1, len(text))]
    if op == 7 and vocab:  # replace a token with a known one
        if tokens:
            i = rng.randrange(len(tokens))
            tokens[i] = rng.choice(vocab)
            return "".join(tokens)
    return text + " " + rng.choice(vocab) if vocab else text


def search_round(states: Sequence[RowSearch], rng: random.Random, children: int,
                 score: Callable[[RowSearch, list[str]], None], patience: int) -> int:
    """One round over the rows still improving: build ``children`` edits per row and hand them to
    ``score`` (which calls :meth:`RowSearch.offer`). Returns how many rows are still active."""
    active = 0
    for state in states:
        if state.stale >= patience:
            continue
        active += 1
        parents = state.parents(4) or [state.control]
        batch = []
        for _ in range(children * 3):
            if len(batch) >= children:
                break
            child = mutate(rng.choice(parents), rng, state.vocabulary)
            if child not in state.seen:
                state.seen.add(child)
                batch.append(child)
        before = state.best
        if batch:
            score(state, batch)
        state.stale = 0 if state.best > before + 1e-12 else state.stale + 1
    return active
