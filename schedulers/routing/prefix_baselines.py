"""The industry's prefix-cache routers as baselines: SGLang's ``cache_aware`` and llm-d's ``affinity_token_load``.

Both read the router's own mirror of what each replica's prefix cache holds
(``ReplicaSnapshot.prefix_match``: the share of the arriving prompt, ``prefix_blocks``: the size of
each replica's mirror), as the originals do, and nothing a real router could not know.

``cache_aware`` (SGLang Model Gateway, its default policy; sgl-router's ``CacheAwarePolicy``)
    Load is the requests the router has in flight on each worker. When the most and least loaded
    differ by more than ``balance_abs_threshold`` requests *and* the most loaded carries more than
    ``balance_rel_threshold`` times the least, route to the least loaded. Otherwise route to the
    worker with the longest prefix match if it covers more than ``cache_threshold`` of the prompt,
    else to the worker whose prefix tree is smallest (the most room to cache). Defaults are
    SGLang's: 0.3, 64 and 1.5. Ties (equal match, equal tree) are broken at random.

``affinity_token_load`` (llm-d's default scheduling since 2026-08, "sticky until saturated")
    A prefix-cache affinity filter keeps a request on the replicas holding its longest cached
    prefix (match above ``min_match``) unless they are saturated; a saturated replica has at
    least ``queue_threshold`` requests waiting or ``kv_threshold`` of its KV cache in use
    (llm-d's saturation detector and its defaults, 5 and 0.8). Among the replicas the filter
    keeps (all of them when it keeps none), the scorer picks the least token load: the uncached
    prompt tokens in flight on the replica plus the arriving prompt's tokens it has not cached,
    ``prefill_tokens + prompt_tokens * (1 - prefix_match)``.

The parameters are keyword arguments of :func:`cache_aware` and :func:`affinity_token_load` (and of
:class:`CacheAwareParams` / :class:`AffinityTokenLoadParams`), configurable wherever a router is named:
``cache_aware:balance_abs_threshold=8`` (:func:`parse_router_spec`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .snapshot import ReplicaSnapshot
from .ties import argmin_random


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
        _check_range("cache_threshold", self.cache_threshold, 0.0, 1.0)
        _check_range("balance_abs_threshold", self.balance_abs_threshold, 0.0, float("inf"))
        _check_range("balance_rel_threshold", self.balance_rel_threshold, 1.0, float("inf"))


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
        _check_range("min_match", self.min_match, 0.0, 1.0)
        _check_range("queue_threshold", self.queue_threshold, 0.0, float("inf"))
        _check_range("kv_threshold", self.kv_threshold, 0.0, 1.0)


def _check_range(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        upper = "" if high == float("inf") else f" and <= {high:g}"
        raise ValueError(f"{name}: expected a number >= {low:g}{upper}, got {value!r}")


def imbalanced(load: np.ndarray, abs_threshold: float, rel_threshold: float) -> bool:
    """SGLang's test: max - min load above ``abs_threshold`` and max above ``rel_threshold`` times min."""
    high, low = float(np.max(load)), float(np.min(load))
    return high - low > abs_threshold and high > low * rel_threshold


def cache_aware(snapshot: ReplicaSnapshot, rng: np.random.Generator, **params: Any) -> int:
    """SGLang's cache-aware choice (see the module doc); ``params`` override :class:`CacheAwareParams`."""
    p = CacheAwareParams(**params)
    load = snapshot.outstanding_requests
    if imbalanced(load, p.balance_abs_threshold, p.balance_rel_threshold):
        return argmin_random(load, rng)
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    if match.max() > p.cache_threshold:
        return argmin_random(-match, rng)
    return argmin_random(np.asarray(snapshot.prefix_blocks, dtype=np.float64), rng)


def affinity_token_load(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0,
                        **params: Any) -> int:
    """llm-d's sticky-until-saturated affinity plus token load (see the module doc)."""
    p = AffinityTokenLoadParams(**params)
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    score = snapshot.prefill_tokens + float(prompt_tokens) * (1.0 - match)
    saturated = (snapshot.waiting >= p.queue_threshold) | (snapshot.kv_fraction >= p.kv_threshold)
    sticky = (match == match.max()) & (match > p.min_match) & ~saturated
    if sticky.any():
        keep = np.flatnonzero(sticky)
        return int(keep[argmin_random(score[keep], rng)])
    return argmin_random(score, rng)


#: name -> (rule, its parameters' dataclass).
PREFIX_BASELINES = {
    "cache_aware": (cache_aware, CacheAwareParams),
    "affinity_token_load": (affinity_token_load, AffinityTokenLoadParams),
}


def parse_router_spec(spec: str) -> tuple[str, dict[str, float]]:
    """``"cache_aware:balance_abs_threshold=8:cache_threshold=0.5"`` -> the name and its parameters.

    Only the prefix baselines take parameters; each value is checked by its dataclass. Errors name
    the spec and the parameters the router has.
    """
    name, *pairs = [part.strip() for part in str(spec).split(":")]
    if not pairs:
        return name, {}
    if name not in PREFIX_BASELINES:
        raise ValueError(f"router {spec!r}: only {', '.join(PREFIX_BASELINES)} take parameters (name:key=value)")
    fields = [f.name for f in dataclasses.fields(PREFIX_BASELINES[name][1])]
    params: dict[str, float] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or key not in fields:
            raise ValueError(f"router {spec!r}: expected key=value with a key among {', '.join(fields)}, got {pair!r}")
        try:
            params[key] = float(value)
        except ValueError:
            raise ValueError(f"router {spec!r}: {key}: expected a number, got {value!r}") from None
    try:
        PREFIX_BASELINES[name][1](**params)
    except ValueError as exc:
        raise ValueError(f"router {spec!r}: {exc}") from None
    return name, params
