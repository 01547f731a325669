"""Load-aware routing heuristics as pure functions of a per-replica state snapshot.

Each heuristic maps a :class:`ReplicaSnapshot` (numpy arrays, one entry per replica) and a seeded
``numpy.random.Generator`` to a replica index. Ties are broken uniformly at random with that
generator, so that no replica is favoured by its index. None of them reads a request's future
output length; the snapshot does not hold it.

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

Vidur's own ``round_robin``, ``random`` and ``lor`` are reproduced by :func:`round_robin`,
:func:`random_choice` and :func:`lor` with Vidur's semantics (``lor`` counts only waiting requests
and breaks ties toward the lowest index), so every policy can run through the same env.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class ReplicaSnapshot:
    """Per-replica load at one instant; every field is an array of length ``num_replicas``."""

    #: requests routed to the replica and not yet admitted (no KV-cache blocks yet).
    waiting: np.ndarray
    #: admitted, unfinished requests (holding KV-cache blocks).
    running: np.ndarray
    #: allocated KV-cache blocks.
    kv_blocks: np.ndarray
    #: KV-cache blocks the replica has in total.
    kv_capacity: np.ndarray
    #: prompt tokens not yet processed, over queued and running requests.
    prefill_tokens: np.ndarray
    #: output tokens generated so far by unfinished requests.
    decoded_tokens: np.ndarray
    #: prompt tokens of the waiting (not yet admitted) requests.
    waiting_prefill_tokens: np.ndarray
    #: requests the replica completed within the recent window.
    recent_completions: np.ndarray
    #: 1 while the replica executes a batch, else 0.
    busy: np.ndarray

    @classmethod
    def build(cls, num_replicas: int | None = None, **fields: object) -> "ReplicaSnapshot":
        """Snapshot from keyword arrays; missing fields are zeros (``kv_capacity`` defaults to 1000)."""
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in fields.items()}
        unknown = set(arrays) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise TypeError(f"unknown snapshot fields: {sorted(unknown)}")
        if num_replicas is None:
            if not arrays:
                raise ValueError("give num_replicas or at least one field")
            num_replicas = len(next(iter(arrays.values())))
        for name, arr in arrays.items():
            if arr.shape != (num_replicas,):
                raise ValueError(f"field {name!r}: expected shape ({num_replicas},), got {arr.shape}")
        defaults = {f: np.zeros(num_replicas) for f in cls.__dataclass_fields__}
        defaults["kv_capacity"] = np.full(num_replicas, 1000.0)
        defaults.update(arrays)
        return cls(**defaults)

    @property
    def num_replicas(self) -> int:
        return len(self.waiting)

    @property
    def outstanding_requests(self) -> np.ndarray:
        """Waiting plus running requests."""
        return self.waiting + self.running

    @property
    def outstanding_tokens(self) -> np.ndarray:
        """Unprocessed prompt tokens plus output tokens generated so far."""
        return self.prefill_tokens + self.decoded_tokens

    @property
    def kv_fraction(self) -> np.ndarray:
        """Allocated share of the KV cache, in [0, 1]."""
        return self.kv_blocks / np.maximum(self.kv_capacity, 1.0)

    def with_assignment(self, replica: int, prompt_tokens: int) -> "ReplicaSnapshot":
        """The snapshot after queueing one more request of ``prompt_tokens`` on ``replica``."""
        waiting = self.waiting.copy()
        prefill = self.prefill_tokens.copy()
        waiting_prefill = self.waiting_prefill_tokens.copy()
        waiting[replica] += 1
        prefill[replica] += prompt_tokens
        waiting_prefill[replica] += prompt_tokens
        return replace(self, waiting=waiting, prefill_tokens=prefill, waiting_prefill_tokens=waiting_prefill)


def argmin_random(values: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the smallest value; ties broken uniformly at random."""
    values = np.asarray(values)
    ties = np.flatnonzero(values == values.min())
    if len(ties) == 1:
        return int(ties[0])
    return int(ties[rng.integers(len(ties))])


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
    return argmin_random(snapshot.prefill_tokens, rng)


def power_of_two(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """The less loaded (outstanding requests) of two distinct replicas drawn at random."""
    n = snapshot.num_replicas
    if n == 1:
        return 0
    pair = rng.choice(n, size=2, replace=False)
    loads = snapshot.outstanding_requests[pair]
    return int(pair[argmin_random(loads, rng)])


def round_robin(decision_index: int, num_replicas: int) -> int:
    """Vidur's round robin: the ``decision_index``-th request goes to ``decision_index % n``."""
    return decision_index % num_replicas


def random_choice(num_replicas: int, rng: np.random.Generator) -> int:
    """Vidur's random router: uniform over replicas (seeded here instead of Python's global RNG)."""
    return int(rng.integers(num_replicas))


def lor(snapshot: ReplicaSnapshot) -> int:
    """Vidur's least outstanding requests: fewest *waiting* requests, ties to the lowest index."""
    return int(np.argmin(snapshot.waiting))


Heuristic = Callable[[ReplicaSnapshot, np.random.Generator], int]

#: load-aware heuristics that take (snapshot, rng).
HEURISTICS: dict[str, Heuristic] = {
    "jsq": jsq,
    "least_kv": least_kv,
    "least_tokens": least_tokens,
    "least_prefill": least_prefill,
    "power_of_two": power_of_two,
}
#: Vidur's built-in global schedulers, reproduced for the env.
VIDUR_BASELINES = ("round_robin", "random", "lor")
#: every policy name ``VidurRoutingEnv.heuristic_action`` accepts.
POLICY_NAMES = VIDUR_BASELINES + tuple(HEURISTICS)


def choose(
    name: str, snapshot: ReplicaSnapshot, rng: np.random.Generator, *, decision_index: int = 0
) -> int:
    """The replica policy ``name`` picks; ``decision_index`` is used by ``round_robin`` only."""
    if name in HEURISTICS:
        return HEURISTICS[name](snapshot, rng)
    if name == "round_robin":
        return round_robin(decision_index, snapshot.num_replicas)
    if name == "random":
        return random_choice(snapshot.num_replicas, rng)
    if name == "lor":
        return lor(snapshot)
    raise ValueError(f"unknown heuristic {name!r}; expected one of: {', '.join(POLICY_NAMES)}")
