"""The gateway: an OpenAI-compatible proxy that routes each request to one of N engines with any router.

Every router of :func:`schedulers.routing.heuristics.choose` and a PPO checkpoint decide on the
:class:`~schedulers.live.view.LiveClusterView` snapshot (the simulator's ``ReplicaSnapshot``),
restricted to the healthy replicas. Streaming responses pass through chunk by chunk; each request's
TTFT, e2e, tokens and decision (observation rows, action, router) are recorded in Prometheus
metrics and, with a decision log, in JSON Lines with its per-request reward from a rewardkit
config. Faults: a backend that refuses or times out before the first byte is marked unhealthy and
the request is retried once elsewhere; health checks bring it back; no healthy backend is a 503;
a malformed body a 400, an oversized one a 413, always in OpenAI's error shape; a client that
disconnects cancels its upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import httpx
import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..limits import MAX_TORCH_THREADS
from ..live.decision_log import Decision, DecisionLogWriter
from ..live.view import LiveClusterView, restrict
from ..routing.policy import make_policy
from ..shared.engine_client import REPLICA_HEADER
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
            parsed = httpx.URL(url) if isinstance(url, str) else None
            if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
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
        self.client: httpx.AsyncClient | None = None
        self.upstream: list[httpx.AsyncClient] = []
        self._health_task: asyncio.Task | None = None
        self._scrape_task: asyncio.Task | None = None

    # ---- lifecycle -------------------------------------------------------------------------------
    async def startup(self) -> None:
        timeout = httpx.Timeout(self.settings.request_timeout_s, connect=self.settings.connect_timeout_s)
        self.client = httpx.AsyncClient(timeout=timeout)  # health checks and /v1/models
        # one connection pool per backend: httpx's pool scans its connections for every queued request,
        # so one shared pool costs O(connections x requests in flight) per request
        self.upstream = [httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None,
                                                                                max_keepalive_connections=64))
                         for _ in self.urls]
        self._health_task = asyncio.create_task(self._health_loop())
        if self.settings.scrape_interval_s > 0:
            self._scrape_task = asyncio.create_task(self._scrape_loop())

    async def shutdown(self) -> None:
        for task in (self._health_task, self._scrape_task):
            if task is not None:
                task.cancel()
        if self.client is not None:
            await self.client.aclose()
            for client in self.upstream:
                await client.aclose()
        if self.log is not None:
            self.log.close()

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
                    print(f"rewardkit gateway: reading {self.urls[i]}/metrics failed ({type(result).__name__}: "
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
    def decide(self, prompt_tokens: int, prompt_ids: list[int], exclude: set[int]) -> tuple[int, np.ndarray] | None:
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
    """The HTTP side of the gateway: its handlers (routes in :func:`create_app`)."""

    async def health(self, request: Request) -> Response:
        ok = bool(self.view.healthy.any())
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

    async def read_payload(self, request: Request, chat: bool) -> tuple[bytes, dict[str, Any], int, list[int]] | Response:
        """The body, its JSON, its prompt tokens and ids; or the 400/413 response."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return openai_error(413, f"expected a request body of at most {limit} bytes, got {declared}")
        body = await request.body()
        if len(body) > limit:
            return openai_error(413, f"expected a request body of at most {limit} bytes, got {len(body)}")
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("expected a JSON object")
            prompt_tokens, prompt_ids = _prompt_of(payload, chat)
        except (ValueError, UnicodeDecodeError) as exc:
            return openai_error(400, f"malformed request body: {exc}")
        return body, payload, prompt_tokens, prompt_ids

    async def proxy(self, request: Request, chat: bool) -> Response:
        """Route, forward, retry once elsewhere if the backend fails before answering, relay the answer."""
        read = await self.read_payload(request, chat)
        if isinstance(read, Response):
            return read
        body, payload, prompt_tokens, prompt_ids = read
        path = "/v1/chat/completions" if chat else "/v1/completions"
        options = payload.get("stream_options")
        client_wants_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        if payload.get("stream") and not client_wants_usage:  # the engine's own token count, for the record
            body = json.dumps({**payload, "stream_options": {**(options or {}), "include_usage": True}}).encode()
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        tried: set[int] = set()
        last_error = "none healthy"
        while len(tried) < 2:
            decided = self.decide(prompt_tokens, prompt_ids, tried)
            if decided is None:
                break
            replica, rows = decided
            attempt = Attempt(self, replica, Decision(request_id, self.settings.router, replica,
                                                      rows.round(6).tolist(), prompt_tokens),
                              self.view.sent(replica, prompt_tokens, prompt_ids))
            client = self.upstream[replica]
            upstream = client.build_request("POST", self.urls[replica] + path, content=body,
                                                 headers={"content-type": "application/json"})
            try:
                resp = await client.send(upstream, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError,
                    httpx.ReadError) as exc:
                self.set_healthy(replica, False)
                self.retried.labels(str(replica)).inc()
                attempt.close("retried", 0)
                tried.add(replica)
                last_error = type(exc).__name__
                continue
            if payload.get("stream") and resp.status_code == 200:
                return StreamingResponse(attempt.relay(resp, client_wants_usage), status_code=200,
                                         media_type=resp.headers.get("content-type", "text/event-stream"),
                                         headers={REPLICA_HEADER: str(replica)})
            try:
                content = await resp.aread()
            finally:
                await resp.aclose()
            ok = resp.status_code == 200
            attempt.close("ok" if ok else "error", _usage(content) if ok else 0)
            return Response(content, status_code=resp.status_code,
                            media_type=resp.headers.get("content-type", "application/json"),
                            headers={REPLICA_HEADER: str(replica)})
        return openai_error(503, f"no healthy backend answered ({len(tried)} tried; last error: {last_error})",
                            "service_unavailable")


class Attempt:
    """One request on one replica: its bookkeeping from send to close, and its stream relay."""

    def __init__(self, gw: Gateway, replica: int, decision: Decision, key: int) -> None:
        self.gw, self.replica, self.decision, self.key = gw, replica, decision, key
        self.label = str(replica)
        self.sent_at = time.monotonic()
        self.first: float | None = None
        gw.routed.labels(self.label).inc()
        gw.in_flight.labels(self.label).inc()

    def close(self, status: str, output_tokens: int) -> None:
        """Record the outcome: view, metrics, reward, decision log."""
        gw, d = self.gw, self.decision
        e2e = time.monotonic() - self.sent_at
        if status == "ok" and self.first is None and output_tokens:
            gw.view.token(self.key, output_tokens)  # a plain response: its tokens arrive at once
        gw.view.finished(self.key, completed=status == "ok")
        gw.in_flight.labels(self.label).dec()
        d.status, d.output_tokens = status, output_tokens
        if status != "retried":
            gw.e2e.labels(self.label).observe(e2e)
            d.e2e_s = e2e
        d.ttft_s = None if self.first is None else self.first - self.sent_at
        if status == "ok":
            d.reward, d.reward_terms = gw.request_reward(d.ttft_s, e2e, d.prompt_tokens, output_tokens)
        gw.record(d)

    async def relay(self, resp: httpx.Response, client_wants_usage: bool = True) -> AsyncIterator[bytes]:
        """Pass the engine's stream through event by event (the usage event the gateway asked for is
        kept only when the client asked too); when the client goes away the generator is closed,
        and the finally clause closes the upstream stream (cancelling the engine's request)."""
        status = "cancelled"
        counter = SSEStream()
        try:
            async for chunk in resp.aiter_raw():
                before = counter.counted
                events = counter.feed(chunk)
                if counter.counted > before:
                    if self.first is None:
                        self.first = time.monotonic()
                        self.gw.ttft.labels(self.label).observe(self.first - self.sent_at)
                    self.gw.view.token(self.key, counter.counted - before)
                out = b"".join(event.raw for event in events if client_wants_usage or not event.usage_only)
                if out:
                    yield out
            if counter.rest().strip():
                yield counter.rest()
            status = "ok"
        except httpx.HTTPError:
            status = "error"
        finally:
            await resp.aclose()
            self.close(status, counter.tokens)


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
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gw
    return app


def _usage(content: bytes) -> int:
    """``usage.completion_tokens`` of a non-streamed response (0 when absent)."""
    try:
        return int(json.loads(content).get("usage", {}).get("completion_tokens", 0))
    except (ValueError, AttributeError, TypeError):
        return 0


def serve(app: Starlette, host: str = "127.0.0.1", port: int = 8000, drain_s: float = 30.0) -> None:
    """Run the gateway ``app`` (:func:`create_app`) until SIGTERM/SIGINT; in-flight requests get ``drain_s`` s to finish."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=drain_s, access_log=False)
