"""The gateway: an OpenAI-compatible proxy that routes each request to one of N engines with any router.

Every router of :func:`schedulers.routing.heuristics.choose` and a PPO checkpoint decide on the
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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from typing import Any, AsyncIterator, Awaitable

import httpx
import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..live.decision_log import Decision, DecisionLogWriter
from ..live.view import LiveClusterView, restrict
from ..routing.observation import ObservationConfig, build_observation, feature_names
from ..routing.heuristics import HEURISTIC_NAMES
from ..routing.policy import make_policy
from ..shared.engine_client import REPLICA_HEADER
from ..shared.prometheus import kv_capacity_tokens, parse_metrics
from ..shared.request_reward import reads_request_keys_only, request_context
from .access import RequireApiKey, redact_url, request_id
from .attempt import Attempt, BackendFailed, BackendUnreachable, RelayResponse, failure, openai_error
from .deadlines import DeadlineExceeded, Deadlines, Drain, RequestClock
from .request_body import BadRequest, Payload, parse_payload, read_body, upstream_body
from .settings import MAX_BODY_BYTES, GatewaySettings

__all__ = ["Gateway", "GatewayApp", "GatewaySettings", "MAX_BODY_BYTES", "create_app", "openai_error"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class Gateway:
    """The proxy's state: the live view, the router, the HTTP client, metrics and the decision log."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        n = len(settings.backends)
        self.urls = [u.rstrip("/") for u in settings.backends]
        self.view = LiveClusterView(n, settings.declared_speeds, kv_capacity=settings.kv_capacity_blocks)
        self.policy = _policy(settings)
        #: the rows every decision logs: the policy's own settings, else the defaults
        self.obs_config = self.policy.observation or ObservationConfig()
        self.composer = _request_reward_composer(settings.reward)
        self._check_policy()
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
        self.log = None
        if settings.decision_log:
            try:
                self.log = DecisionLogWriter(settings.decision_log, router=settings.router,
                                             replicas=[redact_url(u) for u in self.urls],
                                             observation=dataclasses.asdict(self.obs_config),
                                             features=list(feature_names(self.obs_config)), reward=settings.reward)
            except OSError as exc:
                raise ValueError(f"--decision-log {settings.decision_log}: cannot write it "
                                 f"({exc.strerror or type(exc).__name__})") from None
        self.client: httpx.AsyncClient | None = None
        self.upstream: list[httpx.AsyncClient] = []
        self._health_task: asyncio.Task | None = None
        self._scrape_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: attempts not yet closed (each closes itself; shutdown closes any left as cancelled)
        self.open_attempts: set[Attempt] = set()
        self.drain = Drain()
        self.deadlines = Deadlines(settings.connect_timeout_s, settings.first_byte_timeout_s,
                                   settings.request_timeout_s)

    # ---- lifecycle -------------------------------------------------------------------------------
    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        headers = self.settings.extra_headers
        # health checks and /v1/models: the whole request within the request deadline
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(self.settings.request_timeout_s,
                                                              connect=self.settings.connect_timeout_s),
                                        headers=headers)
        # requests: only the connect timeout here; first byte and whole request are the attempt's deadlines
        # (:mod:`.deadlines`). One connection pool per backend: httpx's pool scans its connections for every
        # queued request, so one shared pool costs O(connections x requests in flight) per request
        timeout = httpx.Timeout(None, connect=self.settings.connect_timeout_s)
        self.upstream = [httpx.AsyncClient(timeout=timeout, headers=headers,
                                           limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
                         for _ in self.urls]
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
        for attempt in list(self.open_attempts):  # none after a drain; a forced stop leaves no phantom
            await attempt.end("cancelled", 0, "the gateway stopped")
        if self.client is not None:
            await self.client.aclose()
            for client in self.upstream:
                await client.aclose()
        if self.log is not None:
            log, self.log = self.log, None
            log.close()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.gather(*(self._check(i) for i in range(len(self.urls))))
            await asyncio.sleep(self.settings.health_interval_s)

    async def _check(self, i: int) -> None:
        try:
            resp = await self.client.get(self.urls[i] + "/health", timeout=max(self.settings.health_interval_s, 0.5))
            ok = resp.status_code == 200
        except httpx.HTTPError:
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
                    print(f"rewardkit gateway: reading {redact_url(self.urls[i])}/metrics failed ({type(result).__name__}: "
                          f"{result}); the next scrapes go on", file=sys.stderr)
            await asyncio.sleep(self.settings.scrape_interval_s)

    async def _scrape(self, i: int) -> None:
        """Fold backend ``i``'s ``/metrics`` into the view; an engine without them is just not read."""
        try:
            resp = await self.client.get(self.urls[i] + "/metrics", timeout=max(self.settings.scrape_interval_s, 1.0))
        except httpx.HTTPError:
            return
        if resp.status_code == 200:
            metrics = parse_metrics(resp.text)
            if metrics:
                self.view.engine_reported(int(i), metrics)
            capacity = kv_capacity_tokens(resp.text)
            if capacity is not None:
                self.view.engine_capacity(int(i), capacity)

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
               timed: bool = True) -> tuple[int, np.ndarray] | None:
        """The replica for a request (None: no healthy replica) and the observation rows of all replicas."""
        start = time.perf_counter()
        keep = self.view.healthy.copy()
        keep[list(exclude)] = False
        if not keep.any():
            return None
        snap = self.view.snapshot(self.view.prefix_match(prompt_ids))
        rows = build_observation(snap, prompt_tokens, self.obs_config)
        candidates = np.flatnonzero(keep)
        pick = self.policy.decide(restrict(snap, keep), prompt_tokens, rows=rows[keep])
        if timed:
            self.decision_time.observe(time.perf_counter() - start)
        return int(candidates[pick]), rows

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
    learned = settings.router not in HEURISTIC_NAMES
    options = {"threads": settings.torch_threads} if settings.checkpoint and learned else {}
    try:
        return make_policy(settings.router, settings.checkpoint, seed=settings.seed, simulated=False, **options)
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


class GatewayApp(Gateway):
    """The HTTP side of the gateway: its handlers (routes in :func:`create_app`)."""

    async def health(self, request: Request) -> Response:
        ok = bool(self.view.healthy.any()) and not self.drain.begun
        return JSONResponse({"healthy_backends": int(self.view.healthy.sum()), "backends": len(self.urls)},
                            status_code=200 if ok else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def models(self, request: Request) -> Response:
        for i in np.flatnonzero(self.view.healthy):
            try:
                resp = await self.client.get(self.urls[i] + "/v1/models")
                return Response(resp.content, status_code=resp.status_code, media_type="application/json")
            except httpx.HTTPError:
                self.set_healthy(int(i), False)
        return openai_error(503, "no healthy backend", "service_unavailable")

    async def completions(self, request: Request) -> Response:
        return await self.proxy(request, chat=False)

    async def chat(self, request: Request) -> Response:
        return await self.proxy(request, chat=True)

    async def proxy(self, request: Request, chat: bool) -> Response:
        """Read and check the body, then forward it while the client stays (a client that leaves cancels it)."""
        clock = RequestClock(self.deadlines, self.drain)
        try:
            async with clock.bound("total"):
                body = await read_body(request, self.settings.max_body_bytes)
            payload = parse_payload(body, chat)
            body = upstream_body(body, payload)
        except BadRequest as exc:
            return openai_error(exc.status, str(exc))
        except DeadlineExceeded as exc:
            return openai_error(408, f"the request body did not arrive in time ({exc})")
        if self.drain.begun:
            return openai_error(503, "the gateway is shutting down", "service_unavailable")
        rid = request_id(request.headers.get("x-request-id"))
        path = "/v1/chat/completions" if chat else "/v1/completions"
        try:
            return await until_client_leaves(request, self.forward(path, body, payload, rid, clock))
        except ClientGone:
            return Response(status_code=499)

    async def forward(self, path: str, body: bytes, payload: Payload, rid: str, clock: RequestClock) -> Response:
        """Route and send; move the request once when its replica is down or its first byte late; relay
        the answer. Every attempt is closed on every path (:class:`~schedulers.serve.attempt.Attempt`)."""
        tried: set[int] = set()
        last: tuple[int, str, str] = (503, "no healthy backend", "service_unavailable")
        while len(tried) < 2:
            decided = self.decide(payload.prompt_tokens, payload.prompt_ids, tried)
            if decided is None:
                break
            replica, rows = decided
            tried.add(replica)
            attempt = Attempt(self, replica, Decision(rid, self.settings.router, replica, rows.round(6).tolist(),
                                                      payload.prompt_tokens),
                              self.view.sent(replica, payload.prompt_tokens, payload.prompt_ids), clock)
            client = self.upstream[replica]
            async with attempt.closed_on_exit():
                upstream = client.build_request("POST", self.urls[replica] + path, content=body,
                                                headers={"content-type": "application/json"})
                try:
                    resp = await attempt.send(client, upstream)
                    if payload.stream and resp.status_code == 200:
                        return RelayResponse(attempt, payload.client_wants_usage,
                                             resp.headers.get("content-type", "text/event-stream"),
                                             {REPLICA_HEADER: str(replica)})
                    content = await attempt.read()
                except (BackendUnreachable, BackendFailed, DeadlineExceeded) as exc:
                    last = failure(exc, replica)
                    if isinstance(exc, BackendUnreachable):
                        last = (503, f"backend {replica} is unreachable ({exc})", "service_unavailable")
                    if isinstance(exc, BackendUnreachable) or (isinstance(exc, BackendFailed) and not exc.answered):
                        self.set_healthy(replica, False)  # down or crashed: health checks bring it back
                    movable = not isinstance(exc, DeadlineExceeded) or exc.which == "first_byte"
                    if movable and len(tried) < 2 and clock.remaining() > 0 and self.any_healthy(tried):
                        self.retried.labels(str(replica)).inc()
                        await attempt.end("retried", 0, last[1])
                        continue
                    await attempt.end("error", 0, last[1])
                    return openai_error(last[0], last[1], last[2])
                ok = resp.status_code == 200
                await attempt.end("ok" if ok else "error", _usage(content) if ok else 0,
                                  None if ok else f"the backend answered HTTP {resp.status_code}")
                return Response(content, status_code=resp.status_code,
                                media_type=resp.headers.get("content-type", "application/json"),
                                headers={REPLICA_HEADER: str(replica)})
        status, message, kind = last
        if status == 503:
            message = f"no healthy backend answered ({len(tried)} tried; last error: {message})"
        return openai_error(status, message, kind)


async def until_client_leaves(request: Request, work: Awaitable[Response]) -> Response:
    """``work``'s response, or :class:`ClientGone` (``work`` cancelled, so its upstream request is) when the
    client closes its connection first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if not task.cancelled():
        return task.result()
    raise ClientGone


async def _disconnected(request: Request) -> None:
    """Return when the client has closed its connection (the body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(settings: GatewaySettings) -> Starlette:
    """The gateway as an ASGI app (``uvicorn`` serves it in ``rewardkit gateway``)."""
    gw = GatewayApp(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gw.startup()
        try:
            yield
        finally:
            await gw.shutdown()

    routes = [Route("/health", gw.health), Route("/metrics", gw.metrics), Route("/v1/models", gw.models),
              Route("/v1/completions", gw.completions, methods=["POST"]),
              Route("/v1/chat/completions", gw.chat, methods=["POST"])]
    middleware = [Middleware(RequireApiKey, key=settings.api_key)] if settings.api_key else []
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app.state.gateway = gw
    return app


def _usage(content: bytes) -> int:
    """``usage.completion_tokens`` of a non-streamed response (0 when absent)."""
    try:
        return int(json.loads(content).get("usage", {}).get("completion_tokens", 0))
    except (ValueError, AttributeError, TypeError, RecursionError):
        return 0
