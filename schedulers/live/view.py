"""``LiveClusterView``: what a gateway knows about its replicas, as the ``ReplicaSnapshot`` routers read.

Which fields are live and which estimated (docs/serving.md has the table):

- live, from the gateway's own in-flight requests: ``waiting`` (sent, no token yet), ``running``
  (streaming), ``prefill_tokens`` and ``waiting_prefill_tokens`` (prompts of waiting requests),
  ``decoded_tokens`` (tokens streamed so far), ``recent_completions``, ``since_completion``,
  ``tokens_per_s`` (prompt and output tokens of the recent window), ``busy``;
- from the engines' scraped ``/metrics`` when fresh (:meth:`LiveClusterView.engine_reported`),
  plus what the gateway sent since that scrape (the engine could not count it yet; without it
  every request between two scrapes would go to the replica that looked emptiest at the last one):
  ``waiting`` and ``running`` are at least the engine's counts (which include other clients'
  requests), ``kv_blocks`` is the engine's KV-cache use times its capacity, and ``kv_capacity``
  the engine's own (``vllm:cache_config_info``: blocks times block size) when it reports one;
- estimated: ``kv_blocks`` without a scrape (in-flight tokens over the block size) out of ``kv_capacity`` (given);
  ``measured_speed`` from live decode rates (each finished request's tokens per second after its
  first, averaged per replica and compared with the other replicas' per unit of declared speed:
  :meth:`LiveClusterView.measured_speeds`), so ``adaptive`` sees a replica that slows down;
  ``prefix_match`` from a :class:`~schedulers.routing.prefix_index.PrefixIndex`
  mirror of what each replica was sent (token-id prompts only); ``prefix_blocks`` the mirror's size,
  or what the replica itself reported holding when that is larger (:meth:`LiveClusterView.prefix_reported`).

Replicas marked unhealthy are left out of a decision: the gateway hands its policy the snapshot of
the healthy ones (:func:`restrict`) and maps the choice back.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..bounds import MIN_SPEED
from ..routing.observation import MAX_SPEED  # the observation space's bound on speeds
from ..routing.prefix_index import PrefixIndex
from ..routing.snapshot import LazySnapshot, ReplicaSnapshot


@dataclass
class InFlight:
    """One request the gateway sent and has not seen finish."""

    replica: int
    prompt_tokens: int
    sent_at: float
    decoded: int = 0
    first_token_at: float | None = None
    last_token_at: float | None = None
    #: KV blocks its prompt and output so far take
    blocks: float = 0.0
    #: sent after its replica's engine last reported (so not yet in the engine's numbers)
    recent: bool = True


@dataclass
class LiveClusterView:
    """Per-replica load from the gateway's own bookkeeping (see the module doc)."""

    num_replicas: int
    declared_speed: Sequence[float] | None = None
    block_size: int = 32
    kv_capacity: float = 1024.0
    window_s: float = 10.0
    #: estimate ``measured_speed`` from decode rates (else it is the declared speed)
    measure_speed: bool = True
    #: weight of each finished request in its replica's decode-rate average
    speed_weight: float = 0.2
    #: an engine's scraped metrics older than this (s) are ignored
    engine_stale_s: float = 5.0
    clock: Any = time.monotonic
    healthy: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = self.num_replicas
        self.speeds = np.ones(n) if self.declared_speed is None else np.asarray(self.declared_speed, dtype=np.float64)
        if self.speeds.shape != (n,):
            raise ValueError(f"expected {n} declared speeds, got {len(self.speeds)}")
        self.healthy = np.ones(n, dtype=bool)
        self.inflight: dict[int, InFlight] = {}
        # recent events per replica, oldest first, dropped once older than the window (amortized O(1))
        self.completions: list[deque[float]] = [deque() for _ in range(n)]
        self.tokens: list[deque[tuple[float, int]]] = [deque() for _ in range(n)]
        self.recent_tokens = np.zeros(n)  # the sum of each replica's ``tokens`` window
        self.start = self.clock()
        self.last_completion = np.full(n, self.start)
        self.prefix = PrefixIndex(n, self.block_size)
        self.decode_rate = np.full(n, np.nan)
        # what each engine last reported on /metrics (NaN: nothing yet) and when, and each replica's KV
        # blocks of ``block_size`` tokens: lists of Python floats, which a decision reads with no NumPy call
        self.engine_waiting, self.engine_running, self.engine_kv = ([math.nan] * n for _ in range(3))
        self.engine_at = [-math.inf] * n
        self.capacity = [float(self.kv_capacity)] * n
        self.reported_prefix_blocks = [0.0] * n  # prefix blocks each replica last said it holds (0: nothing said)
        self._keys = itertools.count()
        # per-replica sums over the in-flight requests, kept as each one changes (Python floats: a
        # decision reads them instead of walking every request): waiting, running, their prompt
        # tokens, output tokens, KV blocks of running ones; and of those sent since the last scrape,
        # waiting, running and KV blocks
        self._sums = [[0.0] * n for _ in range(8)]
        self._open: weakref.ref[LazySnapshot] | None = None  # the last snapshot, until the view changes

    # ---- bookkeeping ---------------------------------------------------------------------------
    def sent(self, replica: int, prompt_tokens: int, prompt_ids: Sequence[int] = ()) -> int:
        """A request went to ``replica``; returns its key for :meth:`token` and :meth:`finished`."""
        self._settle()
        key = next(self._keys)
        req = InFlight(int(replica), int(prompt_tokens), self.clock())
        req.blocks = float(math.ceil(req.prompt_tokens / self.block_size))
        req.recent = req.sent_at >= self.engine_at[req.replica]
        self.inflight[key] = req
        self._count(req, 1.0)
        if len(prompt_ids):
            self.prefix.insert(int(replica), prompt_ids)
        return key

    def token(self, key: int, count: int = 1) -> None:
        """``count`` output tokens of request ``key`` arrived (the first one ends its prefill)."""
        self._settle()
        req = self.inflight.get(key)
        if req is None or count <= 0:
            return
        now = self.clock()
        processed = count + (req.prompt_tokens if req.decoded == 0 else 0)
        if req.decoded == 0:
            req.first_token_at = now
        req.last_token_at = now
        self._count(req, -1.0)
        req.decoded += count
        req.blocks = float(math.ceil((req.prompt_tokens + req.decoded) / self.block_size))
        self._count(req, 1.0)
        self.tokens[req.replica].append((now, processed))
        self.recent_tokens[req.replica] += processed

    def finished(self, key: int, completed: bool = True) -> InFlight | None:
        """Request ``key`` is over (``completed``: it finished; else it failed or was cancelled)."""
        self._settle()
        req = self.inflight.pop(key, None)
        if req is not None:
            self._count(req, -1.0)
        if req is not None and completed:
            now = self.clock()
            self.completions[req.replica].append(now)
            self.last_completion[req.replica] = now
            self._measure(req)
        return req

    def _count(self, req: InFlight, sign: float) -> None:
        """Add (``sign`` 1) or remove (-1) ``req``'s share of its replica's sums."""
        waiting, running, prefill, decoded, kv, new_waiting, new_running, new_kv = self._sums
        i = req.replica
        if req.decoded:
            running[i] += sign
            kv[i] += sign * req.blocks
            if req.recent:
                new_running[i] += sign
        else:
            waiting[i] += sign
            prefill[i] += sign * req.prompt_tokens
            if req.recent:
                new_waiting[i] += sign
        if req.recent:
            new_kv[i] += sign * req.blocks
        decoded[i] += sign * req.decoded

    def _measure(self, req: InFlight) -> None:
        """Fold a finished request's decode rate (tokens/s after its first) into its replica's average."""
        if req.decoded < 2 or req.first_token_at is None or req.last_token_at is None:
            return
        span = req.last_token_at - req.first_token_at
        if span <= 0:
            return
        rate = (req.decoded - 1) / span
        old = self.decode_rate[req.replica]
        self.decode_rate[req.replica] = rate if np.isnan(old) else old + self.speed_weight * (rate - old)

    def measured_speeds(self) -> np.ndarray:
        """Each replica's speed estimated from live decode rates, in the declared speeds' units.

        A replica's rate per unit of declared speed is compared with the median of the measured
        replicas of the fastest declared class (so a cluster running as declared reads its declared
        speeds, and one that runs at half its peers' pace per declared unit reads half its declared
        speed); replicas not yet measured read their declared speed. With ``measure_speed=False``: the declared speeds.
        """
        rates, speeds = self.decode_rate.tolist(), self.speeds.tolist()  # plain Python over a handful of replicas
        known = [i for i, rate in enumerate(rates) if rate == rate]
        if not self.measure_speed or not known:
            return np.array(speeds)
        # the reference: replicas of the fastest declared class (they read their declared speed when
        # they run as declared; a median over every class would let slow replicas drag it down)
        fastest = max(speeds[i] for i in known)
        reference = statistics.median(  # np.median to the bit: the middle two averaged
            [rates[i] / speeds[i] for i in known if speeds[i] >= fastest])
        if reference <= 0:
            return np.array(speeds)
        for i in known:
            speeds[i] = min(max(rates[i] / reference, MIN_SPEED), MAX_SPEED)
        return np.array(speeds)

    def engine_reported(self, replica: int, metrics: dict[str, float]) -> None:
        """Fold an engine's scraped ``/metrics`` (vLLM's names, :func:`schedulers.shared.prometheus.parse_metrics`) in."""
        self._settle()
        i = int(replica)
        self.engine_waiting[i] = float(metrics.get("vllm:num_requests_waiting", math.nan))
        self.engine_running[i] = float(metrics.get("vllm:num_requests_running", math.nan))
        self.engine_kv[i] = float(metrics.get("vllm:kv_cache_usage_perc", math.nan))
        self.engine_at[i] = now = float(self.clock())
        for req in self.inflight.values():  # what the engine counted now no longer counts on top
            if req.replica == i and req.recent and req.sent_at < now:
                self._count(req, -1.0)
                req.recent = False
                self._count(req, 1.0)

    def engine_capacity(self, replica: int, tokens: float) -> None:
        """Replica ``replica``'s engine holds ``tokens`` tokens of KV cache (what its ``/metrics`` says)."""
        self._settle()
        if np.isfinite(tokens) and tokens > 0:
            self.capacity[int(replica)] = float(tokens) / self.block_size

    def prefix_reported(self, replica: int, blocks: float) -> None:
        """Replica ``replica`` says it holds ``blocks`` prefix blocks (a Ray Serve replica's routing stats):
        its ``prefix_blocks`` is the larger of that and the mirror's count. A value that is not a finite
        number of at least 0 is ignored."""
        self._settle()
        if math.isfinite(blocks) and blocks >= 0:
            self.reported_prefix_blocks[int(replica)] = float(blocks)

    # ---- what routers see ----------------------------------------------------------------------
    def snapshot(self, prompt_ids: Sequence[int] = ()) -> ReplicaSnapshot:
        """The replicas' load now, as a :class:`ReplicaSnapshot` whose fields are computed on first read.

        A decision reads few fields (``least_prefill`` only ``prefill_tokens``), so each is built when a
        policy asks for it, from the view as it is now: the view completes the snapshot (every field)
        before it changes while the snapshot is still referenced, so a late read sees the same values.
        ``prefix_match`` is :meth:`prefix_match` of ``prompt_ids`` (the arriving request's), looked up
        only when read: a policy that never reads it does not pay for hashing the prompt.
        """
        self._settle()
        snap = LazySnapshot(functools.partial(self._snapshot_field, self.clock(), prompt_ids))
        self._open = weakref.ref(snap)
        return snap

    def _settle(self) -> None:
        """Complete the open snapshot (if one is still referenced) before the view changes."""
        if self._open is not None:
            snap = self._open()
            self._open = None
            if snap is not None:
                snap.complete()

    def _snapshot_field(self, now: float, prompt_ids: Sequence[int], name: str) -> dict[str, Any]:
        """Snapshot field ``name`` at ``now`` (with the fields computed alongside it)."""
        n = self.num_replicas
        # the fields a heuristic reads come as lists (LazySnapshot.floats: no NumPy call on the way)
        if name in ("prefill_tokens", "waiting_prefill_tokens"):
            prefill = list(self._sums[2])  # the prompt tokens of waiting requests, for both fields
            return {"prefill_tokens": prefill, "waiting_prefill_tokens": list(prefill)}
        if name == "decoded_tokens":
            return {name: list(self._sums[3])}
        if name in ("waiting", "running", "kv_blocks", "busy"):
            return self._load_fields(now)
        if name in ("recent_completions", "tokens_per_s"):
            horizon = now - self.window_s
            for i in range(n):
                done, tokens = self.completions[i], self.tokens[i]
                while done and done[0] < horizon:
                    done.popleft()
                while tokens and tokens[0][0] < horizon:
                    self.recent_tokens[i] -= tokens.popleft()[1]
            span = min(self.window_s, max(now - self.start, 1e-3))
            return {"recent_completions": np.array([len(c) for c in self.completions], dtype=float),
                    "tokens_per_s": self.recent_tokens / span}
        if name == "kv_capacity":
            return {name: list(self.capacity)}
        if name == "declared_speed":
            return {name: self.speeds}
        if name == "measured_speed":
            return {name: self.measured_speeds()}
        if name == "since_completion":
            return {name: np.array([max(now - t, 0.0) for t in self.last_completion.tolist()])}
        if name == "prefix_match":
            return {name: self.prefix.shares(prompt_ids)}  # zeros without ids
        if name == "prefix_blocks":
            return {name: [max(float(self.prefix.size(i)), reported) for i, reported in enumerate(self.reported_prefix_blocks)]}
        raise AttributeError(f"ReplicaSnapshot has no field {name!r}")

    def _load_fields(self, now: float) -> dict[str, list[float]]:
        """``waiting``, ``running``, ``kv_blocks`` and ``busy``: the router's own counts, raised to what each
        engine last reported when that is fresh."""
        n = self.num_replicas
        # in plain Python over a handful of replicas: a dozen NumPy calls cost more than the arithmetic,
        # ten times more on the cold CPU a router decides on between requests
        sums = self._sums  # the three an engine's report may raise are copied, the rest only read
        waiting, running, kv = list(sums[0]), list(sums[1]), list(sums[4])
        new_waiting, new_running, new_kv = sums[5], sums[6], sums[7]
        stale_s = self.engine_stale_s
        fresh = [now - at <= stale_s for at in self.engine_at]
        if any(fresh):  # the engines' own counts also hold other clients' requests; their KV use is exact
            engine_waiting, engine_running = self.engine_waiting, self.engine_running
            engine_kv, capacity = self.engine_kv, self.capacity
            for i in range(n):
                if not fresh[i]:
                    continue
                # a count the engine did not report (NaN) is ignored, as np.fmax does
                if engine_waiting[i] == engine_waiting[i]:
                    waiting[i] = max(waiting[i], engine_waiting[i] + new_waiting[i])
                if engine_running[i] == engine_running[i]:
                    running[i] = max(running[i], engine_running[i] + new_running[i])
                if engine_kv[i] == engine_kv[i]:
                    kv[i] = min(max(engine_kv[i], 0.0), 1.0) * capacity[i] + new_kv[i]
        return {"waiting": waiting, "running": running, "kv_blocks": kv,
                "busy": [1.0 if w + r > 0 else 0.0 for w, r in zip(waiting, running, strict=True)]}

    def prefix_match(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """Per replica, the share of ``prompt_ids`` its prefix cache likely holds (zeros without ids)."""
        return self.prefix.match(prompt_ids)


def restrict(snapshot: ReplicaSnapshot, keep: np.ndarray) -> ReplicaSnapshot:
    """The snapshot of the replicas where ``keep`` is true (in order; fields computed as they are read)."""
    return LazySnapshot(lambda name: {name: np.asarray(getattr(snapshot, name))[keep]})
