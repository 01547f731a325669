"""One request on one replica, from its decision to its record: sent, answered or failed, closed once.

Every way an attempt can end closes it exactly once (the replica's in-flight count returns, the
decision is logged): an answer, a retry elsewhere, a backend that fails or stalls after its
headers, a deadline, the drain, a client that goes away, and a stream response the server never
started. A phantom in-flight request made load-aware routers avoid a recovered replica for good. An
attempt works against a :class:`~schedulers.serve.ledger.Ledger` (the live view, the per-replica
metrics, the open attempts, the reward and the decision log), never the gateway. Failures become
OpenAI-shaped errors: a JSON 502/503/504 for a plain request, an error event
then ``[DONE]`` in a stream (whose 200 is already sent).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator

from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from ..live.decision_log import Decision
from ..shared.engine_client import (UNBOUNDED, EngineClient, EngineConnectError, EngineError, EngineResponse,
                                  EngineTimeout)
from ..shared.sse import EventTooLarge, SSEStream
from .deadlines import DeadlineExceeded, RequestClock
from .ledger import Ledger

#: the answer a deadline gives: (HTTP status, error type)
DEADLINE_ERRORS = {"first_byte": (504, "gateway_timeout"), "total": (504, "gateway_timeout"),
                   "drain": (503, "service_unavailable")}


class BackendUnreachable(Exception):
    """No connection could be made (the backend is down): mark it unhealthy, move the request."""


class BackendFailed(Exception):
    """The backend broke the connection or the protocol; ``answered``: after its response headers."""

    def __init__(self, message: str, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


def error_body(status: int, message: str, kind: str) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def openai_error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    """An error response in OpenAI's JSON shape."""
    body = error_body(status, message, kind)
    body["error"]["param"] = param
    return JSONResponse(body, status_code=status, headers=headers)


def error_event(status: int, message: str, kind: str) -> bytes:
    """The end of a stream that failed after its 200: an error event, then ``[DONE]``."""
    return f"data: {json.dumps(error_body(status, message, kind))}\n\ndata: [DONE]\n\n".encode()


def failure(exc: BaseException, replica: int) -> tuple[int, str, str]:
    """(status, message, error type) for an attempt that failed with ``exc``."""
    if isinstance(exc, DeadlineExceeded):
        status, kind = DEADLINE_ERRORS[exc.which]
        if exc.which == "drain":
            return status, f"the gateway is shutting down and the request outlasted its drain ({exc.seconds:g} s)", kind
        return status, f"backend {replica} did not answer in time: {exc}", kind
    if isinstance(exc, EventTooLarge):
        return 502, f"backend {replica} sent a malformed stream: {exc}", "bad_gateway"
    return 502, f"backend {replica} failed mid-answer ({type(exc).__name__}: {exc})", "bad_gateway"


class Attempt:
    """One request on one replica: its bookkeeping from send to close, and its answer's relay.

    ``ledger`` is what it reads and writes (:class:`~schedulers.serve.ledger.Ledger`); ``key`` is the
    request's key in the ledger's view; ``decision`` is None when nothing reads it (no decision log, no
    reward config).
    """

    def __init__(self, ledger: Ledger, replica: int, decision: Decision | None, key: int, clock: RequestClock) -> None:
        self.ledger, self.replica, self.decision, self.key, self.clock = ledger, replica, decision, key, clock
        self.sent_at = time.monotonic()
        self.first: float | None = None
        self.response: EngineResponse | None = None
        self._upstream: Any = None  # the engine client's stream context, entered
        self._chunks: AsyncIterator[bytes] | None = None
        self.closed = False
        ledger.opened(self, replica)

    # ---- sending ---------------------------------------------------------------------------------
    async def send(self, engine: EngineClient, url: str, body: bytes, headers: dict[str, str]) -> EngineResponse:
        """Send and wait for the response head under the first-byte deadline (without one, the caller
        runs this under the whole request's: see ``Gateway.forward``)."""
        self.clock.attempt_started()
        upstream = engine.stream("POST", url, body, headers, UNBOUNDED)  # the clock bounds every step
        try:
            if self.clock.deadlines.first_byte_s is None:  # the whole request's deadline, already running
                self.response, self._chunks = await upstream.__aenter__()
            else:
                async with self.clock.bound("first_byte"):
                    self.response, self._chunks = await upstream.__aenter__()
        except (EngineConnectError, EngineTimeout) as exc:  # refused, nothing back, or no connection in time
            raise BackendUnreachable(f"{type(exc).__name__}: {exc}") from None
        except EngineError as exc:  # a broken answer before its head
            raise BackendFailed(f"{type(exc).__name__}: {exc}", answered=False) from None
        self._upstream = upstream
        return self.response

    async def read(self, bounded: bool = True) -> bytes:
        """A plain answer's body, under the whole request's deadline (``bounded=False``: the caller's)."""
        assert self._chunks is not None
        try:
            if not bounded:
                return b"".join([chunk async for chunk in self._chunks])
            async with self.clock.bound("total"):
                return b"".join([chunk async for chunk in self._chunks])
        except EngineError as exc:
            raise BackendFailed(f"{type(exc).__name__}: {exc}", answered=True) from None

    # ---- closing ---------------------------------------------------------------------------------
    async def __aenter__(self) -> "Attempt":
        return self

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        """``async with attempt:`` closes it when the body leaves by an exception (a cancelled task: the
        client went away; anything else: an error); a normal exit leaves it to whoever holds it (a
        stream's relay)."""
        if kind is None or self.closed:
            return
        if issubclass(kind, asyncio.CancelledError):
            await asyncio.shield(self.end("cancelled", 0, "the client went away"))
        else:
            await asyncio.shield(self.end("error", 0, f"{kind.__name__}: {exc}"[:300]))

    async def end(self, status: str, output_tokens: int = 0, error: str | None = None) -> None:
        """Close the upstream answer (an unfinished one closes its connection: the engine cancels the
        request) and record the outcome."""
        upstream, chunks, self._upstream, self._chunks = self._upstream, self._chunks, None, None
        try:
            if chunks is not None:
                await chunks.aclose()  # type: ignore[attr-defined]
            if upstream is not None:
                await upstream.__aexit__(None, None, None)
        finally:
            self.record(status, output_tokens, error)

    def record(self, status: str, output_tokens: int = 0, error: str | None = None) -> None:
        """Record the outcome once: view, metrics, reward, decision log (later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        ledger, d = self.ledger, self.decision
        e2e = time.monotonic() - self.sent_at
        if status == "ok" and self.first is None and output_tokens:
            ledger.tokens(self.key, output_tokens)  # a plain response: its tokens arrive at once
        ledger.closed(self, self.replica, self.key, status == "ok", None if status == "retried" else e2e)
        if d is None:
            return
        d.status, d.output_tokens, d.error = status, output_tokens, error
        if status != "retried":
            d.e2e_s = e2e
        d.ttft_s = None if self.first is None else self.first - self.sent_at
        if status == "ok":
            d.reward, d.reward_terms = ledger.reward(d.ttft_s, e2e, d.prompt_tokens, output_tokens)
        ledger.record(d)

    # ---- streaming -------------------------------------------------------------------------------
    async def relay(self, client_wants_usage: bool = True) -> AsyncIterator[bytes]:
        """Pass the engine's stream through event by event (the usage event the gateway asked for is
        kept only when the client asked too). A failure, a deadline or a malformed stream ends it with
        an error event and ``[DONE]``; a client that goes away closes the generator, and closing
        the upstream answer cancels the engine's request."""
        assert self._chunks is not None
        status, error = "cancelled", "the client went away"
        counter = SSEStream()
        done = False
        chunks = self._chunks
        try:
            while True:
                try:
                    async with self.clock.bound("total"):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                before = counter.counted
                events = counter.feed(chunk)
                if counter.counted > before:
                    if self.first is None:
                        self.first = time.monotonic()
                        self.ledger.first_token(self.replica, self.first - self.sent_at)
                    self.ledger.tokens(self.key, counter.counted - before)
                done = done or any(event.done for event in events)
                out = b"".join(event.raw for event in events if client_wants_usage or not event.usage_only)
                if out:
                    yield out
            if not done:
                raise BackendFailed("the stream ended without [DONE]", answered=True)
            status, error = "ok", None
        except (EngineError, BackendFailed, DeadlineExceeded, EventTooLarge) as exc:
            code, message, kind = failure(exc, self.replica)
            status, error = "error", message
            yield error_event(code, message, kind)
        finally:
            await self.end(status, counter.tokens, error)


class RelayResponse(StreamingResponse):
    """A streamed answer whose attempt is closed even when the server never starts sending it."""

    def __init__(self, attempt: Attempt, client_wants_usage: bool, media_type: str, headers: dict[str, str]) -> None:
        self.attempt = attempt
        super().__init__(attempt.relay(client_wants_usage), status_code=200, media_type=media_type, headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # runs the relay's cleanup if it started
            await asyncio.shield(self.attempt.end("cancelled", 0, "the client went away before the stream began"))
