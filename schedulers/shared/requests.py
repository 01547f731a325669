"""The requests of a workload: arrival times and lengths (:class:`Lengths`), then prompts (:class:`RequestSpec`).

:func:`lengths_from_workload` gives the arrivals and lengths the simulator draws for a seed;
:meth:`Lengths.fitted` scales them and shortens them to fit a small engine the way Vidur shortens
long requests (both parts in proportion); :func:`build_requests` makes the prompts: token-id lists
(exact lengths; vLLM's completions API takes them) or the same ids spelled as words. A
shared-prefix workload prepends one of G system prompts and, with sessions, each conversation's
earlier turns, so that an engine's prefix cache can reuse them. Used by the live env and the load
generator alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrivals import fit_lengths, sample_arrivals

#: token ids below this are left out of prompts (the tiny tokenizer's special tokens are 0-2).
FIRST_ID = 3
#: the generators of system prompts are seeded with (seed, this, group): a stream apart from the requests'.
_SYSTEM_PROMPT_STREAM = 1
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


class WorkloadError(ValueError):
    """A workload option or file is wrong; the message names the file or option and what was expected."""


@dataclass(frozen=True)
class SharedPrefix:
    """``groups`` system prompts of ``prefix_tokens`` each; with ``sessions`` > 0, multi-turn conversations too."""

    groups: int = 4
    prefix_tokens: int = 128
    #: conversations requests are spread over (each request continues one drawn at random); 0: single turns.
    sessions: int = 0

    def __post_init__(self) -> None:
        if self.groups < 1 or self.prefix_tokens < 1 or self.sessions < 0:
            raise WorkloadError(f"shared prefix: expected groups >= 1, prefix_tokens >= 1, sessions >= 0, got {self}")

    @classmethod
    def parse(cls, spec: str, sessions: int = 0) -> "SharedPrefix":
        """``"G:P"`` -> G system prompts of P tokens."""
        try:
            groups, tokens = (int(x) for x in spec.split(":"))
        except ValueError:
            raise WorkloadError(f"--shared-prefix: expected GROUPS:TOKENS such as 4:128, got {spec!r}") from None
        return cls(groups, tokens, sessions)


@dataclass(frozen=True)
class RequestSpec:
    """One request: when it is sent (s after the start), its prompt as token ids, and its output length."""

    index: int
    arrival_s: float
    prompt_ids: tuple[int, ...]
    output_tokens: int
    #: system-prompt group and conversation of a shared-prefix workload (else None).
    group: int | None = None
    session: int | None = None
    #: leading tokens this prompt shares with an earlier request's prompt.
    shared_tokens: int = 0
    #: earlier turns of its conversation left out (the oldest first, as chat clients do) so that
    #: prompt + output fit the model length; and whether its own part was cut for the same reason.
    dropped_turns: int = 0
    own_cut: bool = False

    @property
    def shortened(self) -> bool:
        """Whether this prompt is shorter than the workload asked, to fit the model length."""
        return self.dropped_turns > 0 or self.own_cut

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    def prompt_text(self) -> str:
        """The ids spelled as pseudo-words, one word per id (shared id prefixes give shared text prefixes)."""
        return " ".join(word(i) for i in self.prompt_ids)


def word(token_id: int) -> str:
    """A pronounceable pseudo-word for ``token_id`` (distinct ids, distinct words)."""
    n = len(_SYLLABLES)
    out = []
    value = int(token_id)
    while True:
        out.append(_SYLLABLES[value % n])
        value //= n
        if value == 0:
            return "".join(out)


@dataclass(frozen=True)
class Lengths:
    """Arrival times (s) and prompt/output lengths of a workload, before prompts are made."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = field(default="", compare=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def fitted(self, scale: float = 1.0, max_model_len: int | None = None) -> "Lengths":
        """Lengths times ``scale``, then shortened in proportion (as Vidur does) so prompt + output <= ``max_model_len``."""
        if not (scale > 0 and math.isfinite(scale)):
            raise WorkloadError(f"--length-scale: expected a positive number, got {scale}")
        if max_model_len is not None and max_model_len < 2:
            raise WorkloadError(f"--max-model-len: expected at least 2, got {max_model_len}")
        prompt, output = fit_lengths(self.prompt_tokens, self.output_tokens, scale, max_model_len)
        return Lengths(self.arrival_s, prompt, output, self.source)


def lengths_from_workload(workload: Any, seed: int) -> Lengths:
    """The arrivals and lengths the simulator draws for ``seed`` from a workload (or ``EnvConfig``), the first at 0."""
    arrivals = sample_arrivals(workload, seed)
    return Lengths(arrivals.arrived_at - arrivals.arrived_at[0], arrivals.prefill_tokens, arrivals.decode_tokens,
                   source=str(workload.source))


def build_requests(
    lengths: Lengths,
    seed: int = 0,
    vocab_size: int = 2000,
    shared: SharedPrefix | None = None,
    max_model_len: int | None = None,
) -> list[RequestSpec]:
    """Prompts for every request (random ids in ``[3, vocab_size)``, seeded), with shared prefixes if asked.

    In a shared-prefix workload the request's own prompt length is what follows the system prompt
    and history; a conversation that would outgrow ``max_model_len`` leaves out its oldest turns (as
    chat clients do), and the request says so (:attr:`RequestSpec.shortened`).
    """
    if vocab_size <= FIRST_ID + 1:
        raise WorkloadError(f"--vocab-size: expected more than {FIRST_ID + 1}, got {vocab_size}")
    rng = np.random.default_rng(seed)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(int(x) for x in rng.integers(FIRST_ID, vocab_size, size=int(n)))

    if shared is None:
        return [RequestSpec(i, float(lengths.arrival_s[i]), ids(lengths.prompt_tokens[i]), int(lengths.output_tokens[i]))
                for i in range(len(lengths))]
    systems: dict[int, tuple[int, ...]] = {}

    def system_prompt(group: int) -> tuple[int, ...]:
        """Group ``group``'s system prompt, drawn when a request first uses it: from a generator of
        its own (seeded by the seed and the group), so prompts do not depend on which groups the
        requests happen to use first, and only the groups used are ever built."""
        prompt = systems.get(group)
        if prompt is None:
            own = np.random.default_rng([seed, _SYSTEM_PROMPT_STREAM, group])
            prompt = systems[group] = tuple(own.integers(FIRST_ID, vocab_size, size=shared.prefix_tokens).tolist())
        return prompt

    histories: dict[int, list[tuple[int, ...]]] = {}  # each conversation's turns (a user part and its answer)
    session_group: dict[int, int] = {}
    specs = []
    for i in range(len(lengths)):
        own, out = int(lengths.prompt_tokens[i]), int(lengths.output_tokens[i])
        session = int(rng.integers(shared.sessions)) if shared.sessions else None
        if session is None:
            group = int(rng.integers(shared.groups))
            turns: list[tuple[int, ...]] = []
        else:
            group = session_group.setdefault(session, int(rng.integers(shared.groups)))
            turns = histories.setdefault(session, [])
        system = system_prompt(group)
        dropped, own_cut = 0, False
        if max_model_len is not None:
            if len(system) + own + out > max_model_len:
                own, own_cut = max(max_model_len - len(system) - out, 1), True
                if len(system) + own + out > max_model_len:
                    raise WorkloadError(f"--shared-prefix: a {len(system)}-token system prompt leaves no room for "
                                        f"request {i} ({out} output tokens) within --max-model-len {max_model_len}")
            room = max_model_len - len(system) - own - out
            kept = sum(len(t) for t in turns)
            while turns and kept > room:  # drop the oldest turns, as chat clients do
                kept -= len(turns.pop(0))
                dropped += 1
        history = tuple(token for turn in turns for token in turn)
        user = ids(own)
        prompt = system + history + user
        specs.append(RequestSpec(i, float(lengths.arrival_s[i]), prompt, out, group=group, session=session,
                                 shared_tokens=len(system) + len(history), dropped_turns=dropped, own_cut=own_cut))
        if session is not None:
            turns.append(user + ids(out))  # the next turn repeats this one (with a stand-in answer)
    return specs


#: token ids of a workload's prompts are drawn below this (``rewardkit loadgen``'s ``--vocab-size`` default).
PROMPT_VOCAB_SIZE = 2000


def shared_prefix_requests(workload: Any, seed: int, vocab_size: int = PROMPT_VOCAB_SIZE) -> list[RequestSpec]:
    """The requests of a workload with ``shared_prefix`` for ``seed``: what the simulator caches and
    ``rewardkit loadgen --env`` sends.

    The trace's prompt length is the request's own part: it is fitted, with the output, into
    ``max_tokens`` less the system prompt, and the system prompt and the conversation's history are
    put in front (a conversation that would outgrow ``max_tokens`` leaves out its oldest turns).
    """
    shared = workload.shared_prefix
    if shared is None:
        raise ValueError("shared_prefix_requests needs a workload with shared_prefix")
    lengths = lengths_from_workload(workload, seed).fitted(1.0, workload.max_tokens - shared.prefix_tokens)
    return build_requests(lengths, seed, vocab_size, shared, workload.max_tokens)
