"""What a replica reports to the router through Ray Serve's ``record_routing_stats``.

Ray Serve's controller calls a replica's ``record_routing_stats()`` every
``request_routing_stats_period_s`` and hands the returned dict to every router as
``RunningReplica.routing_stats``. :class:`ReplicaStats` keeps the replica's side of it: its own
requests in flight (and their prompt tokens until the first token), the prompts it served (a
:class:`~schedulers.routing.prefix_index.PrefixIndex` mirror: the prefix blocks it likely holds),
its measured decode rate, and its engine's last ``/metrics`` (requests waiting and running, KV
use, KV capacity). :meth:`ReplicaStats.record` is the dict, keys :data:`STATS_KEYS`;
:class:`RoutingStatsMixin` gives a deployment ``record_routing_stats`` from it; :func:`fold_stats` is
the router's side, folding one such dict into its view.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...live.view import LiveClusterView
from ...routing.prefix_index import PrefixIndex
from ...shared.prometheus import kv_capacity_tokens, parse_metrics

#: the keys of :meth:`ReplicaStats.record` (values are numbers, or None where unknown)
STATS_KEYS = (
    "at",                  # wall-clock time (time.time()) the stats were taken: the router's staleness test
    "in_flight",           # requests the replica is serving now
    "waiting",             # requests not yet started: the engine's count when it reported one, else the replica's own
    "running",             # requests started (engine's count when known, else those past their first token)
    "prefill_tokens",      # prompt tokens of the replica's requests still awaiting their first token
    "kv_usage",            # the engine's KV-cache use, 0-1 (None: no engine metrics)
    "kv_capacity_tokens",  # tokens of KV cache the engine holds (None: not reported)
    "prefix_blocks",       # prompt blocks of the prompts it served (LRU bounded): the prefix blocks it likely holds
    "decode_rate",         # output tokens per second per request after the first token (average; None: not yet)
    "completed",           # requests finished since start
)


@dataclass
class _Request:
    prompt_tokens: int
    started_at: float
    first_token_at: float | None = None
    tokens: int = 0


class ReplicaStats:
    """A replica's own bookkeeping for :meth:`record` (see the module doc); not thread-safe (one event loop)."""

    def __init__(self, block_size: int = 32, prefix_capacity_blocks: int = 4096, speed_weight: float = 0.2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.speed_weight = speed_weight
        self.requests: dict[str, _Request] = {}
        self.prefix = PrefixIndex(1, block_size, prefix_capacity_blocks)
        self.decode_rate = math.nan
        self.completed = 0
        self.engine: dict[str, float] = {}
        self.capacity_tokens: float | None = None

    def started(self, key: str, prompt_tokens: int, prompt_ids: Sequence[int] = ()) -> None:
        """Request ``key`` of ``prompt_tokens`` tokens went to the engine."""
        self.requests[key] = _Request(int(prompt_tokens), self.clock())
        if len(prompt_ids):
            self.prefix.insert(0, list(prompt_ids))

    def tokens(self, key: str, count: int = 1) -> None:
        """``count`` output tokens of ``key`` came back (the first ends its prefill)."""
        req = self.requests.get(key)
        if req is None or count <= 0:
            return
        if req.first_token_at is None:
            req.first_token_at = self.clock()
        req.tokens += count

    def finished(self, key: str) -> None:
        """Request ``key`` is over; its decode rate joins the replica's average."""
        req = self.requests.pop(key, None)
        if req is None:
            return
        self.completed += 1
        if req.first_token_at is not None and req.tokens >= 2:
            span = self.clock() - req.first_token_at
            if span > 0:
                rate = (req.tokens - 1) / span
                old = self.decode_rate
                self.decode_rate = rate if math.isnan(old) else old + self.speed_weight * (rate - old)

    def engine_metrics(self, text: str) -> None:
        """Fold the engine's ``/metrics`` text in (vLLM's names)."""
        self.engine = parse_metrics(text)
        capacity = kv_capacity_tokens(text)
        if capacity is not None:
            self.capacity_tokens = capacity

    def record(self) -> dict[str, Any]:
        """The stats dict (:data:`STATS_KEYS`), JSON-friendly: what ``record_routing_stats`` returns."""
        waiting_own = sum(1 for r in self.requests.values() if r.first_token_at is None)
        prefill = sum(r.prompt_tokens for r in self.requests.values() if r.first_token_at is None)
        waiting = self.engine.get("vllm:num_requests_waiting")
        running = self.engine.get("vllm:num_requests_running")
        kv = self.engine.get("vllm:kv_cache_usage_perc")
        return {
            "at": time.time(),
            "in_flight": len(self.requests),
            "waiting": float(waiting_own if waiting is None else waiting),
            "running": float(len(self.requests) - waiting_own if running is None else running),
            "prefill_tokens": float(prefill),
            "kv_usage": None if kv is None or math.isnan(kv) else float(kv),
            "kv_capacity_tokens": self.capacity_tokens,
            "prefix_blocks": float(self.prefix.size(0)),
            "decode_rate": None if math.isnan(self.decode_rate) else float(self.decode_rate),
            "completed": self.completed,
        }


class RoutingStatsMixin:
    """Gives a Ray Serve deployment ``record_routing_stats``: ``self.routing_stats`` (a :class:`ReplicaStats`)
    after ``await self.read_engine_metrics()`` (override it to scrape the engine; the default reads nothing)."""

    routing_stats: ReplicaStats

    async def read_engine_metrics(self) -> str | None:
        """The engine's ``/metrics`` text, or None (then the replica's own counts stand in)."""
        return None

    async def record_routing_stats(self) -> dict[str, Any]:
        """Called by Ray Serve every ``request_routing_stats_period_s``."""
        try:
            text = await self.read_engine_metrics()
        except Exception:  # noqa: BLE001 - an engine that cannot be read: report the replica's own counts
            text = None
        if text:
            self.routing_stats.engine_metrics(text)
        else:
            self.routing_stats.engine = {}
        return self.routing_stats.record()


def fold_stats(view: LiveClusterView, slot: int, stats: dict[str, Any]) -> None:
    """Fold one replica's ``record_routing_stats`` dict into ``view`` as the gateway folds an engine scrape
    (a value that is not a finite number, or a capacity or rate not above 0, is left out)."""
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
    if isinstance(capacity, (int, float)) and math.isfinite(capacity) and capacity > 0:
        view.engine_capacity(slot, float(capacity))
    rate = stats.get("decode_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
        view.decode_rate[slot] = float(rate)
