"""``least_load``: SGLang's model gateway (shipped as ``smg``) routing to the least expected wait.

Follows smg 1.11 (smg-project/smg, ``model_gateway/src/policies/least_load.rs``; the policy came in
with lightseekorg/smg 1.6). Every replica gets a score in seconds and the lowest wins, ties at random::

    score_i = (queued_tokens_i + inflight_tokens_i) / throughput_i + kv_pressure_weight * k_i / (1 - k_i)

- ``queued_tokens``: the engine's waiting queue in tokens (SGLang's ``num_waiting_uncached_tokens``);
  a replica that reports waiting requests but no tokens for them counts ``mean_prefill_tokens``
  (1,024) per waiting request;
- ``inflight_tokens``: what the router sent the replica since the engine last reported;
- ``throughput``: the engine's reported generation rate, or ``default_throughput`` (2,000 tokens/s)
  when it reports none;
- ``k``: the share of the KV cache in use, clamped to [0, 0.999] (the barrier ``k / (1 - k)`` grows
  without bound as the cache fills); ``kv_pressure_weight`` (lambda) 0.15 s.

Where it differs from smg, and why:

- The queued tokens are the snapshot's ``waiting_prefill_tokens``, and smg's since-poll in-flight
  correction is already in them: the simulator's snapshot is exact at each decision (prompt tokens of
  the requests not yet admitted, cut to the part the replica had not cached), and the gateway's and
  the Ray router's view counts every request it sent until its first token, on top of the engines'
  last reports (``schedulers/live/view.py``). Live the count is each waiting request's whole prompt:
  the gateway cannot see how much of it the engine had cached. When a replica shows waiting requests
  (an engine's report, with other clients' requests) but no tokens, ``mean_prefill_tokens`` per
  request stands in, as in smg.
- The throughput read is the snapshot's ``tokens_per_s``: prompt and output tokens the replica
  processed per second over the recent window (the only rate the simulator, the gateway and Ray all
  have). SGLang's ``gen_throughput`` counts generated tokens only, so on prompt-heavy work the rate
  here is higher and the queue term smaller against the KV term. ``measured_throughput=0`` divides by
  ``default_throughput`` on every replica, as smg does for an engine that reports no rate (vLLM's
  Prometheus metrics carry none).
- smg's fallbacks for replicas that never reported (join the shortest queue of requests; the best
  peer's score for one missing report) never apply: every snapshot has every replica's counts.
- smg's ``max_waiting_requests`` veto (off by default) is not modelled: a router here must pick a
  replica, it has no admission queue to hold a request back in.

Parameters are set wherever a router is named: ``least_load:kv_pressure_weight=0.3``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random
from .prefix import check_range

#: the KV share at which the pressure barrier is evaluated at most (smg clamps k to [0, 0.999]).
MAX_KV_SHARE = 0.999


@dataclass(frozen=True)
class LeastLoadParams:
    """smg's ``least_load`` settings (its defaults)."""

    #: seconds of expected wait one unit of KV pressure ``k / (1 - k)`` is worth (lambda).
    kv_pressure_weight: float = 0.15
    #: tokens per second a replica drains when it reports no rate (or when ``measured_throughput`` is 0).
    default_throughput: float = 2000.0
    #: tokens counted per waiting request when a replica reports waiting requests but no tokens for them.
    mean_prefill_tokens: float = 1024.0
    #: 1: divide by the replica's own ``tokens_per_s`` when it is positive; 0: by ``default_throughput`` always.
    measured_throughput: float = 1.0

    def __post_init__(self) -> None:
        check_range("kv_pressure_weight", self.kv_pressure_weight, 0.0, float("inf"))
        check_range("default_throughput", self.default_throughput, 1e-9, float("inf"))
        check_range("mean_prefill_tokens", self.mean_prefill_tokens, 1.0, float("inf"))
        if isinstance(self.measured_throughput, bool) or self.measured_throughput not in (0, 1):
            raise ValueError(f"measured_throughput: expected 0 or 1, got {self.measured_throughput!r}")


def least_load_scores(snapshot: ReplicaSnapshot, params: LeastLoadParams = LeastLoadParams()) -> list[float]:
    """Every replica's expected wait in seconds under smg's ``least_load`` (see the module doc)."""
    queued_tokens = snapshot.floats("waiting_prefill_tokens")
    waiting = snapshot.floats("waiting")
    used, capacity = snapshot.floats("kv_blocks"), snapshot.floats("kv_capacity")
    rates = snapshot.floats("tokens_per_s") if params.measured_throughput else [0.0] * len(waiting)
    scores = []
    for tokens, requests, blocks, total, rate in zip(queued_tokens, waiting, used, capacity, rates, strict=True):
        queued = tokens if tokens > 0 else max(requests, 0.0) * params.mean_prefill_tokens
        throughput = rate if rate > 0 else params.default_throughput
        k = min(max(blocks / max(total, 1.0), 0.0), MAX_KV_SHARE)
        scores.append(queued / throughput + params.kv_pressure_weight * k / (1.0 - k))
    return scores


@register_policy("least_load")
class LeastLoad(HeuristicPolicy):
    """SGLang gateway's ``least_load``: the least queued work over throughput plus a KV-pressure barrier."""

    Params = LeastLoadParams

    def __init__(self, params: LeastLoadParams | None = None) -> None:
        super().__init__(params or LeastLoadParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        return argmin_random(least_load_scores(snapshot, self.params), self.rng)
