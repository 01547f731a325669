"""Vidur's built-in global schedulers, reproduced with Vidur's semantics so that every env runs them.

``lor`` counts only waiting requests and breaks ties toward the lowest index; ``random`` draws from
the policy's seeded generator instead of Python's global one.
"""

from __future__ import annotations

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot


def round_robin(decision_index: int, num_replicas: int) -> int:
    """Vidur's round robin: the ``decision_index``-th request goes to ``decision_index % n``."""
    return decision_index % num_replicas


def random_choice(num_replicas: int, rng: np.random.Generator) -> int:
    """Vidur's random router: uniform over replicas (seeded here instead of Python's global RNG)."""
    return int(rng.integers(num_replicas))


def lor(snapshot: ReplicaSnapshot) -> int:
    """Vidur's least outstanding requests: fewest *waiting* requests, ties to the lowest index."""
    return int(np.argmin(snapshot.waiting))


@register_policy("round_robin")
class RoundRobin(HeuristicPolicy):
    """The k-th request of an episode to replica k mod n."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return round_robin(self.decisions, snapshot.num_replicas)


@register_policy("random")
class Random(HeuristicPolicy):
    """A replica drawn uniformly."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return random_choice(snapshot.num_replicas, self.rng)


@register_policy("lor")
class LeastOutstanding(HeuristicPolicy):
    """Vidur's ``lor``: fewest waiting requests, ties to the lowest index."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return lor(snapshot)
