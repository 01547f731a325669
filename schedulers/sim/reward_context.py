"""The step reward context: what each routing step tells the reward composer about the simulated cluster.

Each step feeds the reward composer (``env_config.reward_config``) this context, describing
the ``dt`` simulated seconds from the previous decision to this one; ``info["reward_terms"]``
holds ``out.as_dict()``:

=======================  ======================================================================
dt                       simulated seconds since the previous decision (0 on the last step)
in_system                time-averaged number of requests in the system over the step
                         (routed and unfinished), so ``in_system * dt`` is exactly the
                         request-seconds spent (Little's law); the instantaneous count if dt=0
in_system_now            requests in the system now, including the one(s) awaiting routing
in_system_area           request-seconds spent in the system during the step
completed                requests completed during the step
throughput               completions in the last recent_window_s divided by that window
                         (or by the elapsed time while shorter), requests/s
latency                  mean end-to-end latency (s) of completions in the last
                         recent_window_s; the previous value when there were none (0 at first)
completed_latency_mean   mean e2e latency (s) of requests completed during the step (0 if none)
completed_latency_max    max e2e latency (s) of requests completed during the step (0 if none)
completed_latency_sum    sum of e2e latencies (s) of requests completed during the step
awaiting_first_token     time-averaged number of routed requests whose prefill has not
                         completed (no first token yet) over the step, so the episode's sum of
                         ``awaiting_first_token * dt`` is exactly the total time to first token
                         spent up to the last decision (Little's law for TTFT); the count now
                         if dt=0
awaiting_first_token_now routed requests without a first token now, plus the one(s) awaiting
                         routing
awaiting_first_token_age time-averaged sum over those requests of their age (s since arrival),
                         so the sum of ``awaiting_first_token_age * dt`` is sum(TTFT^2) / 2
                         (penalises long waits superlinearly, for the TTFT tail); the sum of
                         ages now if dt=0
ttft_count               first tokens (prefill completions) during the step
ttft_mean, ttft_max      time to first token (s) of those (0 if none)
ttft_recent_mean         mean TTFT (s) of first tokens in the last recent_window_s (carried)
ttft_recent_p99          99th percentile of those (carried)
replica_loads            per-replica outstanding requests (waiting + running), array (n,)
replica_tokens           per-replica outstanding tokens, array (n,)
kv_util_mean             mean KV-cache use fraction over replicas
queue_waiting            requests queued (not admitted) over all replicas
=======================  ======================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardkit.errors import ConfigError

from ..routing.snapshot import ReplicaSnapshot
from ..shared.request_reward import REQUEST_CONTEXT_KEYS, request_context

#: every key of the reward context (see the module docstring).
CONTEXT_KEYS = frozenset(
    {
        "dt",
        "in_system",
        "in_system_now",
        "in_system_area",
        "completed",
        "throughput",
        "latency",
        "completed_latency_mean",
        "completed_latency_max",
        "completed_latency_sum",
        "awaiting_first_token",
        "awaiting_first_token_now",
        "awaiting_first_token_age",
        "ttft_count",
        "ttft_mean",
        "ttft_max",
        "ttft_recent_mean",
        "ttft_recent_p99",
        "replica_loads",
        "replica_tokens",
        "kv_util_mean",
        "queue_waiting",
    }
)


def vidur_request_context(request: Any, delay_caused: float = 0.0) -> dict[str, float]:
    """The per-request context (:func:`schedulers.shared.request_reward.request_context`) of a completed
    Vidur request: arrival to end of prefill, arrival to completion, its lengths, ``delay_caused``."""
    return request_context(request._prefill_completed_at - request.arrived_at, request.completed_at - request.arrived_at,
                           request.num_prefill_tokens, request.num_decode_tokens, delay_caused)


def reward_credit(keys: set[str] | frozenset[str] | None, source: str) -> str:
    """``"request"`` when a reward reads only per-request keys, ``"step"`` when only step keys.

    A per-request reward (``ttft``, ``e2e``...) is credited to the routing decision of its request
    (low-variance credit assignment: each decision is judged by its own request's outcome); a
    step reward describes the cluster between two decisions. A reward mixing both is refused.
    """
    if not keys:
        return "step"
    keys = set(keys)
    if keys <= set(REQUEST_CONTEXT_KEYS):
        return "request"
    unknown = keys - CONTEXT_KEYS - set(REQUEST_CONTEXT_KEYS)
    if unknown:
        raise ConfigError(
            f"reads context keys {sorted(unknown)} that VidurRoutingEnv does not provide; expected keys of one "
            f"kind: per step ({', '.join(sorted(CONTEXT_KEYS))}) or per request ({', '.join(sorted(REQUEST_CONTEXT_KEYS))})",
            source=source,
        )
    if keys & set(REQUEST_CONTEXT_KEYS):
        raise ConfigError(
            f"mixes per-request keys {sorted(keys & set(REQUEST_CONTEXT_KEYS))} with per-step keys "
            f"{sorted(keys & CONTEXT_KEYS)}; expected one kind (a per-request reward is credited to the "
            "decision that routed the request, a per-step one to the step it describes)",
            source=source,
        )
    return "step"


class RewardContextBuilder:
    """Builds each step's context; carries the recent latency/TTFT stats between steps of an episode."""

    def __init__(self, recent_window_s: float) -> None:
        self.recent_window_s = recent_window_s
        self.reset()

    def reset(self) -> None:
        """Forget the carried statistics (a new episode)."""
        self.latency = 0.0
        self.ttft_recent_mean = 0.0
        self.ttft_recent_p99 = 0.0

    def __call__(self, tracker: Any, sync: Any, snap: ReplicaSnapshot, now: float, pending: int) -> dict[str, Any]:
        """Context for the step that ``sync`` (the tracker's last sync) covers, ``pending`` requests awaiting routing."""
        window = self.recent_window_s
        e2e = [r.completed_at - r.arrived_at for r in sync.completed]
        ttft = [r._prefill_completed_at - r.arrived_at for r in sync.first_tokens]
        if tracker.recent_e2e:
            self.latency = float(np.mean([v for _, v in tracker.recent_e2e]))
        if tracker.recent_ttft:
            recent = np.array([v for _, v in tracker.recent_ttft])
            self.ttft_recent_mean = float(recent.mean())
            self.ttft_recent_p99 = float(np.percentile(recent, 99))
        span = min(window, now)
        in_now = float(tracker.in_system + pending)
        awaiting_area, awaiting_age_area, awaiting_now, age_now = _awaiting_first_token(tracker, sync, now)
        awaiting_now += pending  # requests awaiting routing arrived now: age 0
        return {
            "dt": float(sync.dt),
            "in_system": float(sync.in_system_area / sync.dt) if sync.dt > 0 else in_now,
            "in_system_now": in_now,
            "in_system_area": float(sync.in_system_area),
            "completed": float(len(sync.completed)),
            "throughput": float(sum(len(t) for t in tracker.completion_times) / span) if span > 0 else 0.0,
            "latency": self.latency,
            "completed_latency_mean": float(np.mean(e2e)) if e2e else 0.0,
            "completed_latency_max": float(np.max(e2e)) if e2e else 0.0,
            "completed_latency_sum": float(np.sum(e2e)) if e2e else 0.0,
            "awaiting_first_token": float(awaiting_area / sync.dt) if sync.dt > 0 else float(awaiting_now),
            "awaiting_first_token_now": float(awaiting_now),
            "awaiting_first_token_age": float(awaiting_age_area / sync.dt) if sync.dt > 0 else float(age_now),
            "ttft_count": float(len(ttft)),
            "ttft_mean": float(np.mean(ttft)) if ttft else 0.0,
            "ttft_max": float(np.max(ttft)) if ttft else 0.0,
            "ttft_recent_mean": self.ttft_recent_mean,
            "ttft_recent_p99": self.ttft_recent_p99,
            "replica_loads": snap.outstanding_requests.astype(np.float64),
            "replica_tokens": snap.outstanding_tokens.astype(np.float64),
            "kv_util_mean": float(snap.kv_fraction.mean()),
            "queue_waiting": float(snap.waiting.sum()),
        }


def _awaiting_first_token(tracker: Any, sync: Any, now: float) -> tuple[float, float, int, float]:
    """Areas over the synced step ``(now - sync.dt, now]`` of requests still awaiting a first token.

    Returns ``(count_area, age_area, count_now, age_sum_now)``: the integral over the step of the
    number of routed requests without a first token, the integral of the sum of their ages, and
    that number and age sum now. Every request whose first token came during the step is in
    ``sync.first_tokens`` (even if it also completed), and every routed request still without one
    is in the tracker's in-flight table, so the areas are exact.
    """
    t0 = now - sync.dt
    count_area = age_area = 0.0

    def add(arrived: float, end: float) -> None:
        nonlocal count_area, age_area
        start = max(t0, arrived)
        if end > start:
            count_area += end - start
            age_area += 0.5 * ((end - arrived) ** 2 - (start - arrived) ** 2)

    for req in sync.first_tokens:
        add(req.arrived_at, min(req._prefill_completed_at, now))
    count_now, age_now = 0, 0.0
    for tracked in tracker.inflight:
        for item in tracked.values():
            if not item.first_token_seen:
                req = item.request
                add(req.arrived_at, now)
                count_now += 1
                age_now += max(now - req.arrived_at, 0.0)
    return count_area, age_area, count_now, age_now
