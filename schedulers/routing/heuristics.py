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
prefix_aware    longest likely-cached prefix of the request (``snapshot.prefix_match``) while
                load is balanced; fewest outstanding requests when it is not, or when no
                replica holds at least ``PREFIX_MATCH_THRESHOLD`` of the prompt
==============  =========================================================================

Capacity-aware versions divide the queued work by the replica's *declared* speed (the hardware
type a production router knows), and the adaptive one by its *measured* speed:

=================  ======================================================================
cap_jsq            fewest outstanding requests / declared speed
cap_least_tokens   fewest outstanding known tokens / declared speed
cap_least_prefill  least (unprocessed prompt tokens + the new prompt) / declared speed
adaptive           least expected wait: (unprocessed prompt tokens + the new prompt) /
                   speed estimated online from finished batches (``measured_speed``)
oracle             the same rule with the true current speeds (declared speed times the
                   hidden slowdown factor): a reference ceiling no real router can run
=================  ======================================================================

The industry's prefix-cache routers, ``cache_aware`` (SGLang's default) and ``affinity_token_load``
(llm-d's default), are in :mod:`schedulers.routing.prefix_baselines`, with their parameters.

Vidur's own ``round_robin``, ``random`` and ``lor`` are reproduced by :func:`round_robin`,
:func:`random_choice` and :func:`lor` with Vidur's semantics (``lor`` counts only waiting requests
and breaks ties toward the lowest index), so every heuristic can run through the same env.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from .prefix_baselines import PREFIX_BASELINES, affinity_token_load, cache_aware
from .snapshot import ReplicaSnapshot
from .ties import argmin_random


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


#: ``prefix_aware`` follows the cache only when some replica holds at least this share of the prompt.
PREFIX_MATCH_THRESHOLD = 0.3
#: load is imbalanced (``prefix_aware`` falls back to the least loaded) when the most and least
#: loaded replicas differ by more than this many outstanding requests *and* by more than
#: ``PREFIX_IMBALANCE_RATIO`` times (SGLang's cache-aware rule, thresholds sized for small engines).
PREFIX_IMBALANCE_ABS = 4.0
PREFIX_IMBALANCE_RATIO = 1.5


def load_imbalanced(load: np.ndarray, abs_gap: float = PREFIX_IMBALANCE_ABS, ratio: float = PREFIX_IMBALANCE_RATIO) -> bool:
    """Whether the most and least loaded differ by more than ``abs_gap`` and by more than ``ratio`` times."""
    high, low = float(np.max(load)), float(np.min(load))
    return high - low > abs_gap and high > ratio * low


def prefix_aware(snapshot: ReplicaSnapshot, rng: np.random.Generator) -> int:
    """Cache affinity with a load-balance guard (SGLang's cache-aware router, Ray Serve's prefix router).

    While load (outstanding requests) is balanced, route to the replica holding the longest prefix
    of the request if it covers at least ``PREFIX_MATCH_THRESHOLD`` of the prompt (ties: the less
    loaded); otherwise, and whenever load is imbalanced, to the least loaded replica.
    """
    load = snapshot.outstanding_requests
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    if load_imbalanced(load) or match.max() < PREFIX_MATCH_THRESHOLD:
        return argmin_random(load, rng)
    best = np.flatnonzero(match == match.max())
    return int(best[argmin_random(load[best], rng)])


def cap_jsq(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Fewest outstanding requests per unit of declared speed."""
    return argmin_random(snapshot.outstanding_requests / snapshot.declared_speed, rng)


def cap_least_tokens(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Fewest outstanding known tokens per unit of declared speed."""
    return argmin_random(snapshot.outstanding_tokens / snapshot.declared_speed, rng)


def expected_wait(snapshot: ReplicaSnapshot, prompt_tokens: float, speeds: np.ndarray) -> np.ndarray:
    """Prompt tokens ahead of (and including) a new request of ``prompt_tokens``, divided by each replica's speed.

    Proportional to the time until its first token when the replicas share one prefill rate per unit speed.
    """
    speeds = np.asarray(speeds, dtype=np.float64)
    if np.any(speeds <= 0):
        raise ValueError(f"speeds must be positive, got {speeds}")
    return (snapshot.prefill_tokens + float(prompt_tokens)) / speeds


def cap_least_prefill(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Least expected wait with the declared speeds."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, snapshot.declared_speed), rng)


def adaptive(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0) -> int:
    """Least expected wait with the speeds measured online (``snapshot.measured_speed``)."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, snapshot.measured_speed), rng)


def oracle(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float, true_speed: np.ndarray) -> int:
    """Least expected wait with the true current speeds (for reference only: no router knows them)."""
    return argmin_random(expected_wait(snapshot, prompt_tokens, true_speed), rng)


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

#: load-aware heuristics that take (snapshot, rng) and ignore speed.
HEURISTICS: dict[str, Heuristic] = {
    "jsq": jsq,
    "least_kv": least_kv,
    "least_tokens": least_tokens,
    "least_prefill": least_prefill,
    "power_of_two": power_of_two,
    "prefix_aware": prefix_aware,
}
#: heuristics that take (snapshot, rng, prompt_tokens) and read declared or measured speed.
SPEED_HEURISTICS: dict[str, Callable[[ReplicaSnapshot, np.random.Generator, float], int]] = {
    "cap_jsq": cap_jsq,
    "cap_least_tokens": cap_least_tokens,
    "cap_least_prefill": cap_least_prefill,
    "adaptive": adaptive,
}
#: capacity-aware heuristics (declared speed only).
CAPACITY_AWARE = ("cap_jsq", "cap_least_tokens", "cap_least_prefill")
#: Vidur's built-in global schedulers, reproduced for the env.
VIDUR_BASELINES = ("round_robin", "random", "lor")
#: every heuristic name (``oracle`` needs the true speeds); :func:`schedulers.routing.policy.make_policy` builds each.
#: The industry's prefix-cache routers (:mod:`schedulers.routing.prefix_baselines`) take parameters.
HEURISTIC_NAMES = VIDUR_BASELINES + tuple(HEURISTICS) + tuple(SPEED_HEURISTICS) + ("oracle",) + tuple(PREFIX_BASELINES)


def choose(
    name: str,
    snapshot: ReplicaSnapshot,
    rng: np.random.Generator,
    *,
    decision_index: int = 0,
    prompt_tokens: float = 0.0,
    true_speed: np.ndarray | None = None,
    params: Mapping[str, float] | None = None,
) -> int:
    """The replica heuristic ``name`` picks for a request of ``prompt_tokens``.

    ``decision_index`` is used by ``round_robin`` only; ``true_speed`` (current speed of every
    replica) by ``oracle`` only; ``params`` by the prefix baselines only (``cache_aware``,
    ``affinity_token_load``: their thresholds; defaults when not given).
    """
    if params and name not in PREFIX_BASELINES:
        raise ValueError(f"heuristic {name!r} takes no parameters, got {sorted(params)}")
    if name == "cache_aware":
        return cache_aware(snapshot, rng, **(params or {}))
    if name == "affinity_token_load":
        return affinity_token_load(snapshot, rng, prompt_tokens, **(params or {}))
    if name in HEURISTICS:
        return HEURISTICS[name](snapshot, rng)
    if name in SPEED_HEURISTICS:
        return SPEED_HEURISTICS[name](snapshot, rng, prompt_tokens)
    if name == "oracle":
        if true_speed is None:
            raise ValueError("the oracle router needs the true current speeds (true_speed=...)")
        return oracle(snapshot, rng, prompt_tokens, true_speed)
    if name == "round_robin":
        return round_robin(decision_index, snapshot.num_replicas)
    if name == "random":
        return random_choice(snapshot.num_replicas, rng)
    if name == "lor":
        return lor(snapshot)
    raise ValueError(f"unknown heuristic {name!r}; expected one of: {', '.join(HEURISTIC_NAMES)}")
