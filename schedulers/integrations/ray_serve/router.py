"""``PolicyRequestRouter``: a Ray Serve request router that decides through any policy of the routing seam.

A deployment names it in its ``RequestRouterConfig``::

    RequestRouterConfig(
        request_router_class="schedulers.integrations.ray_serve.PolicyRequestRouter",
        request_router_kwargs={"policy": "cache_aware:balance_abs_threshold=8"},  # or {"policy": "ppo", "checkpoint": PATH}
        request_routing_stats_period_s=0.5)

How it sees the replicas (docs/ray-serve.md has the table): the gateway's own
:class:`~schedulers.live.view.LiveClusterView`, so a policy reads the same
:class:`~schedulers.routing.snapshot.ReplicaSnapshot` in Vidur, in ``rewardkit gateway`` and here:

- its own bookkeeping between stats polls, as the gateway's: a request counts from the moment Ray
  routes it (``on_request_routed``) until it completes (``on_request_completed``); its prompt
  tokens count as prefill until the ingress reports its first token (:func:`report_first_token`),
  and its token ids go into the router's prefix mirror (``prefix_match``);
- each replica's ``record_routing_stats`` (:class:`~.replica_stats.ReplicaStats`), folded in as the
  gateway folds an engine scrape: requests waiting and running, KV use and capacity, decode rate
  (``measured_speed``), and prefix blocks (the larger of the replica's count and the mirror's). They
  are folded as they arrive (Ray hands a replica's new stats to ``update_replicas``), not in the
  decision after.

**Fallback**: stats older than ``stale_s`` (by their ``at`` time) or missing are not used: that
replica is seen through the router's own bookkeeping alone (the gateway's view without scrapes),
and the decision is counted as a fallback (``rewardkit_ray_router_fallback_decisions{reason=
"missing"|"stale"}`` in Ray's metrics, and :func:`router_stats` in the router's process).

**Keeping warm** (``warm_every_ms``, off by default): a router that decides once per request finds
its CPU cold after each pause, and a decision then costs several times what it costs back to back
(``benchmarks/bench_cold_cpu.py``). With ``warm_every_ms`` set, a router that has not decided for
that long rehearses its last decision on the view as it is now (the last candidates and prompt;
nothing folded or counted, the policy's generator put back, so every real decision is the one it
would have been) and stops after :data:`WARM_FOR_S` without a request. Its cost is in
:meth:`~PolicyRequestRouter.stats` (``rehearsals``, ``rehearsal_cpu_ms``).

**The deciding thread first** (``thread_nice``, unset by default): where the router shares cores with
engines or Ray's other processes, the scheduler may run their threads in the middle of a decision;
a niceness below theirs for the thread the router decides on lets each decision run through.

**Decisions in real time** (``realtime_decisions``, off by default): a niceness only weighs the
scheduler's choice; measured on a 2-core host shared with two engines, a thread at -10 was still
switched out in the middle of 6% of its decisions (each then took 0.1-0.3 ms longer, which made the
p99). With ``realtime_decisions`` each decision runs under ``SCHED_FIFO`` at priority 1, which no
ordinary thread preempts, and the thread gets its own policy back when its event loop has finished
the step the decision is in (``call_soon``): leaving real time makes the kernel reschedule at once,
and at the end of the step that falls after the request has been handed on, not in the middle of
its routing (put back at the decision's end, it switched out 44-63% of the decisions). A thread
started meanwhile does not inherit real time (``SCHED_RESET_ON_FORK``). Outside those steps
the thread (in Ray's throughput-optimized mode, the ingress's event loop) keeps its place, so the
engines are not starved. :meth:`~PolicyRequestRouter.stats` counts the decisions switched out
(``decisions_preempted``) either way.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import resource
import threading
import time
import warnings
from collections import deque
from typing import Any, List, Optional

import numpy as np
from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from .. import live_routers
from ...live.view import LiveClusterView, restrict
from ...routing.observation import ObservationConfig, build_observation
from ...routing.policy import Policy, make_policy
from ...routing.snapshot import ReplicaSnapshot



def report_first_token(request_key: str, tokens: int = 1) -> None:
    """The request ``request_key`` (:attr:`RoutedRequest.key`) got its first ``tokens`` output tokens:
    its prompt stops counting as prefill in the routers of this process (the ingress calls it)."""
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


#: a router's :meth:`~PolicyRequestRouter.stats` reports its last this many times per list (decision,
#: CPU, stage and routing times)
REPORTED_TIMES = 5000


def reported_times(values: Any, scale: float = 1.0, digits: int = 5) -> list[float]:
    """The last :data:`REPORTED_TIMES` of ``values``, times ``scale``, rounded to ``digits`` (for JSON)."""
    return [round(scale * float(t), digits) for t in list(values)[-REPORTED_TIMES:]]


def router_stats() -> list[dict[str, Any]]:
    """:meth:`PolicyRequestRouter.stats` of every router in this process."""
    return [router.stats() for router in list(live_routers.ROUTERS)]


def _metric(kind: str, name: str, description: str, **kwargs: Any) -> Any:
    """A Ray metric, or None where Ray's metrics cannot be made (outside a Ray worker)."""
    try:
        from ray.util import metrics

        return getattr(metrics, kind)(name, description=description, **kwargs)
    except Exception:  # noqa: BLE001 - metrics are a report, never a reason not to route
        return None


#: the garbage collector's running totals in this process (kept by :func:`_count_collection`, a
#: ``gc.callbacks`` entry): seconds spent collecting, and the clock at the current collection's start
_GC_SECONDS = [0.0]
_GC_STARTED = [0.0]


def _count_collection(phase: str, info: dict[str, Any]) -> None:
    """``gc.callbacks`` entry: adds each collection's duration to :data:`_GC_SECONDS` (a decision reads it
    before and after, so a collection in the middle of one is told apart from the router's own work)."""
    if phase == "start":
        _GC_STARTED[0] = time.perf_counter()
    else:
        _GC_SECONDS[0] += time.perf_counter() - _GC_STARTED[0]


#: a router keeping warm (``warm_every_ms``) stops rehearsing after this long without a request (s)
WARM_FOR_S = 30.0

#: the stages of one decision, timed apart: folding new replica stats in, finding the request among
#: Ray's arguments, the snapshot (prefix lookup included), the policy's observation rows, the policy
STAGES = ("stats", "request", "snapshot", "observation", "policy")


class PolicyRequestRouter(RequestRouter):
    """Routes each request to the replica a :class:`~schedulers.routing.policy.Policy` picks (module doc)."""

    #: the clock of the router's view (a test sets one shared with a gateway's)
    view_clock = staticmethod(time.monotonic)

    def initialize_state(self, policy: str = "least_prefill", checkpoint: Optional[str] = None, *,
                         seed: int = 0, stale_s: float = 2.0, block_size: int = 32, kv_capacity_blocks: float = 1024.0,
                         threads: int = 1, keep_decision_times: int = 100_000, time_stages: bool = False,
                         warm_every_ms: float = 0.0, thread_nice: Optional[int] = None, realtime_decisions: bool = False,
                         **options: Any) -> None:
        """Called by Ray Serve with ``request_router_kwargs``: ``policy`` (a router name of
        :func:`~schedulers.routing.policy.make_policy`, thresholds after the name), ``checkpoint``
        (a learned policy's file), ``stale_s`` (stats older than this are not used), ``block_size``
        (tokens per prefix block, as the engines'), ``kv_capacity_blocks`` (until a replica reports
        its own), ``threads`` (torch threads of a learned policy), ``time_stages`` (also time each
        decision's stages, :data:`STAGES`: a profile, off by default as its clock reads add to each
        decision), ``warm_every_ms`` (rehearse a decision whenever the router has not decided for this
        long, while requests keep coming: the module doc's "Keeping warm"; 0: never), ``thread_nice`` (the
        niceness, -20 to 19, of the thread that decides, set at its first decision: below the engines' or
        the process's other threads', a co-located router is not made to wait for them; negative values need
        ``CAP_SYS_NICE``, and a refusal is a warning and :meth:`stats`'s ``thread_nice_error``, never a
        reason not to route; None: as Ray made it), ``realtime_decisions`` (run each decision under ``SCHED_FIFO``,
        the thread's policy put back after it: the module doc's "Decisions in real time"; Linux, with
        ``CAP_SYS_NICE`` or an ``RLIMIT_RTPRIO`` of at least 1; a refusal is a warning and :meth:`stats`'s
        ``realtime_error``, and routing goes on without); other keys go to ``make_policy``."""
        if not isinstance(policy, str) or not policy:
            raise ValueError(f"request_router_kwargs.policy: expected a router name, got {policy!r}")
        if not (isinstance(stale_s, (int, float)) and stale_s > 0):
            raise ValueError(f"request_router_kwargs.stale_s: expected a positive number, got {stale_s!r}")
        if not (isinstance(warm_every_ms, (int, float)) and not isinstance(warm_every_ms, bool)
                and (warm_every_ms == 0 or 0.1 <= warm_every_ms <= 10_000)):
            raise ValueError("request_router_kwargs.warm_every_ms: expected 0 (off) or a number of milliseconds "
                             f"from 0.1 to 10000, got {warm_every_ms!r}")
        if thread_nice is not None and not (isinstance(thread_nice, int) and not isinstance(thread_nice, bool)
                                            and -20 <= thread_nice <= 19):
            raise ValueError("request_router_kwargs.thread_nice: expected an integer niceness from -20 to 19, "
                             f"got {thread_nice!r}")
        if not isinstance(realtime_decisions, bool):
            raise ValueError(f"request_router_kwargs.realtime_decisions: expected true or false, got {realtime_decisions!r}")
        if checkpoint is not None:
            options.setdefault("threads", threads)
        try:
            self.policy: Policy = make_policy(policy, checkpoint, seed=seed, simulated=False, **options)
        except ValueError as exc:
            raise ValueError(f"request_router_kwargs.policy {policy!r}: {exc}") from None
        self.spec = policy
        self.seed = seed
        self.stale_s = float(stale_s)
        self.block_size = int(block_size)
        self.kv_capacity_blocks = float(kv_capacity_blocks)
        self.obs_config = self.policy.observation or ObservationConfig()
        self._ids: list[ReplicaID] = []
        self._slot: dict[ReplicaID, int] = {}
        #: the same slots by Ray's replica object (identity: cheaper than hashing its ReplicaID per decision)
        self._slot_by_replica: dict[RunningReplica, int] = {}
        self._new_view(0)
        #: Ray's internal request id -> (slot, view key); the ingress's request key -> view key
        self._routed: dict[str, tuple[int, int]] = {}
        self._by_key: dict[str, int] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.decisions = 0
        self.fallbacks = {"missing": 0, "stale": 0}
        self.decision_times: deque[float] = deque(maxlen=keep_decision_times)
        #: the same decisions' CPU time in the router's thread (the wall time less the time another thread or
        #: process had the CPU or the GIL)
        self.decision_cpu_times: deque[float] = deque(maxlen=keep_decision_times)
        #: the same decisions' time in the garbage collector (0 for most: a collection starts wherever
        #: allocations cross its threshold, in the middle of a decision sometimes)
        self.decision_gc_times: deque[float] = deque(maxlen=keep_decision_times)
        if _count_collection not in gc.callbacks:
            gc.callbacks.append(_count_collection)
        #: per stage of a decision (STAGES), seconds: where the decision time goes (with ``time_stages``)
        self.time_stages = bool(time_stages)
        self.stage_times: dict[str, deque[float]] = {s: deque(maxlen=keep_decision_times) for s in STAGES}
        #: per request, ms from Ray creating its pending request to the replica accepting it
        self.routing_ms: deque[float] = deque(maxlen=keep_decision_times)
        #: keeping warm: the pause after which the router rehearses (s; 0 off), rehearsals made, their CPU time (s)
        self.warm_every_s = float(warm_every_ms) / 1000.0
        self.rehearsals = 0
        self.rehearsal_cpu_s = 0.0
        self.rehearsal_error: Optional[str] = None
        self._warm_timer: Optional[asyncio.TimerHandle] = None
        self._last_decision_at = 0.0
        self._last_candidates: List[RunningReplica] = []
        self._last_request: Any = None
        #: the niceness asked for the deciding thread, whether it is still to be set, and why it could not be
        self.thread_nice = thread_nice
        self._nice_due = thread_nice is not None
        self.thread_nice_error: Optional[str] = None
        #: decisions run under SCHED_FIFO (until a refusal), why not, and the decisions the thread was
        #: switched out in the middle of (involuntary context switches, whatever the setting)
        self.realtime_decisions = realtime_decisions
        self.realtime_error: Optional[str] = None
        self._own_policy: Optional[tuple[int, int]] = None  # the thread's policy while a step runs in real time
        self._thread_policies: dict[int, tuple[int, int]] = {}  # per thread (ident), its policy at its first decision
        self.decisions_preempted = 0
        #: decisions the thread blocked in the middle of (voluntary context switches: waiting for the GIL, say)
        self.decisions_blocked = 0
        #: per decision, the page faults the thread took in it (memory the process touched for the first
        #: time, or that the kernel had to map again: each costs the kernel's time, and the host's in a VM)
        self.decision_faults: deque[int] = deque(maxlen=keep_decision_times)
        tags = ("deployment", "application")
        defaults = {"deployment": self._deployment_id.name, "application": self._deployment_id.app_name} \
            if getattr(self, "_deployment_id", None) is not None else {}
        self._fallback_counter = _metric("Counter", "rewardkit_ray_router_fallback_decisions",
                                         "decisions made without fresh replica stats", tag_keys=tags + ("reason",))
        self._decision_hist = _metric("Histogram", "rewardkit_ray_router_decision_ms", "time to decide one request (ms)",
                                      boundaries=[0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10], tag_keys=tags)
        for m in (self._fallback_counter, self._decision_hist):
            if m is not None and defaults:
                m.set_default_tags(defaults)
        live_routers.ROUTERS.add(self)

    # ---- the replica set ----------------------------------------------------------------------
    def _new_view(self, n: int) -> None:
        self.view = LiveClusterView(max(n, 1), block_size=self.block_size, kv_capacity=self.kv_capacity_blocks,
                                    engine_stale_s=self.stale_s, clock=self.view_clock)
        self._seen_at = [None] * max(n, 1)
        self._last_stats: list[dict[str, Any]] = [{} for _ in range(max(n, 1))]

    def update_replicas(self, replicas: List[RunningReplica]) -> None:
        """Ray's replica set or a replica's routing stats changed: the view is rebuilt when its members
        change (in-flight requests of replicas that stay are carried over; the prefix mirror starts over),
        and new fresh stats are folded in."""
        super().update_replicas(replicas)
        ids = sorted(self._replicas, key=lambda rid: rid.unique_id)
        if ids != self._ids:
            self._rebuild_view(ids)
        self._slot_by_replica = {r: self._slot[r.replica_id] for r in replicas if r.replica_id in self._slot}
        # new routing stats reach a router only with an update (Ray broadcasts a replica's info when its
        # stats change): folded here, on arrival, no decision pays for them
        self._fold_stats(*self._slots(replicas))

    def _rebuild_view(self, ids: list[ReplicaID]) -> None:
        """A new view over ``ids``, carrying over the in-flight requests of replicas that stay."""
        old_view, old_ids = self.view, self._ids
        self._ids = ids
        self._slot = {rid: i for i, rid in enumerate(ids)}
        self._new_view(len(ids))
        keys = {}
        for key, req in old_view.inflight.items():
            rid = old_ids[req.replica] if req.replica < len(old_ids) else None
            if rid in self._slot:
                keys[key] = self.view.sent(self._slot[rid], req.prompt_tokens)
        self._routed = {rid: (self._slot[old_ids[slot]], keys[k]) for rid, (slot, k) in self._routed.items() if k in keys}
        self._by_key = {name: keys[k] for name, k in self._by_key.items() if k in keys}

    def _slots(self, replicas: List[RunningReplica]) -> tuple[list[RunningReplica], list[int]]:
        """The candidates this router knows and their view slots (by object; by id for a replica object
        Ray made anew since :meth:`update_replicas`)."""
        by_replica, known, slots = self._slot_by_replica, [], []
        for r in replicas:
            slot = by_replica.get(r)
            if slot is None:
                slot = self._slot.get(r.replica_id)
                if slot is None:
                    continue
            known.append(r)
            slots.append(slot)
        return known, slots

    # ---- stats -----------------------------------------------------------------------------------
    def _fold_stats(self, replicas: List[RunningReplica], slots: List[int]) -> str | None:
        """Fold each replica's new fresh stats into the view (:meth:`update_replicas` does as they arrive, so
        a decision finds none new unless Ray changed a replica's stats without an update); the fallback
        reason of a decision among ``replicas`` (None: all fresh)."""
        now = time.time()
        reason = None
        for r, slot in zip(replicas, slots, strict=True):
            stats = r.routing_stats or {}
            at = stats.get("at")
            if not isinstance(at, (int, float)):
                reason = "missing"
                continue
            if now - at > self.stale_s:
                reason = reason or "stale"
                continue
            if at == self._seen_at[slot]:
                continue
            self._seen_at[slot] = at
            self._last_stats[slot] = dict(stats)
            fold_stats(self.view, slot, stats)
        return reason

    # ---- deciding ----------------------------------------------------------------------------------
    def decide(self, replicas: List[RunningReplica], request: Any) -> int:
        """Index into ``replicas`` of the policy's pick for ``request`` (a :class:`~.request.RoutedRequest`;
        None: a one-token prompt without ids); every replica must be one Ray gave :meth:`update_replicas`."""
        return self._decide([self._slot[r.replica_id] for r in replicas], request)

    def _decide(self, slots: List[int], request: Any) -> int:
        """Index into ``slots`` (view slots of the candidates) of the policy's pick for ``request``; with
        ``time_stages`` its stages go into :attr:`stage_times`."""
        timed = self.time_stages
        t0 = time.perf_counter() if timed else 0.0
        tokens, ids = _prompt(request)
        snap, order = self._snapshot(slots, ids)
        t1 = time.perf_counter() if timed else 0.0
        rows = self._rows(snap, tokens)
        t2 = time.perf_counter() if timed else 0.0
        pick = int(self.policy.decide(snap, tokens, rows=rows))
        if timed:
            t3 = time.perf_counter()
            stage = self.stage_times
            stage["snapshot"].append(t1 - t0)
            stage["observation"].append(t2 - t1)
            stage["policy"].append(t3 - t2)
        return pick if order is None else order[pick]

    def _snapshot(self, slots: List[int], ids: Any) -> tuple[ReplicaSnapshot, Optional[List[int]]]:
        """The snapshot of the candidates' slots for a prompt of ``ids``, and for each of its replicas the
        candidate's index (None: the candidates are all replicas in slot order)."""
        snap = self.view.snapshot(ids)
        n = self.view.num_replicas
        if len(slots) == n and slots == list(range(n)):
            return snap, None
        # the candidates' indices in slot order (the snapshot's, and restrict's, which keeps slot order)
        order = sorted(range(len(slots)), key=slots.__getitem__)
        if len(slots) == n and len(set(slots)) == n:  # every replica, in Ray's order (its replica list's)
            return snap, order
        keep = np.zeros(n, dtype=bool)
        keep[slots] = True
        return restrict(snap, keep), order

    def _rows(self, snap: ReplicaSnapshot, tokens: float) -> Optional[np.ndarray]:
        """The policy's observation rows of ``snap`` (None: it reads the snapshot alone)."""
        return build_observation(snap, tokens, self.obs_config) if self.policy.observation is not None else None

    def _set_thread_nice(self) -> None:
        """Give this thread (the one Ray decides on) the niceness ``thread_nice``, once; a refusal is reported."""
        self._nice_due = False
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.thread_nice)
        except OSError as exc:
            self.thread_nice_error = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"PolicyRequestRouter({self.spec}): thread_nice={self.thread_nice} not set: "
                          f"{self.thread_nice_error}", RuntimeWarning, stacklevel=2)

    def _enter_realtime(self) -> bool:
        """Put this thread under ``SCHED_FIFO`` for the loop step this decision is in; whether this call did
        (False: not asked, refused before, real-time already from an earlier decision of the step, or made
        real-time by someone else, then left so)."""
        if not self.realtime_decisions or self._own_policy is not None:
            return False
        thread = threading.get_ident()  # no system call: each one is a point where a waiting task can take the CPU
        own = self._thread_policies.get(thread)
        try:
            if own is None:
                own = self._thread_policies[thread] = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
            if own[0] & ~os.SCHED_RESET_ON_FORK in (os.SCHED_FIFO, os.SCHED_RR):
                return False
            # threads started meanwhile (torch's or Ray's) must not inherit real time: reset on fork
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
        except (OSError, AttributeError) as exc:  # no CAP_SYS_NICE / RLIMIT_RTPRIO, or not Linux
            self.realtime_decisions = False
            self.realtime_error = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"PolicyRequestRouter({self.spec}): realtime_decisions not used: {self.realtime_error}",
                          RuntimeWarning, stacklevel=3)
            return False
        self._own_policy = own
        return True

    def _leave_realtime(self) -> None:
        """Put back the policy and priority :meth:`_enter_realtime` found at the thread's first decision (the
        niceness never changed)."""
        own, self._own_policy = self._own_policy, None
        if own is not None:
            os.sched_setscheduler(0, own[0], os.sched_param(own[1]))

    # ---- keeping warm ----------------------------------------------------------------------------
    def _keep_warm(self) -> None:
        """After a decision: make sure a rehearsal is due ``warm_every_s`` from now."""
        if self._warm_timer is None and self._loop is not None:
            self._warm_timer = self._loop.call_later(self.warm_every_s, self._rehearse)

    def _rehearse(self) -> None:
        """Rehearse the last decision (its candidates, its prompt) on the view as it is now, changing
        nothing: no stats folded, nothing counted, the policy's generator put back. Stops after
        :data:`WARM_FOR_S` without a request; the next decision starts it again."""
        self._warm_timer = None
        since = time.perf_counter() - self._last_decision_at
        if since > WARM_FOR_S or self.rehearsal_error is not None:
            return
        if since >= self.warm_every_s:
            start_cpu = time.thread_time()
            try:
                _, slots = self._slots(self._last_candidates)
                tokens, ids = _prompt(self._last_request)
                snap, _ = self._snapshot(slots, ids)
                self.policy.rehearse(snap, tokens, rows=self._rows(snap, tokens))
            except Exception as exc:  # noqa: BLE001 - keeping warm must never stop routing: it stops itself
                self.rehearsal_error = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"PolicyRequestRouter({self.spec}): keeping warm stopped: {self.rehearsal_error}",
                              RuntimeWarning, stacklevel=1)
                return
            self.rehearsals += 1
            self.rehearsal_cpu_s += time.thread_time() - start_cpu
            delay = self.warm_every_s
        else:
            delay = self.warm_every_s - since
        if self._loop is not None and not self._loop.is_closed():
            self._warm_timer = self._loop.call_later(delay, self._rehearse)

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        """The policy's pick first, then the other candidates (Ray moves on when a replica is full)."""
        if self._nice_due:
            self._set_thread_nice()
        # real time first: the counters read below are system calls, where a task waiting for this CPU
        # takes it. Entering counts in the decision's time, the counters' own calls do not.
        entering = time.perf_counter()
        realtime = self._enter_realtime()
        entered = time.perf_counter()
        counted, start_gc, start_cpu = _thread_counts(), _GC_SECONDS[0], time.thread_time()
        start = time.perf_counter()
        decided = False
        try:
            self._loop = asyncio.get_running_loop()
            if pending_request is not None:
                pending_request.routing_context.should_backoff = True  # every candidate is tried each round
            candidates, slots = self._slots(candidate_replicas)
            if not candidates:
                return [candidate_replicas] if candidate_replicas else []
            timed = self.time_stages
            t_stats = time.perf_counter() if timed else 0.0
            reason = self._fold_stats(candidates, slots)
            t_request = time.perf_counter() if timed else 0.0
            request = _routed_request(pending_request)
            if timed:
                self.stage_times["stats"].append(t_request - t_stats)
                self.stage_times["request"].append(time.perf_counter() - t_request)
            chosen = candidates[self._decide(slots, request)]
            decided = True
        finally:  # real time ends with the loop's step (the request handed on), at once if the decision failed
            if realtime and decided:
                self._loop.call_soon(self._leave_realtime)
            elif realtime:
                self._leave_realtime()
        end = time.perf_counter()
        elapsed = end - start + entered - entering
        self.decision_cpu_times.append(time.thread_time() - start_cpu)
        self.decision_times.append(elapsed)
        self.decision_gc_times.append(_GC_SECONDS[0] - start_gc)
        counted_now = _thread_counts()
        self.decisions_preempted += int(counted_now[0] > counted[0])
        self.decisions_blocked += int(counted_now[1] > counted[1])
        self.decision_faults.append(counted_now[2] - counted[2])
        self.decisions += 1
        if self.warm_every_s:
            self._last_decision_at, self._last_candidates, self._last_request = end, candidates, request
            self._keep_warm()
        if self._decision_hist is not None:
            self._decision_hist.observe(1000.0 * elapsed)
        if reason is not None:
            self.fallbacks[reason] += 1
            if self._fallback_counter is not None:
                self._fallback_counter.inc(tags={"reason": reason})
        rest = [r for r in candidates if r is not chosen]
        return [[chosen], rest] if rest else [[chosen]]

    # ---- bookkeeping between polls -------------------------------------------------------------
    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        self.routing_ms.append(1000.0 * (time.time() - pending_request.created_at))
        slot = self._slot.get(replica_id)
        if slot is None:
            return
        request = _routed_request(pending_request)
        tokens, ids = _prompt(request)
        key = self.view.sent(slot, tokens, ids)
        self._routed[pending_request.metadata.internal_request_id] = (slot, key)
        if request is not None:
            self._by_key[request.key] = key

    def first_token(self, request_key: str, tokens: int = 1) -> None:
        """The ingress saw the first ``tokens`` output tokens of ``request_key``."""
        key = self._by_key.pop(request_key, None)
        if key is not None:
            self.view.token(key, tokens)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        routed = self._routed.pop(internal_request_id, None)
        if routed is not None:
            req = self.view.finished(routed[1])
            if req is not None and self._by_key:
                self._by_key = {k: v for k, v in self._by_key.items() if v != routed[1]}

    # ---- report --------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Decisions, fallbacks by reason, decision time p50/p99 (ms), the last :data:`REPORTED_TIMES`
        decision times in all and per stage (ms), requests in flight, the policy."""
        times = np.asarray(self.decision_times) * 1000.0
        stages = {name: reported_times(values, 1000.0) for name, values in self.stage_times.items() if values}
        return {"stage_ms": stages, "policy": self.spec, "decisions": self.decisions, "fallbacks": dict(self.fallbacks),
                "decision_ms_p50": float(np.percentile(times, 50)) if len(times) else None,
                "decision_ms_p99": float(np.percentile(times, 99)) if len(times) else None,
                "decision_ms": reported_times(times), "decision_cpu_ms": reported_times(self.decision_cpu_times, 1000.0),
                "decision_gc_ms": reported_times(self.decision_gc_times, 1000.0),
                "routing_ms": reported_times(self.routing_ms, digits=4),
                "rehearsals": self.rehearsals, "rehearsal_cpu_ms": round(1000.0 * self.rehearsal_cpu_s, 3),
                "rehearsal_error": self.rehearsal_error, "thread_nice_error": self.thread_nice_error,
                "realtime_error": self.realtime_error, "decisions_preempted": self.decisions_preempted,
                "decisions_blocked": self.decisions_blocked, "decision_faults": list(self.decision_faults)[-REPORTED_TIMES:],
                "in_flight": len(self.view.inflight), "replicas": len(self._ids),
                "replica_stats": [dict(s) for s in self._last_stats]}


def fold_stats(view: LiveClusterView, slot: int, stats: dict[str, Any]) -> None:
    """Fold one replica's ``record_routing_stats`` dict into ``view`` as the gateway folds an engine scrape."""
    metrics = {}
    for key, name in (("waiting", "vllm:num_requests_waiting"), ("running", "vllm:num_requests_running"),
                      ("kv_usage", "vllm:kv_cache_usage_perc")):
        value = stats.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            metrics[name] = float(value)
    view.engine_reported(slot, metrics)
    blocks = stats.get("prefix_blocks")
    if isinstance(blocks, (int, float)):
        view.prefix_reported(slot, float(blocks))
    capacity = stats.get("kv_capacity_tokens")
    if isinstance(capacity, (int, float)):
        view.engine_capacity(slot, float(capacity))
    rate = stats.get("decode_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
        view.decode_rate[slot] = float(rate)


#: ``getrusage``'s per-thread target (Linux); None where the system has none
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _thread_counts() -> tuple[int, int, int]:
    """How many times so far this thread was switched out against its will (preempted) and of its own
    (it blocked), and the page faults it took (minor and major); zeros where the system does not say
    per thread."""
    if _RUSAGE_THREAD is None:
        return 0, 0, 0
    usage = resource.getrusage(_RUSAGE_THREAD)
    return usage.ru_nivcsw, usage.ru_nvcsw, usage.ru_minflt + usage.ru_majflt


def _prompt(request: Any) -> tuple[int, Any]:
    """A routed request's prompt tokens and ids (None: a one-token prompt without ids)."""
    return (request.prompt_tokens, request.prompt_ids) if request is not None else (1, [])


def _routed_request(pending_request: Optional[PendingRequest]) -> Any:
    """The :class:`~.request.RoutedRequest` among the request's arguments, if any. Recognised by its
    attributes, not its class: Ray pickles this package by value into the router's process, where
    its classes are copies of the ingress's."""
    if pending_request is None:
        return None
    for arg in list(pending_request.args) + list(pending_request.kwargs.values()):
        if hasattr(arg, "prompt_tokens") and hasattr(arg, "prompt_ids") and hasattr(arg, "key"):
            return arg
    return None
