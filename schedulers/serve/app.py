"""The gateway's HTTP side: its handlers, which hold the :class:`~schedulers.serve.gateway.Gateway` by composition.

:class:`GatewayApp` answers ``/health``, ``/metrics``, ``/v1/models`` and the two routed endpoints
(read the body, route it, send it, move it once when its replica is down or its first byte late,
relay the answer); the routing state it asks (the live view, the policy, the engine client, the
metrics and the log) is the gateway's. The routed endpoints are served by raw ASGI
(:class:`GatewayASGI`): the request path is the gateway's cost per request, and a framework's request
and response objects were most of it; the rest by Starlette. Each request's attempts are
:class:`~schedulers.serve.attempt.Attempt` objects working against the gateway's ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator, Awaitable, Callable

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..live.decision_log import Decision
from ..shared.block_hashes import stable_block_hashes
from ..shared.engine_client import EngineError
from ..shared.engine_requests import REPLICA_HEADER
from .access import allowed, refuse, request_id
from .attempt import Attempt, BackendFailed, BackendUnreachable, RelayResponse, failure, openai_error
from .deadlines import DeadlineExceeded, RequestClock
from .gateway import Gateway
from .request_body import BadRequest, Payload, parse_payload, read_body, upstream_body
from .settings import GatewaySettings

__all__ = ["GatewayApp", "GatewayASGI", "create_app", "until_client_leaves"]


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class GatewayApp:
    """The gateway's HTTP handlers (routes in :func:`create_app`) over ``gateway``, the routing state."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        n = len(gateway.urls)
        self._replica_header = [(REPLICA_HEADER.encode(), str(i).encode()) for i in range(n)]

    async def health(self, request: Request) -> Response:
        gw = self.gateway
        ok = bool(gw.view.healthy.any()) and not gw.drain.begun
        return JSONResponse({"healthy_backends": int(gw.view.healthy.sum()), "backends": len(gw.urls)},
                            status_code=200 if ok else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.gateway.registry), media_type=CONTENT_TYPE_LATEST)

    async def models(self, request: Request) -> Response:
        gw = self.gateway
        for i in np.flatnonzero(gw.view.healthy):
            try:
                resp = await gw.engine.request("GET", gw.urls[i] + "/v1/models", headers=gw.backend_headers[i])
                return Response(resp.body, status_code=resp.status, media_type="application/json")
            except EngineError:
                gw.set_healthy(int(i), False)
        return openai_error(503, "no healthy backend", "service_unavailable")

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, chat: bool) -> None:
        """``POST /v1/completions`` and ``/v1/chat/completions``: read, route, forward, answer."""
        headers = dict(scope["headers"])
        clock = RequestClock(self.gateway.deadlines, self.gateway.drain)
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
        gw = self.gateway
        try:
            async with clock.bound("total"):
                body = await read_body(receive, headers, gw.settings.max_body_bytes)
            payload = parse_payload(body, chat)
            body = upstream_body(body, payload)
        except BadRequest as exc:
            return openai_error(exc.status, str(exc))
        except DeadlineExceeded as exc:
            return openai_error(408, f"the request body did not arrive in time ({exc})")
        if gw.drain.begun:
            return openai_error(503, "the gateway is shutting down", "service_unavailable")
        keep_record = gw.log is not None or gw.composer is not None
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
        gw = self.gateway
        ledger = gw.ledger
        tried: set[int] = set()
        last: tuple[int, str, str] = (503, "no healthy backend", "service_unavailable")
        # the prompt as block names that mean the same in any process (never its text), for replays
        blocks = stable_block_hashes(payload.prompt_ids, ledger.view.block_size) if gw.log is not None else None
        while len(tried) < 2:
            decided = gw.decide(payload.prompt_tokens, payload.prompt_ids, tried, with_rows=gw.log is not None)
            if decided is None:
                break
            replica, rows = decided
            tried.add(replica)
            decision = None
            if keep_record:
                decision = Decision(rid, gw.settings.router, replica,
                                    [] if rows is None else rows.round(6).tolist(), payload.prompt_tokens,
                                    prompt_blocks=blocks)
            attempt = Attempt(ledger, replica, decision,
                              ledger.view.sent(replica, payload.prompt_tokens, payload.prompt_ids), clock)
            async with attempt:
                # without a first-byte deadline, one scope of the whole request's covers sending and the answer
                one_scope = clock.deadlines.first_byte_s is None
                try:
                    async with clock.bound("total") if one_scope else contextlib.nullcontext():
                        resp = await attempt.send(gw.engine, gw.urls[replica] + path, body, gw.post_headers[replica])
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
                        gw.set_healthy(replica, False)  # down or crashed: health checks bring it back
                    movable = not isinstance(exc, DeadlineExceeded) or exc.which == "first_byte"
                    if movable and len(tried) < 2 and clock.remaining() > 0 and gw.any_healthy(tried):
                        gw.retried.labels(str(replica)).inc()
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

    def __init__(self, handlers: GatewayApp, app: Starlette, api_key: str | None = None) -> None:
        self.handlers, self.app, self.state = handlers, app, app.state
        self._key = api_key.encode() if api_key else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self._key is not None and not allowed(scope, self._key):
            await refuse(scope, receive, send)
            return
        chat = self.ROUTED.get(scope.get("path", "")) if scope["type"] == "http" else None
        if chat is not None and scope["method"] == "POST":
            await self.handlers.handle(scope, receive, send, chat)
        else:
            await self.app(scope, receive, send)


def create_app(settings: GatewaySettings) -> GatewayASGI:
    """The gateway as an ASGI app (``uvicorn`` serves it in ``rewardkit gateway``)."""
    gw = Gateway(settings)
    handlers = GatewayApp(gw)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gw.startup()
        try:
            yield
        finally:
            await gw.shutdown()

    routes = [Route("/health", handlers.health), Route("/metrics", handlers.metrics),
              Route("/v1/models", handlers.models)]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gw
    return GatewayASGI(handlers, app, settings.api_key)


def _usage(content: bytes) -> int:
    """``usage.completion_tokens`` of a non-streamed response (0 when absent)."""
    try:
        return int(json.loads(content).get("usage", {}).get("completion_tokens", 0))
    except (ValueError, AttributeError, TypeError, RecursionError):
        return 0
