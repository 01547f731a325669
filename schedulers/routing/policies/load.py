"""Load-aware policies: the least loaded replica by one measure of the snapshot, ties at random.

==============  =========================================================================
name            routes to the replica with
==============  =========================================================================
jsq             fewest outstanding requests (waiting + running)
least_kv        fewest allocated KV-cache blocks
least_tokens    fewest outstanding known tokens: unprocessed prompt tokens + output tokens
                generated so far, over its unfinished requests
least_prefill   fewest unprocessed prompt tokens (queued or running)
power_of_two    fewer outstanding requests of two distinct replicas drawn at random
==============  =========================================================================

None of them reads a request's future output length; the snapshot does not hold it.
"""

from __future__ import annotations

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random


def jsq(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """Join the shortest queue: fewest waiting + running requests."""
    return argmin_random(snapshot.outstanding_requests, rng)


def least_kv(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """Fewest allocated KV-cache blocks."""
    return argmin_random(snapshot.kv_blocks, rng)


def least_tokens(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """Fewest outstanding known tokens (unprocessed prompt + generated output)."""
    return argmin_random(snapshot.outstanding_tokens, rng)


def least_prefill(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """Fewest prompt tokens not yet processed, queued or running."""
    return argmin_random(snapshot.floats("prefill_tokens"), rng)


def power_of_two(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """The less loaded (outstanding requests) of two distinct replicas drawn at random."""
    n = snapshot.num_replicas
    if n == 1:
        return 0
    pair = rng.choice(n, size=2, replace=False)
    loads = snapshot.outstanding_requests[pair]
    return int(pair[argmin_random(loads, rng)])


@register_policy("jsq")
class JoinShortestQueue(HeuristicPolicy):
    """Fewest outstanding requests."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return jsq(snapshot, self.rng)


@register_policy("least_kv")
class LeastKV(HeuristicPolicy):
    """Fewest allocated KV-cache blocks."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return least_kv(snapshot, self.rng)


@register_policy("least_tokens")
class LeastTokens(HeuristicPolicy):
    """Fewest outstanding known tokens."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return least_tokens(snapshot, self.rng)


@register_policy("least_prefill")
class LeastPrefill(HeuristicPolicy):
    """Fewest unprocessed prompt tokens."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return least_prefill(snapshot, self.rng)


@register_policy("power_of_two")
class PowerOfTwo(HeuristicPolicy):
    """The less loaded of two replicas drawn at random."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return power_of_two(snapshot, self.rng)
