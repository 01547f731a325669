"""The gateway: an OpenAI-compatible proxy that routes each request to one of N engines with any router.

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
Upstream calls go through the one :class:`~schedulers.shared.engine_client.EngineClient`; the routed
endpoints are served by raw ASGI (:class:`GatewayASGI`), the rest by Starlette.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from typing import Any, AsyncIterator, Awaitable, Callable

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..live.decision_log import Decision, DecisionLogWriter
from ..live.view import LiveClusterView, restrict
from ..routing.observation import build_observation, feature_names
from ..routing.policy import make_policy
from ..shared.engine_client import EngineClient, EngineError
from ..shared.engine_requests import REPLICA_HEADER
from ..shared.prometheus import kv_capacity_tokens, parse_metrics
from ..shared.request_reward import reads_request_keys_only, request_context
from ..shared.observation_config import ObservationConfig
from .access import allowed, redact_url, refuse, request_id, split_credentials
from .attempt import Attempt, BackendFailed, BackendUnreachable, RelayResponse, failure, openai_error
from .deadlines import DeadlineExceeded, Deadlines, Drain, RequestClock
from .request_body import BadRequest, Payload, parse_payload, read_body, upstream_body
from .settings import MAX_BODY_BYTES, GatewaySettings

__all__ = ["Gateway", "GatewayApp", "GatewayASGI", "GatewaySettings", "MAX_BODY_BYTES", "create_app", "openai_error"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


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
        self._post_headers = [{"content-type": "application/json", **h} for h in self.backend_headers]
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
                                             replicas=self.shown_urls,
                                             observation=dataclasses.asdict(self.obs_config),
                                             features=list(feature_names(self.obs_config)), reward=settings.reward)
            except OSError as exc:
                raise ValueError(f"--decision-log {settings.decision_log}: cannot write it "
                                 f"({exc.strerror or type(exc).__name__})") from None
        #: the one engine client (health checks, scrapes, /v1/models and every routed request)
        self.engine: EngineClient | None = None
        # each replica's labelled metrics, looked up once (a label lookup per request is measurable)
        labels = [str(i) for i in range(n)]
        self._routed = [self.routed.labels(x) for x in labels]
        self._in_flight = [self.in_flight.labels(x) for x in labels]
        self._e2e = [self.e2e.labels(x) for x in labels]
        self._ttft = [self.ttft.labels(x) for x in labels]
        self._replica_header = [(REPLICA_HEADER.encode(), x.encode()) for x in labels]
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
        for attempt in list(self.open_attempts):  # none after a drain; a forced stop leaves no phantom
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
        keep = self.view.healthy
        if exclude:
            keep = keep.copy()
            keep[list(exclude)] = False
        if not keep.any():
            return None
        snap = self.view.snapshot(self.view.prefix_match(prompt_ids) if prompt_ids else None)
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


class GatewayApp(Gateway):
    """The HTTP side of the gateway: its handlers (routes in :func:`create_app`).

    The two routed endpoints are served by raw ASGI (:meth:`handle`): the request path is the
    gateway's cost per request, and a framework's request and response objects were most of it.
    """

    async def health(self, request: Request) -> Response:
        ok = bool(self.view.healthy.any()) and not self.drain.begun
        return JSONResponse({"healthy_backends": int(self.view.healthy.sum()), "backends": len(self.urls)},
                            status_code=200 if ok else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def models(self, request: Request) -> Response:
        for i in np.flatnonzero(self.view.healthy):
            try:
                resp = await self.engine.request("GET", self.urls[i] + "/v1/models", headers=self.backend_headers[i])
                return Response(resp.body, status_code=resp.status, media_type="application/json")
            except EngineError:
                self.set_healthy(int(i), False)
        return openai_error(503, "no healthy backend", "service_unavailable")

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, chat: bool) -> None:
        """``POST /v1/completions`` and ``/v1/chat/completions``: read, route, forward, answer."""
        headers = dict(scope["headers"])
        clock = RequestClock(self.deadlines, self.drain)
        try:
            answer = await self.proxy(headers, receive, chat, clock)
            if isinstance(answer, tuple):  # a whole answer: sent as it is
                status, content_type, replica, content = answer
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", content_type),
                                        (b"content-length", str(len(content)).encode()), self._replica_header[replica]]})
                await send({"type": "http.response.body", "body": content})
            else:
                await answer(scope, receive, send)
        finally:
            clock.close()

    async def proxy(self, headers: dict[bytes, bytes], receive: Any, chat: bool,
                    clock: RequestClock) -> tuple[int, bytes, int, bytes] | Response:
        """Read and check the body, then forward it while the client stays (a client that leaves cancels
        it); the answer: ``(status, content type, replica, body)`` when whole, else a response to run."""
        try:
            async with clock.bound("total"):
                body = await read_body(receive, headers, self.settings.max_body_bytes)
            payload = parse_payload(body, chat)
            body = upstream_body(body, payload)
        except BadRequest as exc:
            return openai_error(exc.status, str(exc))
        except DeadlineExceeded as exc:
            return openai_error(408, f"the request body did not arrive in time ({exc})")
        if self.drain.begun:
            return openai_error(503, "the gateway is shutting down", "service_unavailable")
        keep_record = self.log is not None or self.composer is not None
        rid = request_id(headers.get(b"x-request-id", b"").decode("latin-1") or None) if keep_record else ""
        path = "/v1/chat/completions" if chat else "/v1/completions"
        work = self.forward(path, body, payload, rid, clock, keep_record)
        if payload.stream:  # once its answer starts, the stream response notices a client that leaves
            return await work
        try:
            return await until_client_leaves(receive, work)
        except ClientGone:
            return Response(status_code=499)

    async def forward(self, path: str, body: bytes, payload: Payload, rid: str, clock: RequestClock,
                      keep_record: bool) -> tuple[int, bytes, int, bytes] | Response:
        """Route and send; move the request once when its replica is down or its first byte late; relay
        the answer. Every attempt is closed on every path (:class:`~schedulers.serve.attempt.Attempt`)."""
        tried: set[int] = set()
        last: tuple[int, str, str] = (503, "no healthy backend", "service_unavailable")
        while len(tried) < 2:
            decided = self.decide(payload.prompt_tokens, payload.prompt_ids, tried, with_rows=self.log is not None)
            if decided is None:
                break
            replica, rows = decided
            tried.add(replica)
            decision = None
            if keep_record:
                decision = Decision(rid, self.settings.router, replica,
                                    [] if rows is None else rows.round(6).tolist(), payload.prompt_tokens)
            attempt = Attempt(self, replica, decision,
                              self.view.sent(replica, payload.prompt_tokens, payload.prompt_ids), clock)
            async with attempt:
                # without a first-byte deadline, one scope of the whole request's covers sending and the answer
                one_scope = clock.deadlines.first_byte_s is None
                try:
                    async with clock.bound("total") if one_scope else contextlib.nullcontext():
                        resp = await attempt.send(self.engine, self.urls[replica] + path, body,
                                                  self._post_headers[replica])
                        if payload.stream and resp.status == 200:
                            return RelayResponse(attempt, payload.client_wants_usage,
                                                 resp.headers.get("content-type", "text/event-stream"),
                                                 {REPLICA_HEADER: str(replica)})
                        content = await attempt.read(bounded=not one_scope)
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
                ok = resp.status == 200
                await attempt.end("ok" if ok else "error", _usage(content) if ok else 0,
                                  None if ok else f"the backend answered HTTP {resp.status}")
                return resp.status, resp.headers.get("content-type", "application/json").encode(), replica, content
        status, message, kind = last
        if status == 503:
            message = f"no healthy backend answered ({len(tried)} tried; last error: {message})"
        return openai_error(status, message, kind)


#: seconds a plain request runs before its disconnect watch starts: most answers are back sooner and
#: cost no watcher task; a client that leaves is noticed at most this late
WATCH_AFTER_S = 0.02


class _DisconnectWatch:
    """Cancels ``task`` when the client closes its connection; the watcher task starts only after
    :data:`WATCH_AFTER_S` (a timer until then)."""

    __slots__ = ("task", "receive", "watcher", "gone", "over")

    def __init__(self, task: asyncio.Task, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self.task, self.receive = task, receive
        self.watcher: asyncio.Task | None = None
        self.gone = self.over = False

    def start(self) -> None:
        if not self.over:
            self.watcher = asyncio.ensure_future(_disconnected(self.receive))
            self.watcher.add_done_callback(self.client_left)

    def client_left(self, watcher: asyncio.Task) -> None:
        if not watcher.cancelled() and not self.over:
            self.gone = True
            self.task.cancel()


async def until_client_leaves(receive: Callable[[], Awaitable[dict[str, Any]]], work: Awaitable[Any]) -> Any:
    """``work``'s result, run in this task, or :class:`ClientGone` when the client closes its connection
    first (``work`` is cancelled, and with it the upstream request)."""
    task = asyncio.current_task()
    watch = _DisconnectWatch(task, receive)
    timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, watch.start)
    try:
        return await work
    except asyncio.CancelledError:
        if watch.gone and task.uncancel() == 0:
            raise ClientGone from None
        raise
    finally:
        watch.over = True
        timer.cancel()
        if watch.watcher is not None:
            watch.watcher.cancel()


async def _disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Return when the client has closed its connection (the body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class GatewayASGI:
    """The gateway's ASGI entry: the API key checked (when set), the routed endpoints straight to
    :meth:`GatewayApp.handle`, the rest (health, metrics, models, lifespan) through Starlette."""

    ROUTED = {"/v1/completions": False, "/v1/chat/completions": True}

    def __init__(self, gateway: GatewayApp, app: Starlette, api_key: str | None = None) -> None:
        self.gateway, self.app, self.state = gateway, app, app.state
        self._key = api_key.encode() if api_key else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self._key is not None and not allowed(scope, self._key):
            await refuse(scope, receive, send)
            return
        chat = self.ROUTED.get(scope.get("path", "")) if scope["type"] == "http" else None
        if chat is not None and scope["method"] == "POST":
            await self.gateway.handle(scope, receive, send, chat)
        else:
            await self.app(scope, receive, send)


def create_app(settings: GatewaySettings) -> GatewayASGI:
    """The gateway as an ASGI app (``uvicorn`` serves it in ``rewardkit gateway``)."""
    gw = GatewayApp(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gw.startup()
        try:
            yield
        finally:
            await gw.shutdown()

    routes = [Route("/health", gw.health), Route("/metrics", gw.metrics), Route("/v1/models", gw.models)]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gw
    return GatewayASGI(gw, app, settings.api_key)


def _usage(content: bytes) -> int:
    """``usage.completion_tokens`` of a non-streamed response (0 when absent)."""
    try:
        return int(json.loads(content).get("usage", {}).get("completion_tokens", 0))
    except (ValueError, AttributeError, TypeError, RecursionError):
        return 0
