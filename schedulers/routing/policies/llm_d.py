"""``llm_d_default``: llm-d's router as it routes with no configuration.

Given no configuration, llm-d's endpoint picker builds one scheduling profile of three scorers and
a max-score picker (``loadDefaultConfig`` in llm-d-router's ``pkg/epp/config/loader/defaults.go``):

======================================  ======  ===============================================
scorer                                  weight  score of replica i, in [0, 1]
======================================  ======  ===============================================
``queue-scorer``                        2       ``(max_q - q_i) / (max_q - min_q)`` over the
                                                candidates' waiting requests ``q``; 1 when all
                                                are equal
``kv-cache-utilization-scorer``         2       ``1 - KV-cache usage``
``prefix-cache-scorer``                 3       matched prompt blocks / the prompt's blocks
======================================  ======  ===============================================

Each score is clamped to [0, 1] and the weighted sum is the replica's score; ``max-score-picker``
shuffles the candidates and takes the highest (ties at random). Here the waiting requests are the
snapshot's ``waiting``, the KV-cache usage its ``kv_fraction`` and the matched share its
``prefix_match`` (the router's own mirror of each replica's cache, as llm-d's approximate prefix
index is). The weights are parameters: ``llm_d_default:prefix_weight=5``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot, as_floats
from ..ties import argmin_random
from .prefix import check_range


@dataclass(frozen=True)
class LlmDDefaultParams:
    """The default profile's scorer weights."""

    queue_weight: float = 2.0
    kv_cache_weight: float = 2.0
    prefix_weight: float = 3.0

    def __post_init__(self) -> None:
        for name in ("queue_weight", "kv_cache_weight", "prefix_weight"):
            check_range(name, getattr(self, name), 0.0, float("inf"))


def queue_scores(waiting: np.ndarray) -> np.ndarray:
    """llm-d's queue scorer: fewer waiting requests score higher, min-max normalized; all 1 when equal."""
    return np.array(_queue_scores(as_floats(waiting)))


def _queue_scores(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    if high == low:
        return [1.0] * len(values)
    return [(high - w) / (high - low) for w in values]


def _unit(value: float) -> float:
    """``value`` clamped to [0, 1] (NaN stays NaN, as np.clip leaves it)."""
    return min(max(value, 0.0), 1.0)


def llm_d_scores(snapshot: ReplicaSnapshot, params: LlmDDefaultParams = LlmDDefaultParams()) -> np.ndarray:
    """Every replica's weighted score under llm-d's default profile (see the module doc)."""
    return np.array(_llm_d_scores(snapshot, params))


def _llm_d_scores(snapshot: ReplicaSnapshot, params: LlmDDefaultParams) -> list[float]:
    """:func:`llm_d_scores` as a list, in plain Python over the replicas (cheaper than NumPy's calls on a
    handful, see ``snapshot.as_floats``); the KV use is ``ReplicaSnapshot.kv_fraction``'s, to the bit."""
    queue = _queue_scores(snapshot.floats("waiting"))
    kv = [b / max(c, 1.0) for b, c in zip(snapshot.floats("kv_blocks"), snapshot.floats("kv_capacity"), strict=True)]
    prefix = snapshot.floats("prefix_match")
    wq, wk, wp = params.queue_weight, params.kv_cache_weight, params.prefix_weight
    return [wq * _unit(q) + wk * _unit(1.0 - k) + wp * _unit(m) for q, k, m in zip(queue, kv, prefix, strict=True)]


@register_policy("llm_d_default")
class LlmDDefault(HeuristicPolicy):
    """llm-d's default profile: queue 2, KV-cache utilization 2, prefix cache 3, max score, ties at random."""

    Params = LlmDDefaultParams

    def __init__(self, params: LlmDDefaultParams | None = None) -> None:
        super().__init__(params or LlmDDefaultParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return argmin_random([-score for score in _llm_d_scores(snapshot, self.params)], self.rng)
