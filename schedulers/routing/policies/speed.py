"""Speed-aware policies: queued work divided by each replica's speed.

=================  ======================================================================
cap_jsq            fewest outstanding requests / declared speed
cap_least_tokens   fewest outstanding known tokens / declared speed
cap_least_prefill  least (unprocessed prompt tokens + the new prompt) / declared speed
adaptive           least expected wait: (unprocessed prompt tokens + the new prompt) /
                   speed estimated online from finished batches (``measured_speed``)
oracle             the same rule with the true current speeds (declared speed times the
                   hidden slowdown factor): a reference ceiling no real router can run
=================  ======================================================================

The declared speed is the hardware type a production router knows (the env YAML's); the measured
one comes from :mod:`schedulers.routing.speed_estimator`.
"""

from __future__ import annotations

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random


def expected_wait(snapshot: ReplicaSnapshot, prompt_tokens: float, speeds: np.ndarray) -> np.ndarray:
    """Prompt tokens ahead of (and including) a new request of ``prompt_tokens``, divided by each replica's speed.

    Proportional to the time until its first token when the replicas share one prefill rate per unit speed.
    """
    speeds = np.asarray(speeds, dtype=np.float64)
    if np.any(speeds <= 0):
        raise ValueError(f"speeds must be positive, got {speeds}")
    return (snapshot.prefill_tokens + float(prompt_tokens)) / speeds


def cap_jsq(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Fewest outstanding requests per unit of declared speed."""
    return argmin_random(snapshot.outstanding_requests / snapshot.declared_speed, rng)


def cap_least_tokens(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Fewest outstanding known tokens per unit of declared speed."""
    return argmin_random(snapshot.outstanding_tokens / snapshot.declared_speed, rng)


def cap_least_prefill(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Least expected wait with the declared speeds."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, snapshot.declared_speed), rng)


def adaptive(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Least expected wait with the speeds measured online (``snapshot.measured_speed``)."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, snapshot.measured_speed), rng)


def oracle(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float, true_speed: np.ndarray) -> int:
    """Least expected wait with the true current speeds (for reference only: no router knows them)."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, true_speed), rng)


@register_policy("cap_jsq")
class CapJSQ(HeuristicPolicy):
    """Fewest outstanding requests per unit of declared speed."""

    reads_speed = "declared"

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return cap_jsq(snapshot, self.rng, prompt_tokens)


@register_policy("cap_least_tokens")
class CapLeastTokens(HeuristicPolicy):
    """Fewest outstanding known tokens per unit of declared speed."""

    reads_speed = "declared"

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return cap_least_tokens(snapshot, self.rng, prompt_tokens)


@register_policy("cap_least_prefill")
class CapLeastPrefill(HeuristicPolicy):
    """Least expected wait with the declared speeds."""

    reads_speed = "declared"

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return cap_least_prefill(snapshot, self.rng, prompt_tokens)


@register_policy("adaptive")
class Adaptive(HeuristicPolicy):
    """Least expected wait with the speeds measured online."""

    reads_speed = "measured"

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return adaptive(snapshot, self.rng, prompt_tokens)


@register_policy("oracle")
class Oracle(HeuristicPolicy):
    """Least expected wait with the true current speeds: a ceiling only a simulator can run."""

    needs_true_speed = True
    reads_speed = "true"
    live = False

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        if true_speed is None:
            raise ValueError("the oracle router needs the true current speeds (true_speed=...)")
        return oracle(snapshot, self.rng, prompt_tokens, true_speed)
