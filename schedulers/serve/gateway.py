"""The gateway: an OpenAI-compatible proxy that routes each request to one of N engines with any router.

The router is any policy of :func:`schedulers.routing.policy.make_policy` (a heuristic, or a PPO
checkpoint), deciding on the :class:`~schedulers.live.view.LiveClusterView` snapshot (the
simulator's ``ReplicaSnapshot``), restricted to the healthy replicas. Upstream requests go through
the one engine client (:class:`~schedulers.shared.engine_http.EngineClient`). Streaming responses
pass through chunk by chunk; each request's TTFT, e2e, tokens and decision (observation rows,
action, router) are recorded in Prometheus metrics and, with a decision log, in JSON Lines with its
per-request reward from a rewardkit config. Faults: a backend that refuses or times out before the
first byte is marked unhealthy and the request is retried once elsewhere; health checks bring it
back; no healthy backend is a 503; a malformed body a 400, an oversized one a 413, always in
OpenAI's error shape; a client that disconnects cancels its upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
import uuid
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..bounds import MAX_TORCH_THREADS
from ..live.decision_log import Decision, DecisionLogWriter
from ..live.view import LiveClusterView, restrict
from ..routing.policy import make_policy
from ..shared.engine_client import REPLICA_HEADER
from ..shared.engine_http import EngineClient, EngineConnectError, EngineError, EngineProtocolError, EngineTimeout
from ..shared.prometheus import kv_capacity_tokens, parse_metrics
from ..shared.request_reward import request_context
from ..shared.sse import SSEStream
from ..routing.observation import ObservationConfig, build_observation, feature_names

#: bounds of one request (docs/configuration.md, "Limits").
MAX_BODY_BYTES = 1 << 20
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass
class GatewaySettings:
    """What a gateway routes over and how (``rewardkit gateway`` flags)."""

    backends: list[str]
    router: str = "least_prefill"
    checkpoint: str | None = None
    decision_log: str | None = None
    reward: str | None = None
    declared_speeds: list[float] | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    connect_timeout_s: float = 2.0
    request_timeout_s: float = 300.0
    health_interval_s: float = 1.0
    #: seconds between scrapes of every backend's /metrics (load and KV use of vLLM engines); 0: none
    scrape_interval_s: float = 0.25
    kv_capacity_blocks: float = 1024.0
    #: threads of the PPO policy's forward pass. 1: a decision is a few small matrix products, and
    #: a pool of more threads spins on cores the engines of the same machine need (it tripled the
    #: engines' TTFT p50 on the 2-core benchmark machine, docs/serving.md).
    torch_threads: int = 1
    seed: int = 0
    extra_headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("--backend: expected at least one backend URL")
        for url in self.backends:
            parsed = urlsplit(url) if isinstance(url, str) else None
            if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"--backend: expected an http(s) URL such as http://127.0.0.1:8001, got {url!r}")
        if not (isinstance(self.torch_threads, int) and 1 <= self.torch_threads <= MAX_TORCH_THREADS):
            raise ValueError(f"--torch-threads: expected an integer from 1 to {MAX_TORCH_THREADS}, got {self.torch_threads!r}")
        if self.declared_speeds is not None and len(self.declared_speeds) != len(self.backends):
            raise ValueError(f"--speeds: expected {len(self.backends)} speeds, one per backend, got {self.declared_speeds}")


def openai_error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    """An error in OpenAI's JSON shape."""
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status)


class Gateway:
    """The proxy's state: the live view, the router, the HTTP client, metrics and the decision log."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        n = len(settings.backends)
        self.urls = [u.rstrip("/") for u in settings.backends]
        self.view = LiveClusterView(n, settings.declared_speeds, kv_capacity=settings.kv_capacity_blocks)
        options = {"threads": settings.torch_threads} if settings.checkpoint else {}
        try:
            self.policy = make_policy(settings.router, settings.checkpoint, seed=settings.seed, simulated=False,
                                      **options)
        except ValueError as exc:  # CheckpointError too: a one-line message naming the flag
            raise ValueError(f"--router {settings.router}: {exc}") from None
        #: the rows every decision logs: the policy's own settings, else the defaults
        self.obs_config = self.policy.observation or ObservationConfig()
        self.composer = None
        if settings.reward:
            from rewardkit import RewardComposer

            self.composer = RewardComposer.from_yaml(settings.reward)
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
            self.log = DecisionLogWriter(settings.decision_log, router=settings.router, replicas=self.urls,
                                         observation=dataclasses.asdict(self.obs_config),
                                         features=list(feature_names(self.obs_config)), reward=settings.reward)
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

    # ---- lifecycle -------------------------------------------------------------------------------
    async def startup(self) -> None:
        self.engine = EngineClient(self.settings.request_timeout_s, self.settings.connect_timeout_s)
        self._health_task = asyncio.create_task(self._health_loop())
        if self.settings.scrape_interval_s > 0:
            self._scrape_task = asyncio.create_task(self._scrape_loop())

    async def shutdown(self) -> None:
        for task in (self._health_task, self._scrape_task):
            if task is not None:
                task.cancel()
        if self.engine is not None:
            await self.engine.aclose()
        if self.log is not None:
            self.log.close()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.gather(*(self._check(i) for i in range(len(self.urls))))
            await asyncio.sleep(self.settings.health_interval_s)

    async def _check(self, i: int) -> None:
        try:
            resp = await self.engine.request("GET", self.urls[i] + "/health",
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
                    print(f"rewardkit gateway: reading {self.urls[i]}/metrics failed ({type(result).__name__}: "
                          f"{result}); the next scrapes go on", file=sys.stderr)
            await asyncio.sleep(self.settings.scrape_interval_s)

    async def _scrape(self, i: int) -> None:
        """Fold backend ``i``'s ``/metrics`` into the view; an engine without them is just not read."""
        try:
            resp = await self.engine.request("GET", self.urls[i] + "/metrics",
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
    def decide(self, prompt_tokens: int, prompt_ids: list[int], exclude: set[int],
               with_rows: bool = True) -> tuple[int, np.ndarray | None] | None:
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


def _prompt_of(payload: dict[str, Any], chat: bool) -> tuple[int, list[int]]:
    """Prompt tokens (exact for token-id prompts, else estimated at 4 bytes a token) and the token ids."""
    if chat:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages: expected a non-empty list of chat messages")
        text = "".join(str(m.get("content", "")) if isinstance(m, dict) else "" for m in messages)
        return max(1, len(text.encode()) // 4), []
    prompt = payload.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return len(prompt), prompt
    if isinstance(prompt, str):
        return max(1, len(prompt.encode()) // 4), []
    raise ValueError("prompt: expected a string or a non-empty list of token ids")


class GatewayApp(Gateway):
    """The HTTP side of the gateway: its handlers (routes in :func:`create_app`).

    The two routed endpoints are served by raw ASGI (:meth:`handle`): the request path is the
    gateway's cost per request, and a framework's request and response objects were most of it.
    """

    async def health(self, request: Request) -> Response:
        ok = bool(self.view.healthy.any())
        return JSONResponse({"healthy_backends": int(self.view.healthy.sum()), "backends": len(self.urls)},
                            status_code=200 if ok else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def models(self, request: Request) -> Response:
        for i in np.flatnonzero(self.view.healthy):
            try:
                resp = await self.engine.request("GET", self.urls[i] + "/v1/models")
                return Response(resp.body, status_code=resp.status, media_type="application/json")
            except EngineError:
                self.set_healthy(int(i), False)
        return openai_error(503, "no healthy backend", "service_unavailable")

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, chat: bool) -> None:
        """``POST /v1/completions`` and ``/v1/chat/completions``: read, route, forward, answer."""
        headers = dict(scope["headers"])
        answer = await self.proxy(headers, receive, chat)
        if isinstance(answer, tuple):  # a whole answer: sent as it is
            status, content_type, replica, content = answer
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", content_type), (b"content-length", str(len(content)).encode()),
                                    self._replica_header[replica]]})
            await send({"type": "http.response.body", "body": content})
        else:
            await answer(scope, receive, send)

    async def read_payload(self, headers: dict[bytes, bytes], receive: Any,
                           chat: bool) -> tuple[bytes, dict[str, Any], int, list[int]] | Response:
        """The body, its JSON, its prompt tokens and ids; or the 400/413 response."""
        limit = self.settings.max_body_bytes
        declared = headers.get(b"content-length", b"").decode("latin-1")
        if declared.isdigit() and int(declared) > limit:
            return openai_error(413, f"expected a request body of at most {limit} bytes, got {declared}")
        parts, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return openai_error(400, "the client went away before its request body ended")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return openai_error(413, f"expected a request body of at most {limit} bytes, got more")
            parts.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(parts)
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("expected a JSON object")
            prompt_tokens, prompt_ids = _prompt_of(payload, chat)
        except (ValueError, UnicodeDecodeError) as exc:
            return openai_error(400, f"malformed request body: {exc}")
        return body, payload, prompt_tokens, prompt_ids

    async def proxy(self, headers: dict[bytes, bytes], receive: Any,
                    chat: bool) -> tuple[int, bytes, int, bytes] | Response:
        """Route, forward, retry once elsewhere if the backend fails before answering; the answer:
        ``(status, content type, replica, body)`` when whole, else a response to run (a stream, an error)."""
        read = await self.read_payload(headers, receive, chat)
        if isinstance(read, Response):
            return read
        body, payload, prompt_tokens, prompt_ids = read
        path = "/v1/chat/completions" if chat else "/v1/completions"
        stream = bool(payload.get("stream"))
        options = payload.get("stream_options")
        client_wants_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        if stream and not client_wants_usage:  # the engine's own token count, for the record
            body = json.dumps({**payload, "stream_options": {**(options or {}), "include_usage": True}}).encode()
        keep_record = self.log is not None or self.composer is not None
        request_id = (headers.get(b"x-request-id", b"").decode("latin-1") or uuid.uuid4().hex) if keep_record else ""
        tried: set[int] = set()
        last_error = "none healthy"
        while len(tried) < 2:
            decided = self.decide(prompt_tokens, prompt_ids, tried, with_rows=self.log is not None)
            if decided is None:
                break
            replica, rows = decided
            decision = None
            if keep_record:
                decision = Decision(request_id, self.settings.router, replica,
                                    [] if rows is None else rows.round(6).tolist(), prompt_tokens)
            attempt = Attempt(self, replica, decision, self.view.sent(replica, prompt_tokens, prompt_ids))
            upstream = self.engine.stream("POST", self.urls[replica] + path, body, JSON_HEADERS)
            try:
                resp, chunks = await upstream.__aenter__()
            except (EngineConnectError, EngineTimeout, EngineProtocolError) as exc:
                self.set_healthy(replica, False)
                self.retried.labels(str(replica)).inc()
                attempt.close("retried", 0)
                tried.add(replica)
                last_error = type(exc).__name__
                continue
            if stream and resp.status == 200:
                return StreamingResponse(attempt.relay(upstream, chunks, client_wants_usage), status_code=200,
                                         media_type=resp.headers.get("content-type", "text/event-stream"),
                                         headers={REPLICA_HEADER: str(replica)})
            try:
                content = b"".join([chunk async for chunk in chunks])
            except EngineError:
                await upstream.__aexit__(None, None, None)
                attempt.close("error", 0)
                return openai_error(502, f"backend {replica} broke off its answer", "bad_gateway")
            await upstream.__aexit__(None, None, None)
            ok = resp.status == 200
            attempt.close("ok" if ok else "error", _usage(content) if ok else 0)
            return resp.status, resp.headers.get("content-type", "application/json").encode(), replica, content
        return openai_error(503, f"no healthy backend answered ({len(tried)} tried; last error: {last_error})",
                            "service_unavailable")


JSON_HEADERS = {"content-type": "application/json"}


class Attempt:
    """One request on one replica: its bookkeeping from send to close, and its stream relay."""

    def __init__(self, gw: Gateway, replica: int, decision: Decision | None, key: int) -> None:
        self.gw, self.replica, self.decision, self.key = gw, replica, decision, key
        self.sent_at = time.monotonic()
        self.first: float | None = None
        gw._routed[replica].inc()
        gw._in_flight[replica].inc()

    def close(self, status: str, output_tokens: int) -> None:
        """Record the outcome: view, metrics, reward, decision log."""
        gw, d = self.gw, self.decision
        e2e = time.monotonic() - self.sent_at
        if status == "ok" and self.first is None and output_tokens:
            gw.view.token(self.key, output_tokens)  # a plain response: its tokens arrive at once
        gw.view.finished(self.key, completed=status == "ok")
        gw._in_flight[self.replica].dec()
        if status != "retried":
            gw._e2e[self.replica].observe(e2e)
        if d is None:
            return
        d.status, d.output_tokens = status, output_tokens
        if status != "retried":
            d.e2e_s = e2e
        d.ttft_s = None if self.first is None else self.first - self.sent_at
        if status == "ok":
            d.reward, d.reward_terms = gw.request_reward(d.ttft_s, e2e, d.prompt_tokens, output_tokens)
        gw.record(d)

    async def relay(self, upstream: Any, chunks: AsyncIterator[bytes], client_wants_usage: bool = True) -> AsyncIterator[bytes]:
        """Pass the engine's stream through event by event (the usage event the gateway asked for is
        kept only when the client asked too); when the client goes away the generator is closed,
        and the finally clause closes the upstream stream (cancelling the engine's request)."""
        status = "cancelled"
        counter = SSEStream()
        try:
            async for chunk in chunks:
                before = counter.counted
                events = counter.feed(chunk)
                if counter.counted > before:
                    if self.first is None:
                        self.first = time.monotonic()
                        self.gw._ttft[self.replica].observe(self.first - self.sent_at)
                    self.gw.view.token(self.key, counter.counted - before)
                out = b"".join(event.raw for event in events if client_wants_usage or not event.usage_only)
                if out:
                    yield out
            if counter.rest().strip():
                yield counter.rest()
            status = "ok"
        except EngineError:
            status = "error"
        finally:
            await upstream.__aexit__(None, None, None)
            self.close(status, counter.tokens)


class GatewayASGI:
    """The gateway's ASGI entry: the routed endpoints straight to :meth:`GatewayApp.handle`, the rest
    (health, metrics, models, lifespan) through Starlette."""

    ROUTED = {"/v1/completions": False, "/v1/chat/completions": True}

    def __init__(self, gateway: GatewayApp, app: Starlette) -> None:
        self.gateway, self.app, self.state = gateway, app, app.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
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
    return GatewayASGI(gw, app)


def _usage(content: bytes) -> int:
    """``usage.completion_tokens`` of a non-streamed response (0 when absent)."""
    try:
        return int(json.loads(content).get("usage", {}).get("completion_tokens", 0))
    except (ValueError, AttributeError, TypeError):
        return 0


def serve(app: GatewayASGI, host: str = "127.0.0.1", port: int = 8000, drain_s: float = 30.0) -> None:
    """Run the gateway ``app`` (:func:`create_app`) until SIGTERM/SIGINT; in-flight requests get ``drain_s`` s to finish."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=drain_s, access_log=False)
