"""Prefix-cache policies: ``prefix_aware`` and the industry's prefix-cache routers as baselines,
SGLang's ``cache_aware`` and llm-d's ``affinity_token_load``.

All read the router's own mirror of what each replica's prefix cache holds
(``ReplicaSnapshot.prefix_match``: the share of the arriving prompt, ``prefix_blocks``: the size of
each replica's mirror), as the originals do, and nothing a real router could not know.

``prefix_aware`` (SGLang's cache-aware rule with thresholds sized for small engines; Ray Serve's prefix router)
    While load (outstanding requests) is balanced, route to the replica holding the longest prefix
    of the request if it covers at least ``PREFIX_MATCH_THRESHOLD`` of the prompt (ties: the less
    loaded); otherwise, and whenever load is imbalanced, to the least loaded replica.

``cache_aware`` (SGLang Model Gateway, its default policy; sgl-router's ``CacheAwarePolicy``)
    Load is the requests the router has in flight on each worker. When the most and least loaded
    differ by more than ``balance_abs_threshold`` requests *and* the most loaded carries more than
    ``balance_rel_threshold`` times the least, route to the least loaded. Otherwise route to the
    worker with the longest prefix match if it covers more than ``cache_threshold`` of the prompt,
    else to the worker whose prefix tree is smallest (the most room to cache). Defaults are
    SGLang's: 0.3, 64 and 1.5. Ties (equal match, equal tree) are broken at random.

``affinity_token_load`` (llm-d's prefix-affinity routing: ``prefix-cache-affinity-filter`` then ``token-load-scorer``)
    A prefix-cache affinity filter keeps a request on the replicas holding its longest cached
    prefix (match above ``min_match``) unless they are saturated; a saturated replica has at
    least ``queue_threshold`` requests waiting or ``kv_threshold`` of its KV cache in use
    (llm-d's saturation detector and its defaults, 5 and 0.8). Among the replicas the filter
    keeps (all of them when it keeps none), the scorer picks the least token load: the uncached
    prompt tokens in flight on the replica plus the arriving prompt's tokens it has not cached,
    ``prefill_tokens + prompt_tokens * (1 - prefix_match)``.

Parameters are set wherever a router is named: ``cache_aware:balance_abs_threshold=8``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random

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
    """Cache affinity with a load-balance guard (see the module doc)."""
    load = snapshot.outstanding_requests
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    if load_imbalanced(load) or match.max() < PREFIX_MATCH_THRESHOLD:
        return argmin_random(load, rng)
    best = np.flatnonzero(match == match.max())
    return int(best[argmin_random(load[best], rng)])


def check_range(name: str, value: Any, low: float, high: float) -> None:
    """ValueError naming ``name`` unless ``value`` is a number in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        upper = "" if high == float("inf") else f" and <= {high:g}"
        raise ValueError(f"{name}: expected a number >= {low:g}{upper}, got {value!r}")


@dataclass(frozen=True)
class CacheAwareParams:
    """SGLang's cache-aware thresholds (its defaults)."""

    #: follow the cache when the longest match covers more than this share of the prompt.
    cache_threshold: float = 0.3
    #: load is imbalanced when max - min load exceeds this many requests ...
    balance_abs_threshold: float = 64.0
    #: ... and max load exceeds this many times the min load.
    balance_rel_threshold: float = 1.5

    def __post_init__(self) -> None:
        check_range("cache_threshold", self.cache_threshold, 0.0, 1.0)
        check_range("balance_abs_threshold", self.balance_abs_threshold, 0.0, float("inf"))
        check_range("balance_rel_threshold", self.balance_rel_threshold, 1.0, float("inf"))


@dataclass(frozen=True)
class AffinityTokenLoadParams:
    """llm-d's prefix affinity ("sticky until saturated") and token-load scorer settings."""

    #: a replica is in the affinity set when its match is the longest and above this share.
    min_match: float = 0.0
    #: saturated: at least this many requests waiting ...
    queue_threshold: float = 5.0
    #: ... or at least this share of the KV cache in use.
    kv_threshold: float = 0.8

    def __post_init__(self) -> None:
        check_range("min_match", self.min_match, 0.0, 1.0)
        check_range("queue_threshold", self.queue_threshold, 0.0, float("inf"))
        check_range("kv_threshold", self.kv_threshold, 0.0, 1.0)


def imbalanced(load: np.ndarray, abs_threshold: float, rel_threshold: float) -> bool:
    """SGLang's test: max - min load above ``abs_threshold`` and max above ``rel_threshold`` times min."""
    high, low = float(np.max(load)), float(np.min(load))
    return high - low > abs_threshold and high > low * rel_threshold


def cache_aware(snapshot: ReplicaSnapshot, rng: np.random.Generator, params: CacheAwareParams = CacheAwareParams()) -> int:
    """SGLang's cache-aware choice (see the module doc)."""
    p = params
    load = snapshot.outstanding_requests
    if imbalanced(load, p.balance_abs_threshold, p.balance_rel_threshold):
        return argmin_random(load, rng)
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    if match.max() > p.cache_threshold:
        return argmin_random(-match, rng)
    return argmin_random(np.asarray(snapshot.prefix_blocks, dtype=np.float64), rng)


def affinity_token_load(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0,
                        params: AffinityTokenLoadParams = AffinityTokenLoadParams()) -> int:
    """llm-d's prefix affinity plus token load (see the module doc)."""
    p = params
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    score = snapshot.prefill_tokens + float(prompt_tokens) * (1.0 - match)
    saturated = (snapshot.waiting >= p.queue_threshold) | (snapshot.kv_fraction >= p.kv_threshold)
    sticky = (match == match.max()) & (match > p.min_match) & ~saturated
    if sticky.any():
        keep = np.flatnonzero(sticky)
        return int(keep[argmin_random(score[keep], rng)])
    return argmin_random(score, rng)


@register_policy("prefix_aware")
class PrefixAware(HeuristicPolicy):
    """Longest cached prefix while load is balanced, else the least loaded."""

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return prefix_aware(snapshot, self.rng)


@register_policy("cache_aware")
class CacheAware(HeuristicPolicy):
    """SGLang's default policy, with its thresholds as parameters."""

    Params = CacheAwareParams

    def __init__(self, params: CacheAwareParams | None = None) -> None:
        super().__init__(params or CacheAwareParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return cache_aware(snapshot, self.rng, self.params)


@register_policy("affinity_token_load")
class AffinityTokenLoad(HeuristicPolicy):
    """llm-d's prefix-affinity filter then its token-load scorer, with their thresholds as parameters."""

    Params = AffinityTokenLoadParams

    def __init__(self, params: AffinityTokenLoadParams | None = None) -> None:
        super().__init__(params or AffinityTokenLoadParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return affinity_token_load(snapshot, self.rng, prompt_tokens, self.params)
