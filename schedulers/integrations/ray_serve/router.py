"""``PolicyRequestRouter``: a Ray Serve request router that decides through any policy of the routing seam.

A deployment names it in its ``RequestRouterConfig``::

    RequestRouterConfig(
        request_router_class="schedulers.integrations.ray_serve.PolicyRequestRouter",
        request_router_kwargs={"policy": "cache_aware:balance_abs_threshold=8"},  # or {"policy": "ppo", "checkpoint": PATH}
        request_routing_stats_period_s=0.5)

Its options are :class:`~.options.RouterOptions`. Like Ray's own ``PowerOfTwoChoicesRequestRouter``
it implements ``choose_replicas``; it sees the replicas through the gateway's own
:class:`~schedulers.live.view.LiveClusterView`, so a policy reads the same
:class:`~schedulers.routing.snapshot.ReplicaSnapshot` in Vidur, in ``rewardkit gateway`` and here:

- its own bookkeeping: a request counts from ``on_request_routed`` until ``on_request_completed``;
  its prompt counts as prefill until the ingress reports its first token (:func:`report_first_token`),
  and its token ids go into the router's prefix mirror;
- each replica's ``record_routing_stats`` (:class:`~.replica_stats.ReplicaStats`), folded in as the
  gateway folds an engine scrape, as they arrive (Ray hands them to ``update_replicas``).

**Fallback**: stats older than ``stale_s`` (by their ``at`` time) or missing are not used: that
replica is seen through the router's own bookkeeping alone, and the decision is counted as a
fallback (``rewardkit_ray_router_fallback_decisions{reason="missing"|"stale"}`` in Ray's metrics,
``fallbacks`` in :func:`~.report.router_stats`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, List, Optional

import numpy as np
from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from .. import live_routers
from ...live.view import LiveClusterView, restrict
from ...routing.observation import ObservationConfig, build_observation
from ...routing.policy import Policy, make_policy
from ...routing.snapshot import ReplicaSnapshot
from .options import RouterOptions
from .replica_stats import fold_stats
from .report import RouterTimes, router_stats

__all__ = ["PolicyRequestRouter", "report_first_token", "router_stats"]


def report_first_token(request_key: str, tokens: int = 1) -> None:
    """The request ``request_key`` (``RoutedRequest.key``) got its first ``tokens`` output tokens: its
    prompt stops counting as prefill in the routers of this process (the ingress calls it)."""
    for router in list(live_routers.ROUTERS):
        loop = getattr(router, "_loop", None)
        if loop is None or loop.is_closed():
            continue
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            router.first_token(request_key, tokens)
        else:  # the router runs on its own loop (Ray's default): its view changes only there
            loop.call_soon_threadsafe(router.first_token, request_key, tokens)


class PolicyRequestRouter(RequestRouter):
    """Routes each request to the replica a :class:`~schedulers.routing.policy.Policy` picks (module doc)."""

    #: the clock of the router's view (a test sets one shared with a gateway's)
    view_clock = staticmethod(time.monotonic)

    def initialize_state(self, policy: str = "least_prefill", checkpoint: Optional[str] = None, **kwargs: Any) -> None:
        """Called by Ray Serve with ``request_router_kwargs``: :class:`~.options.RouterOptions`' fields; other
        keys go to :func:`~schedulers.routing.policy.make_policy`. Errors name the key."""
        self.options = opts = RouterOptions.from_kwargs({"policy": policy, "checkpoint": checkpoint, **kwargs})
        extra = dict(opts.policy_options, threads=opts.threads) if opts.checkpoint is not None else opts.policy_options
        try:
            self.policy: Policy = make_policy(opts.policy, opts.checkpoint, seed=opts.seed, simulated=False, **extra)
        except ValueError as exc:
            raise ValueError(f"request_router_kwargs.policy {opts.policy!r}: {exc}") from None
        self.spec = opts.policy
        self.obs_config = self.policy.observation or ObservationConfig()
        self._ids: list[ReplicaID] = []
        self._slot: dict[ReplicaID, int] = {}
        self._slot_by_replica: dict[RunningReplica, int] = {}  # by Ray's object: cheaper than hashing its id
        self._new_view(0)
        self._routed: dict[str, tuple[int, int]] = {}  # Ray's internal request id -> (slot, view key)
        self._by_key: dict[str, int] = {}  # the ingress's request key -> view key
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.decisions = 0
        self.fallbacks = {"missing": 0, "stale": 0}
        self.times = RouterTimes(opts.keep_decision_times, opts.time_stages, getattr(self, "_deployment_id", None))
        live_routers.ROUTERS.add(self)

    # ---- the replica set ----------------------------------------------------------------------
    def _new_view(self, n: int) -> None:
        self.view = LiveClusterView(max(n, 1), block_size=self.options.block_size,
                                    kv_capacity=self.options.kv_capacity_blocks,
                                    engine_stale_s=self.options.stale_s, clock=self.view_clock)
        self._seen_at = [None] * max(n, 1)
        self._last_stats: list[dict[str, Any]] = [{} for _ in range(max(n, 1))]

    def update_replicas(self, replicas: List[RunningReplica]) -> None:
        """Ray's replica set or a replica's routing stats changed: a new view when the members change (the
        in-flight requests of replicas that stay carried over, the prefix mirror anew); new stats folded in."""
        super().update_replicas(replicas)
        ids = sorted(self._replicas, key=lambda rid: rid.unique_id)
        if ids != self._ids:
            old_view, old_ids = self.view, self._ids
            self._ids, self._slot = ids, {rid: i for i, rid in enumerate(ids)}
            self._new_view(len(ids))
            keys = {}
            for key, req in old_view.inflight.items():
                rid = old_ids[req.replica] if req.replica < len(old_ids) else None
                if rid in self._slot:
                    keys[key] = self.view.sent(self._slot[rid], req.prompt_tokens)
            self._routed = {r: (self._slot[old_ids[s]], keys[k]) for r, (s, k) in self._routed.items() if k in keys}
            self._by_key = {name: keys[k] for name, k in self._by_key.items() if k in keys}
        self._slot_by_replica = {r: self._slot[r.replica_id] for r in replicas if r.replica_id in self._slot}
        self._fold_stats(*self._slots(replicas))  # on arrival: no decision pays for them

    def _slots(self, replicas: List[RunningReplica]) -> tuple[list[RunningReplica], list[int]]:
        """The candidates this router knows and their view slots (by object, else by id)."""
        known, slots = [], []
        for r in replicas:
            slot = self._slot_by_replica.get(r)
            if slot is None:
                slot = self._slot.get(r.replica_id)
                if slot is None:
                    continue
            known.append(r)
            slots.append(slot)
        return known, slots

    def _fold_stats(self, replicas: List[RunningReplica], slots: List[int]) -> Optional[str]:
        """Fold each replica's new fresh stats into the view; the fallback reason of a decision among
        ``replicas`` (None: all fresh)."""
        now, reason = time.time(), None
        for r, slot in zip(replicas, slots, strict=True):
            stats = r.routing_stats or {}
            at = stats.get("at")
            if not isinstance(at, (int, float)):
                reason = "missing"
            elif now - at > self.options.stale_s:
                reason = reason or "stale"
            elif at != self._seen_at[slot]:
                self._seen_at[slot], self._last_stats[slot] = at, dict(stats)
                fold_stats(self.view, slot, stats)
        return reason

    # ---- deciding ----------------------------------------------------------------------------------
    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        """The policy's pick first, then the other candidates (Ray moves on when a replica is full)."""
        start = time.perf_counter()
        self._loop = asyncio.get_running_loop()
        if pending_request is not None:
            pending_request.routing_context.should_backoff = True  # every candidate is tried each round
        candidates, slots = self._slots(candidate_replicas)
        if not candidates:
            return [candidate_replicas] if candidate_replicas else []
        marks = [start] if self.times.stage_s is not None else None
        reason = self._fold_stats(candidates, slots)
        if marks is not None:
            marks.append(time.perf_counter())
        request = _routed_request(pending_request)
        if marks is not None:
            marks.append(time.perf_counter())
        chosen = candidates[self._decide(slots, request, marks)]
        self.decisions += 1
        if reason is not None:
            self.fallbacks[reason] += 1
        self.times.decided(time.perf_counter() - start, reason, marks)
        rest = [r for r in candidates if r is not chosen]
        return [[chosen], rest] if rest else [[chosen]]

    def decide(self, replicas: List[RunningReplica], request: Any) -> int:
        """Index into ``replicas`` (all given to :meth:`update_replicas`) of the policy's pick for ``request``."""
        return self._decide([self._slot[r.replica_id] for r in replicas], request)

    def _decide(self, slots: List[int], request: Any, marks: Optional[list[float]] = None) -> int:
        """Index into ``slots`` (the candidates' view slots) of the pick; ``marks`` gets each stage's end."""
        tokens, ids = _prompt(request)
        snap, order = self._snapshot(slots, ids)
        if marks is not None:
            marks.append(time.perf_counter())
        rows = build_observation(snap, tokens, self.obs_config) if self.policy.observation is not None else None
        if marks is not None:
            marks.append(time.perf_counter())
        pick = int(self.policy.decide(snap, tokens, rows=rows))
        if marks is not None:
            marks.append(time.perf_counter())
        return pick if order is None else order[pick]

    def _snapshot(self, slots: List[int], ids: Any) -> tuple[ReplicaSnapshot, Optional[List[int]]]:
        """The snapshot of the candidates for a prompt of ``ids`` and, per snapshot replica, its candidate
        index (None: the candidates are every replica in slot order)."""
        snap = self.view.snapshot(ids)
        n = self.view.num_replicas
        if len(slots) == n and slots == list(range(n)):
            return snap, None
        order = sorted(range(len(slots)), key=slots.__getitem__)  # slot order: the snapshot's and restrict's
        if len(slots) == n and len(set(slots)) == n:  # every replica, in Ray's order
            return snap, order
        keep = np.zeros(n, dtype=bool)
        keep[slots] = True
        return restrict(snap, keep), order

    # ---- bookkeeping between polls -------------------------------------------------------------
    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        """The replica accepted the request: it counts on that replica from now."""
        self.times.routed(pending_request.created_at)
        slot = self._slot.get(replica_id)
        if slot is None:
            return
        request = _routed_request(pending_request)
        key = self.view.sent(slot, *_prompt(request))
        self._routed[pending_request.metadata.internal_request_id] = (slot, key)
        if request is not None:
            self._by_key[request.key] = key

    def first_token(self, request_key: str, tokens: int = 1) -> None:
        """The ingress saw the first ``tokens`` output tokens of ``request_key``."""
        key = self._by_key.pop(request_key, None)
        if key is not None:
            self.view.token(key, tokens)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        """The request finished: it no longer counts."""
        routed = self._routed.pop(internal_request_id, None)
        if routed is not None:
            req = self.view.finished(routed[1])
            if req is not None and self._by_key:
                self._by_key = {k: v for k, v in self._by_key.items() if v != routed[1]}

    def stats(self) -> dict[str, Any]:
        """The policy, decisions, fallbacks by reason, decision and routing times (ms), requests in flight,
        and the last stats each replica sent."""
        return {"policy": self.spec, "decisions": self.decisions, "fallbacks": dict(self.fallbacks), **self.times.stats(),
                "in_flight": len(self.view.inflight), "replicas": len(self._ids),
                "replica_stats": [dict(s) for s in self._last_stats]}


def _prompt(request: Any) -> tuple[int, Any]:
    """A routed request's prompt tokens and ids (no request: a one-token prompt without ids)."""
    return (request.prompt_tokens, request.prompt_ids) if request is not None else (1, [])


def _routed_request(pending_request: Optional[PendingRequest]) -> Any:
    """The ``RoutedRequest`` among the request's arguments, if any: recognised by its attributes, as Ray
    pickles this package by value into the router's process (its classes are copies there)."""
    if pending_request is None:
        return None
    for arg in list(pending_request.args) + list(pending_request.kwargs.values()):
        if hasattr(arg, "prompt_tokens") and hasattr(arg, "prompt_ids") and hasattr(arg, "key"):
            return arg
    return None
