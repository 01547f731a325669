"""``ClusterTracker``: follows the requests routed to each Vidur replica and builds the replica snapshot.

Heuristics, the PPO scheduler inside Vidur and :class:`~schedulers.sim.env.VidurRoutingEnv` all
read the :class:`~schedulers.routing.snapshot.ReplicaSnapshot` it builds (including recent
completions), so they see the same state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Dict, List

import numpy as np
from vidur.entities import Request

from ..routing.snapshot import ReplicaSnapshot
from ..routing.speed_estimator import SpeedEstimator
from .speed_scaling import BatchLog

DEFAULT_RECENT_WINDOW_S = 10.0
#: time constant (simulated s of batch work) of the online speed estimate.
DEFAULT_SPEED_TAU_S = 2.0


# ---- cluster tracking -----------------------------------------------------------------------------
@dataclass
class TrackedRequest:
    """A routed, unfinished request and what the router knew when routing it."""

    request: Request
    replica: int
    #: prompt length at arrival (Vidur folds generated tokens into the prompt on a restart).
    prompt_tokens: int
    first_token_seen: bool = False


@dataclass
class SyncResult:
    """What happened between two :meth:`ClusterTracker.sync` calls."""

    #: requests that completed in the interval.
    completed: List[Request] = field(default_factory=list)
    #: requests whose first output token (end of prefill) came in the interval.
    first_tokens: List[Request] = field(default_factory=list)
    #: request-seconds spent in the system by routed requests during the interval.
    in_system_area: float = 0.0
    #: length of the interval (simulated seconds).
    dt: float = 0.0


def remaining_prompt_tokens(request: Request) -> int:
    """Prompt tokens the replica has not processed yet (0 once prefill is complete)."""
    if request.is_prefill_complete:
        return 0
    return max(request.num_prefill_tokens - request.num_processed_tokens, 0)


class ClusterTracker:
    """Routed requests per replica, completions, first tokens and the per-replica snapshot.

    It reads only what a real router could know: queue contents, KV-cache use, prompt lengths,
    tokens generated so far, the declared speed of each replica and the durations of batches that
    have *ended* (from ``batch_log``, fed by :mod:`schedulers.sim.speed_scaling`), never a
    request's future output length nor a replica's current slowdown.
    """

    def __init__(
        self,
        replica_schedulers: List[Any],
        recent_window_s: float = DEFAULT_RECENT_WINDOW_S,
        declared_speeds: Any = None,
        batch_log: BatchLog | None = None,
        speed_tau_s: float = DEFAULT_SPEED_TAU_S,
    ) -> None:
        self.replica_schedulers = replica_schedulers
        self.num_replicas = len(replica_schedulers)
        self.recent_window_s = float(recent_window_s)
        speeds = np.ones(self.num_replicas) if declared_speeds is None else np.asarray(declared_speeds, dtype=np.float64)
        self.declared_speeds = speeds
        self.speed_estimator = SpeedEstimator(speeds, speed_tau_s)
        self.batch_log = batch_log
        #: (end time, tokens) of batches each replica finished within the recent window.
        self.batch_tokens: List[deque] = [deque() for _ in replica_schedulers]
        #: time of each replica's latest request completion (0 before the first).
        self.last_completion = np.zeros(self.num_replicas)
        self.inflight: List[Dict[int, TrackedRequest]] = [{} for _ in replica_schedulers]
        self.completion_times: List[deque] = [deque() for _ in replica_schedulers]
        #: (completed_at, e2e seconds) of recent completions, cluster-wide.
        self.recent_e2e: deque = deque()
        #: (first token time, time to first token) of recent first tokens, cluster-wide.
        self.recent_ttft: deque = deque()
        self.last_sync = 0.0
        self.num_completed = 0
        #: the replicas' prefix caches (:class:`~schedulers.sim.prefix_cache.SimulatedPrefixCache`) when the
        #: workload shares prefixes: routing a request there shortens its prefill by the cached part.
        self.prefix_cache: Any = None

    def assign(self, request: Request, replica: int) -> None:
        """Record that ``request`` was routed to ``replica`` (its prefill shortened by a prefix-cache hit there)."""
        if self.prefix_cache is not None:
            self.prefix_cache.route(request, replica)
        self.inflight[replica][request.id] = TrackedRequest(request, replica, request.num_prefill_tokens)

    @property
    def in_system(self) -> int:
        """Routed requests not yet completed."""
        return sum(len(d) for d in self.inflight)

    def sync(self, now: float) -> SyncResult:
        """Collect completions and first tokens since the previous call, up to ``now``."""
        t0, result = self.last_sync, SyncResult(dt=max(now - self.last_sync, 0.0))
        if self.batch_log is not None:
            for rec in self.batch_log.pop_ended(now):
                self.speed_estimator.observe(rec.replica, rec.nominal_s, rec.actual_s)
                self.batch_tokens[rec.replica].append((rec.end, rec.tokens))
        area = 0.0
        for replica, tracked in enumerate(self.inflight):
            finished = []
            for rid, item in tracked.items():
                req = item.request
                start = max(t0, req.arrived_at)
                if req.completed:
                    finished.append(rid)
                    area += max(min(req.completed_at, now) - start, 0.0)
                else:
                    area += max(now - start, 0.0)
                if not item.first_token_seen and req._prefill_completed_at > 0:
                    item.first_token_seen = True
                    result.first_tokens.append(req)
            if finished:
                times = []
                for rid in finished:
                    req = tracked.pop(rid).request
                    result.completed.append(req)
                    times.append(req.completed_at)
                self.completion_times[replica].extend(sorted(times))
                self.last_completion[replica] = max(self.last_completion[replica], max(times))
        result.completed.sort(key=lambda r: (r.completed_at, r.id))
        result.first_tokens.sort(key=lambda r: (r._prefill_completed_at, r.id))
        if self.prefix_cache is not None:
            for req in result.first_tokens:
                self.prefix_cache.prefill_done(req)
        for req in result.completed:
            self.recent_e2e.append((req.completed_at, req.completed_at - req.arrived_at))
        for req in result.first_tokens:
            self.recent_ttft.append((req._prefill_completed_at, req._prefill_completed_at - req.arrived_at))
        self.num_completed += len(result.completed)
        result.in_system_area = area
        self.last_sync = max(now, t0)
        self._expire(now)
        return result

    def _expire(self, now: float) -> None:
        horizon = now - self.recent_window_s
        for times in self.completion_times:
            while times and times[0] <= horizon:
                times.popleft()
        for batches in self.batch_tokens:
            while batches and batches[0][0] <= horizon:
                batches.popleft()
        for window in (self.recent_e2e, self.recent_ttft):
            while window and window[0][0] <= horizon:
                window.popleft()

    def snapshot(self) -> ReplicaSnapshot:
        """Per-replica load now (call :meth:`sync` first so completions are current)."""
        n = self.num_replicas
        waiting = np.zeros(n)
        running = np.zeros(n)
        kv_blocks = np.zeros(n)
        kv_capacity = np.zeros(n)
        prefill = np.zeros(n)
        decoded = np.zeros(n)
        waiting_prefill = np.zeros(n)
        busy = np.zeros(n)
        for i, rs in enumerate(self.replica_schedulers):
            queue = rs._request_queue
            waiting[i] = len(queue)
            running[i] = len(rs._allocation_map)
            kv_blocks[i] = rs._num_allocated_blocks
            kv_capacity[i] = rs._cache_config.num_blocks
            busy[i] = 1.0 if rs._num_running_batches > 0 else 0.0
            waiting_prefill[i] = sum(remaining_prompt_tokens(r) for r in queue)
            p = d = 0
            for item in self.inflight[i].values():
                req = item.request
                if req.completed:
                    continue
                p += remaining_prompt_tokens(req)
                d += (req.num_prefill_tokens - item.prompt_tokens) + req.num_processed_decode_tokens
            prefill[i] = p
            decoded[i] = d
        recent = np.array([len(t) for t in self.completion_times], dtype=np.float64)
        span = min(self.recent_window_s, self.last_sync) or self.recent_window_s
        tokens_per_s = np.array([sum(k for _, k in b) for b in self.batch_tokens], dtype=np.float64) / span
        return ReplicaSnapshot(
            waiting=waiting,
            running=running,
            kv_blocks=kv_blocks,
            kv_capacity=kv_capacity,
            prefill_tokens=prefill,
            decoded_tokens=decoded,
            waiting_prefill_tokens=waiting_prefill,
            recent_completions=recent,
            busy=busy,
            declared_speed=self.declared_speeds.copy(),
            measured_speed=self.speed_estimator.estimates.copy(),
            tokens_per_s=tokens_per_s,
            since_completion=np.maximum(self.last_sync - self.last_completion, 0.0),
        )
