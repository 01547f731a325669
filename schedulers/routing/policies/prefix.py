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

``affinity_token_load`` (llm-d's ``prefix-cache-affinity-filter`` followed by its ``token-load-scorer``)
    The filter (llm-d-router, ``pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity``)
    keeps the *sticky* replicas, those whose cached share of the prompt is at least
    ``affinity_threshold`` (0.80), unless: with probability ``exploration_probability`` (0.01) it
    keeps every replica (exploration); no replica is sticky; or the best sticky replica's estimated
    TTFT exceeds the best non-sticky one's by more than ``max_ttft_penalty_ms`` (5,000 ms; 0: always
    stick). The TTFT estimate is llm-d's ``prefillThroughput`` source: in-flight prompt tokens /
    ``peak_prefill_tokens_per_s`` (llm-d's default, 15,928 tokens/s) x 1000. Among the replicas kept,
    the token-load scorer's max score is the least token load: the prompt tokens in flight plus the
    arriving prompt's tokens the replica has not cached, ``prefill_tokens + prompt_tokens * (1 -
    prefix_match)``, capped at ``queue_threshold_tokens`` (4 Mi, its default); ties at random.

    Where it differs from llm-d, and why: the in-flight prompt tokens are the snapshot's
    ``prefill_tokens`` (prompt tokens not yet processed, queued or running: the simulator knows them,
    the gateway counts them until a request's first token), where llm-d's in-flight-load producer
    counts each dispatched request's *uncached* prompt tokens until its first token; a replica's
    cached share of its queued prompts is not in the snapshot. llm-d draws exploration from Go's
    global generator, this policy from its own seeded one (one draw per decision with more than one
    replica).

    Which version: the filter's code of llm-d-router v0.9.0-v0.10.0 (the TTFT gate on the prefill
    throughput) with the values of its README's configuration example, exploration 0.01 and 5,000 ms,
    which were the code defaults until that gate came in. Since v0.9.0 the code defaults are 0 and
    18,000 ms: that is ``llm_d_optimized`` (:mod:`.llm_d_optimized`), the same rule at the current
    defaults. This name keeps the older values because every result measured here names it.

Parameters are set wherever a router is named: ``cache_aware:balance_abs_threshold=8``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot, as_floats
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
    return imbalanced(load, abs_gap, ratio)


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
    """llm-d's prefix-cache affinity filter and token-load scorer settings (see the module doc)."""

    #: a replica is sticky when at least this share of the prompt is cached there (``affinityThreshold``).
    affinity_threshold: float = 0.80
    #: the chance of keeping every replica for exploration (``explorationProbability``).
    exploration_probability: float = 0.01
    #: stickiness is dropped when the best sticky replica's estimated TTFT is this many ms worse than the
    #: best other one's (``maxTTFTPenaltyMs``); 0: always stick.
    max_ttft_penalty_ms: float = 5000.0
    #: prompt tokens per second a replica prefills, for the TTFT estimate (``peakPrefillThroughput``).
    peak_prefill_tokens_per_s: float = 15928.0
    #: the token load at which the scorer's score reaches 0 (``queueThresholdTokens``).
    queue_threshold_tokens: float = 4194304.0

    def __post_init__(self) -> None:
        check_range("affinity_threshold", self.affinity_threshold, 0.0, 1.0)
        check_range("exploration_probability", self.exploration_probability, 0.0, 1.0)
        check_range("max_ttft_penalty_ms", self.max_ttft_penalty_ms, 0.0, float("inf"))
        check_range("peak_prefill_tokens_per_s", self.peak_prefill_tokens_per_s, 1e-9, float("inf"))
        check_range("queue_threshold_tokens", self.queue_threshold_tokens, 1.0, float("inf"))


def imbalanced(load: np.ndarray, abs_threshold: float, rel_threshold: float) -> bool:
    """SGLang's test: max - min load above ``abs_threshold`` and max above ``rel_threshold`` times min.

    (Here and below, small arrays are read as lists: see :func:`~..snapshot.as_floats`.)"""
    values = as_floats(load)
    high, low = max(values), min(values)
    return high - low > abs_threshold and high > low * rel_threshold


def cache_aware(snapshot: ReplicaSnapshot, rng: np.random.Generator, params: CacheAwareParams = CacheAwareParams()) -> int:
    """SGLang's cache-aware choice (see the module doc)."""
    p = params
    load = [w + r for w, r in zip(snapshot.floats("waiting"), snapshot.floats("running"), strict=True)]
    if imbalanced(load, p.balance_abs_threshold, p.balance_rel_threshold):
        return argmin_random(load, rng)
    match = snapshot.floats("prefix_match")
    if max(match) > p.cache_threshold:
        return argmin_random([-m for m in match], rng)
    return argmin_random(snapshot.floats("prefix_blocks"), rng)


def affinity_filter(snapshot: ReplicaSnapshot, rng: np.random.Generator,
                    params: AffinityTokenLoadParams = AffinityTokenLoadParams()) -> np.ndarray:
    """The replicas llm-d's ``prefix-cache-affinity-filter`` keeps (a boolean mask; see the module doc)."""
    return np.array(_affinity_keep(as_floats(snapshot.prefix_match), as_floats(snapshot.prefill_tokens), rng, params),
                    dtype=bool)


def _affinity_keep(match: list[float], prefill: list[float], rng: np.random.Generator,
                   p: AffinityTokenLoadParams) -> list[bool]:
    keep_all = [True] * len(match)
    if len(match) <= 1 or p.affinity_threshold <= 0:
        return keep_all
    if rng.random() < p.exploration_probability:
        return keep_all
    sticky = [m >= p.affinity_threshold for m in match]
    if not any(sticky):
        return keep_all
    if p.max_ttft_penalty_ms > 0 and not all(sticky):
        ttft_ms = [t / p.peak_prefill_tokens_per_s * 1000.0 for t in prefill]
        best_sticky = min(t for t, s in zip(ttft_ms, sticky, strict=True) if s)
        best_other = min(t for t, s in zip(ttft_ms, sticky, strict=True) if not s)
        if best_sticky - best_other > p.max_ttft_penalty_ms:
            return keep_all
    return sticky


def token_load(snapshot: ReplicaSnapshot, prompt_tokens: float,
               params: AffinityTokenLoadParams = AffinityTokenLoadParams()) -> np.ndarray:
    """llm-d's token load: prompt tokens in flight plus the arriving prompt's uncached tokens, capped."""
    return np.array(_token_load(as_floats(snapshot.prefix_match), as_floats(snapshot.prefill_tokens), prompt_tokens,
                                params))


def _token_load(match: list[float], prefill: list[float], prompt_tokens: float,
                params: AffinityTokenLoadParams) -> list[float]:
    tokens, cap = float(prompt_tokens), params.queue_threshold_tokens
    return [min(f + tokens * (1.0 - m), cap) for f, m in zip(prefill, match, strict=True)]


def affinity_token_load(snapshot: ReplicaSnapshot, rng: np.random.Generator, prompt_tokens: float = 0.0,
                        params: AffinityTokenLoadParams = AffinityTokenLoadParams()) -> int:
    """llm-d's prefix-cache affinity filter, then the least token load among the replicas it keeps
    (each snapshot field read once)."""
    match, prefill = snapshot.floats("prefix_match"), snapshot.floats("prefill_tokens")
    keep = [i for i, kept in enumerate(_affinity_keep(match, prefill, rng, params)) if kept]
    load = _token_load(match, prefill, prompt_tokens, params)
    return keep[argmin_random([load[i] for i in keep], rng)]


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
    """llm-d's prefix-cache affinity filter then its token-load scorer, with their settings as parameters."""

    Params = AffinityTokenLoadParams

    def __init__(self, params: AffinityTokenLoadParams | None = None) -> None:
        super().__init__(params or AffinityTokenLoadParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return affinity_token_load(snapshot, self.rng, prompt_tokens, self.params)
