"""The gateway: an OpenAI-compatible proxy that routes each request to one of N engines with any router.

This module holds its routing state, :class:`Gateway`; the HTTP handlers that hold it by composition
are :mod:`schedulers.serve.app`.

Any registered policy (:func:`schedulers.routing.policy.make_policy`: a heuristic, a PPO checkpoint, a plug-in) decides on the
:class:`~schedulers.live.view.LiveClusterView` snapshot (the simulator's ``ReplicaSnapshot``),
restricted to the healthy replicas. Streaming responses pass through chunk by chunk; each request's
TTFT, e2e, tokens and decision (observation rows, action, router) are recorded in Prometheus
metrics and, with a decision log, in JSON Lines with its per-request reward from a rewardkit
config. Faults: a backend that cannot be reached (or breaks the connection before answering) is
marked unhealthy and the request is retried once elsewhere, as is one whose first byte is late
(:mod:`schedulers.serve.deadlines`; a slow answer does not make a backend unhealthy: health checks
bring replicas back and take them out); a failure after the headers is a 502/504 or, in a stream,
an error event (:mod:`schedulers.serve.attempt`, which closes every attempt on every path); no
healthy backend is a 503; a malformed body a 400, an oversized one a 413
(:mod:`schedulers.serve.request_body`), always in OpenAI's error shape; a client that disconnects
cancels its upstream request, plain or streamed. Access and redaction: :mod:`schedulers.serve.access`.
Upstream calls go through the one :class:`~schedulers.shared.engine_client.EngineClient`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..live.decision_log import Decision, DecisionLogWriter
from ..live.view import LiveClusterView, restrict
from ..routing.observation import build_observation, feature_names
from ..routing.policy import make_policy
from ..shared.engine_client import EngineClient, EngineError
from ..shared.prometheus import kv_capacity_tokens, parse_metrics
from ..shared.request_reward import reads_request_keys_only, request_context
from ..shared.observation_config import ObservationConfig
from .access import redact_url, split_credentials
from .deadlines import Deadlines, Drain
from .ledger import Ledger
from .settings import GatewaySettings

__all__ = ["Gateway", "GatewaySettings"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Gateway:
    """The proxy's state: the live view, the router, the HTTP client, metrics and the decision log."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        n = len(settings.backends)
        # credentials in a URL travel as a header (the engine client sends none from the URL); the log and
        # messages show the URL with its password as ***
        split = [split_credentials(u.rstrip("/")) for u in settings.backends]
        self.urls = [url for url, _ in split]
        self.shown_urls = [redact_url(u.rstrip("/")) for u in settings.backends]
        #: headers of every call to backend i (its credentials, then --backend-api-key/--backend-header)
        self.backend_headers = [{**auth, **settings.extra_headers} for _, auth in split]
        #: headers of every routed request to backend i
        self.post_headers = [{"content-type": "application/json", **h} for h in self.backend_headers]
        view = LiveClusterView(n, settings.declared_speeds, kv_capacity=settings.kv_capacity_blocks)
        self.registry = CollectorRegistry()
        labels = ["replica"]
        self.routed = Counter("rewardkit_gateway_routed", "requests routed per replica", labels, registry=self.registry)
        self.retried = Counter("rewardkit_gateway_retried", "requests retried elsewhere after a backend failed",
                               labels, registry=self.registry)
        self.in_flight = Gauge("rewardkit_gateway_in_flight", "requests in flight per replica", labels,
                               registry=self.registry)
        self.healthy_gauge = Gauge("rewardkit_gateway_backend_healthy", "1 while the backend passes health checks",
                                   labels, registry=self.registry)
        self.ttft = Histogram("rewardkit_gateway_ttft_seconds", "time to first token of streamed requests",
                              labels, buckets=LATENCY_BUCKETS, registry=self.registry)
        self.e2e = Histogram("rewardkit_gateway_e2e_seconds", "end-to-end latency", labels, buckets=LATENCY_BUCKETS,
                             registry=self.registry)
        self.reward = Histogram("rewardkit_gateway_request_reward", "per-request reward of the reward config",
                                buckets=(-100, -10, -5, -2, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 2, 5, 10, 100),
                                registry=self.registry)
        self.decision_time = Histogram("rewardkit_gateway_decision_seconds", "time to route one request",
                                       buckets=(1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 0.01), registry=self.registry)
        for i in range(n):
            self.healthy_gauge.labels(str(i)).set(1)
        # each replica's labelled metrics, looked up once (a label lookup per request is measurable)
        labels = [str(i) for i in range(n)]
        #: what each attempt reads and writes: the view, the per-replica metrics, the open attempts
        self.ledger = Ledger(view, routed=[self.routed.labels(x) for x in labels],
                             in_flight=[self.in_flight.labels(x) for x in labels],
                             ttft=[self.ttft.labels(x) for x in labels], e2e=[self.e2e.labels(x) for x in labels],
                             reward=self.request_reward, record=self.record)
        self.policy = _policy(settings)
        #: the rows every decision logs: the policy's own settings, else the defaults
        self.obs_config = self.policy.observation or ObservationConfig()
        self.composer = _request_reward_composer(settings.reward)
        self._check_policy()
        self.log = None
        #: each replica's KV capacity (tokens) as last written to the decision log
        self.logged_kv_tokens: list[int | None] = [None] * n
        if settings.decision_log:
            try:
                self.log = DecisionLogWriter(settings.decision_log, router=settings.router,
                                             replicas=self.shown_urls,
                                             observation=dataclasses.asdict(self.obs_config),
                                             features=list(feature_names(self.obs_config)), reward=settings.reward,
                                             prompt_block_tokens=view.block_size, checkpoint=settings.checkpoint)
            except OSError as exc:
                raise ValueError(f"--decision-log {settings.decision_log}: cannot write it "
                                 f"({exc.strerror or type(exc).__name__})") from None
        #: the one engine client (health checks, scrapes, /v1/models and every routed request)
        self.engine: EngineClient | None = None
        self._health_task: asyncio.Task | None = None
        self._scrape_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.drain = Drain()
        self.deadlines = Deadlines(settings.connect_timeout_s, settings.first_byte_timeout_s,
                                   settings.request_timeout_s)

    @property
    def view(self) -> LiveClusterView:
        """The live cluster view the gateway routes on (the ledger's)."""
        return self.ledger.view

    @view.setter
    def view(self, view: LiveClusterView) -> None:
        self.ledger.view = view

    # ---- lifecycle -------------------------------------------------------------------------------
    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        # each read is bounded by the whole request's deadline here; an attempt's own deadlines
        # (first byte, whole request, drain: :mod:`.deadlines`) are what end it
        self.engine = EngineClient(self.settings.request_timeout_s, self.settings.connect_timeout_s)
        self._health_task = asyncio.create_task(self._health_loop())
        if self.settings.scrape_interval_s > 0:
            self._scrape_task = asyncio.create_task(self._scrape_loop())

    def request_drain(self, seconds: float) -> None:
        """SIGTERM: requests get ``seconds`` more, then end with an error answer (safe from a signal handler)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.drain.begin, seconds)

    async def shutdown(self) -> None:
        for task in (self._health_task, self._scrape_task):
            if task is not None:
                task.cancel()
        for attempt in list(self.ledger.open_attempts):  # none after a drain; a forced stop leaves no phantom
            await attempt.end("cancelled", 0, "the gateway stopped")
        if self.engine is not None:
            await self.engine.aclose()
        if self.log is not None:
            log, self.log = self.log, None
            log.close()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.gather(*(self._check(i) for i in range(len(self.urls))))
            await asyncio.sleep(self.settings.health_interval_s)

    async def _check(self, i: int) -> None:
        try:
            resp = await self.engine.request("GET", self.urls[i] + "/health", headers=self.backend_headers[i],
                                             timeout_s=max(self.settings.health_interval_s, 0.5))
            ok = resp.status == 200
        except EngineError:
            ok = False
        self.set_healthy(i, ok)

    async def _scrape_loop(self) -> None:
        """Scrape every healthy backend each interval; one failed scrape is reported once, never ends the loop."""
        reported: set[str] = set()
        while True:
            healthy = np.flatnonzero(self.view.healthy)
            results = await asyncio.gather(*(self._scrape(i) for i in healthy), return_exceptions=True)
            for i, result in zip(healthy, results, strict=True):
                if isinstance(result, Exception) and type(result).__name__ not in reported:
                    reported.add(type(result).__name__)
                    print(f"rewardkit gateway: reading {self.shown_urls[i]}/metrics failed ({type(result).__name__}: "
                          f"{result}); the next scrapes go on", file=sys.stderr)
            await asyncio.sleep(self.settings.scrape_interval_s)

    async def _scrape(self, i: int) -> None:
        """Fold backend ``i``'s ``/metrics`` into the view; an engine without them is just not read."""
        try:
            resp = await self.engine.request("GET", self.urls[i] + "/metrics", headers=self.backend_headers[i],
                                             timeout_s=max(self.settings.scrape_interval_s, 1.0))
        except EngineError:
            return
        if resp.status == 200:
            text = resp.body.decode("utf-8", "replace")
            metrics = parse_metrics(text)
            if metrics:
                self.view.engine_reported(int(i), metrics)
            capacity = kv_capacity_tokens(text)
            if capacity is not None:
                self.view.engine_capacity(int(i), capacity)
                self._log_capacity(int(i), capacity)

    def _log_capacity(self, i: int, tokens: float) -> None:
        """Write an ``engines`` line when a replica's reported KV capacity is new or changed (a replay sizes
        each replica's prefix cache from it)."""
        if self.log is None or not (tokens > 0 and tokens == tokens and tokens != float("inf")):
            return
        if self.logged_kv_tokens[i] != int(tokens):
            self.logged_kv_tokens[i] = int(tokens)
            self.log.write_engines(list(self.logged_kv_tokens))

    def set_healthy(self, i: int, ok: bool) -> None:
        self.view.healthy[i] = ok
        self.healthy_gauge.labels(str(i)).set(1 if ok else 0)

    # ---- routing ---------------------------------------------------------------------------------
    def _check_policy(self) -> None:
        """Route one request on the idle cluster before serving: a policy that cannot (a checkpoint with
        NaN weights, a wrong shape) is a one-line error at start, not a 500 on every request."""
        try:
            pick = self.decide(1, [], set(), timed=False)
        except Exception as exc:  # noqa: BLE001 - whatever the policy raises, the flag is named
            raise ValueError(f"--router {self.settings.router}: the router cannot route an idle cluster "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
        finally:
            self.policy.reset(self.settings.seed)  # the check leaves no trace (round_robin's turn, a sampler's draws)
        if pick is None or not 0 <= pick[0] < len(self.urls):
            raise ValueError(f"--router {self.settings.router}: the router picked no replica on an idle cluster")

    def any_healthy(self, exclude: set[int]) -> bool:
        """Whether a healthy replica outside ``exclude`` is left (somewhere to move a request to)."""
        return any(ok and i not in exclude for i, ok in enumerate(self.view.healthy))

    def decide(self, prompt_tokens: int, prompt_ids: list[int], exclude: set[int],
               with_rows: bool = True, timed: bool = True) -> tuple[int, np.ndarray | None] | None:
        """The replica for a request (None: no healthy replica) and the observation rows of all replicas
        (built when ``with_rows`` or the policy reads them; else None)."""
        start = time.perf_counter()
        view = self.ledger.view
        keep = view.healthy
        if exclude:
            keep = keep.copy()
            keep[list(exclude)] = False
        if not keep.any():
            return None
        snap = view.snapshot(prompt_ids)
        rows = None
        if with_rows or self.policy.observation is not None:
            rows = build_observation(snap, prompt_tokens, self.obs_config)
        if keep.all():
            replica = self.policy.decide(snap, prompt_tokens, rows=rows)
        else:
            candidates = np.flatnonzero(keep)
            replica = int(candidates[self.policy.decide(restrict(snap, keep), prompt_tokens,
                                                        rows=None if rows is None else rows[keep])])
        if timed:
            self.decision_time.observe(time.perf_counter() - start)
        return int(replica), rows

    # ---- rewards and records ---------------------------------------------------------------------
    def request_reward(self, ttft_s: float | None, e2e_s: float | None, prompt_tokens: int,
                       output_tokens: int) -> tuple[float | None, dict[str, float]]:
        """The reward config's value for one finished request (None without a config or a latency it reads)."""
        if self.composer is None or e2e_s is None:
            return None, {}
        ctx = request_context(ttft_s if ttft_s is not None else e2e_s, e2e_s, prompt_tokens, output_tokens)
        try:
            out = self.composer(ctx)
        except Exception:  # noqa: BLE001 - a reward config reading keys the live side lacks: no reward, routing goes on
            return None, {}
        terms = {k: float(v) for k, v in out.as_dict().items()}
        return float(out.total), terms

    def record(self, decision: Decision) -> None:
        if decision.reward is not None:
            self.reward.observe(decision.reward)
        if self.log is not None:
            self.log.write(decision)


def _policy(settings: GatewaySettings) -> Any:
    """The router, or a one-line error naming the flag (a checkpoint that cannot be used, whatever fails)."""
    try:
        return make_policy(settings.router, settings.checkpoint, seed=settings.seed, simulated=False,
                           threads=settings.torch_threads)
    except ValueError as exc:  # CheckpointError too: a one-line message naming the flag
        raise ValueError(f"--router {settings.router}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a checkpoint torch or the policy cannot build on: one line, no traceback
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ValueError(f"--checkpoint {settings.checkpoint}: expected a policy written by rewardkit train, got one "
                         f"that cannot be loaded ({type(exc).__name__}: {reason})") from None


def _request_reward_composer(path: str | None) -> Any:
    """The reward config's composer, refused when it reads more than per-request keys (as the live env does:
    a live cluster has no simulated step, and every reward would silently be null)."""
    if not path:
        return None
    from rewardkit import RewardComposer

    try:
        composer = RewardComposer.from_yaml(path)
    except ValueError as exc:
        raise ValueError(f"--reward {path}: {exc}") from None
    needed = getattr(composer, "context_keys", None)
    if callable(needed) and not reads_request_keys_only(needed()):
        raise ValueError(f"--reward {path}: expected a reward of per-request keys only (ttft, e2e, prompt_tokens, "
                         f"decode_tokens), got one reading {', '.join(sorted(needed()))}")
    return composer


