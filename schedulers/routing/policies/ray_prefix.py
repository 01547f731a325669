"""``ray_prefix_affinity``: Ray Serve LLM's ``PrefixCacheAffinityRouter`` rule, for the simulator.

Ray's class (``ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router``, Ray
2.60) is Ray code (a prefix-tree actor, Serve's replica queue-length cache), so it cannot run in
Vidur; this policy follows its decision rule on the simulator's snapshot, so its two thresholds can
be tuned on the training workloads like the other industry rules:

1. **Imbalance.** If the most and least loaded replicas differ by more than
   ``imbalanced_threshold`` requests in flight (Ray: the replicas' queue lengths; default ``inf``,
   never), route as Ray's default does: power of two choices (two distinct replicas at random, the
   one with fewer requests in flight).
2. **Prefix match.** Otherwise take the replicas holding the longest prefix of the prompt. If that
   prefix covers at least ``match_rate_threshold`` of the prompt (default 0.1), they are the
   candidates; if not, the replicas whose prefix tree is smallest are (Ray's "smallest tenants").
   Among the candidates, the one with fewer requests in flight (Ray's router picks the shortest
   queue in the rank it is given); remaining ties at random.

Where the simulator cannot mirror Ray exactly:

- Ray's tree is over the prompt's *characters* (the chat messages' text concatenated), the match
  rate a share of characters; here it is the router's block mirror
  (:class:`schedulers.routing.prefix_index.PrefixIndex`: chained hashes of full 32-item blocks, so a
  partial last block never counts and the share is measured in blocks of tokens).
- Ray's tree never forgets by default (``do_eviction=False``) and its size is every character
  routed to a replica; the mirror here is LRU-bounded as an engine's cache is, and its size
  (``ReplicaSnapshot.prefix_blocks``) is in blocks.
- Ray reads queue lengths from a cache refreshed by probes and the replicas' pushes (a replica at
  ``max_ongoing_requests`` is probed again); here they are the snapshot's outstanding requests,
  exact at decision time.
- Ray's power-of-two draw and tie-breaking use Python's ``random``; here the policy's seeded
  generator.

Parameters are set wherever a router is named: ``ray_prefix_affinity:imbalanced_threshold=1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random
from .load import power_of_two
from .prefix import check_range


@dataclass(frozen=True)
class RayPrefixAffinityParams:
    """``PrefixCacheAffinityRouter``'s routing thresholds (Ray's defaults)."""

    #: load is imbalanced (route by power of two choices) when max - min requests in flight exceed this.
    imbalanced_threshold: float = float("inf")
    #: follow the longest prefix only when it covers at least this share of the prompt.
    match_rate_threshold: float = 0.1

    def __post_init__(self) -> None:
        check_range("imbalanced_threshold", self.imbalanced_threshold, 0.0, float("inf"))
        check_range("match_rate_threshold", self.match_rate_threshold, 0.0, 1.0)


def ray_prefix_affinity(snapshot: ReplicaSnapshot, rng: np.random.Generator,
                        params: RayPrefixAffinityParams = RayPrefixAffinityParams()) -> int:
    """Ray Serve LLM's prefix-affinity choice on a snapshot (see the module doc)."""
    load = snapshot.outstanding_requests
    if float(np.max(load)) - float(np.min(load)) > params.imbalanced_threshold:
        return power_of_two(snapshot, rng)
    match = np.asarray(snapshot.prefix_match, dtype=np.float64)
    if match.max() >= params.match_rate_threshold:
        candidates = np.flatnonzero(match == match.max())
    else:
        tree = np.asarray(snapshot.prefix_blocks, dtype=np.float64)
        candidates = np.flatnonzero(tree == tree.min())
    return int(candidates[argmin_random(load[candidates], rng)])


@register_policy("ray_prefix_affinity")
class RayPrefixAffinity(HeuristicPolicy):
    """Ray Serve LLM's ``PrefixCacheAffinityRouter`` rule, with its two thresholds as parameters."""

    Params = RayPrefixAffinityParams

    def __init__(self, params: RayPrefixAffinityParams | None = None) -> None:
        super().__init__(params or RayPrefixAffinityParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return ray_prefix_affinity(snapshot, self.rng, self.params)
