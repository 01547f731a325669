"""``RewardServer``: a reward config behind HTTP, answering OpenRLHF's remote reward protocol.

POST ``/get_reward`` (and ``/``) scores a batch (:mod:`.protocol`); concurrent requests share
composer calls (:mod:`rewardkit.integrations.coalescer`); remote terms run concurrently on the server's event loop
(``composer.acall``). GET ``/health`` answers without a key (for load balancers), GET ``/metrics``
gives Prometheus text. Bounds: a body larger than ``max_body_bytes`` is refused with 413 before it
is held whole, and one not all sent within ``read_timeout_s`` with 408; more than ``max_pending``
requests being scored at once get 503 (with ``Retry-After``; a request takes its slot once its
body is read, so stalled clients hold none). With an API key every route but ``/health`` needs
``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (401), compared as UTF-8 bytes in constant
time. The state (:mod:`.state`) is restored when the server is built and written by
:meth:`RewardServer.aclose` when it stops, whichever way it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..composer import RewardComposer
from ..errors import RemoteScoreError, RewardKitError
from ..integrations.coalescer import INPUT_ERRORS, Coalescer
from ..integrations.text_scoring import TextScorer
from . import state
from .protocol import (DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_PENDING, DEFAULT_READ_TIMEOUT_S, LOG_PREFIX,
                       RequestError, RewardRequest, answer, api_key_bytes, error_body, parse_request)

try:
    import orjson
except ImportError:  # the stdlib's json is 70x slower on float lists, still correct
    orjson = None

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: seconds the last save may wait for the composer at shutdown (after the call in flight was cancelled)
FINAL_SAVE_TIMEOUT_S = 60.0
LOG = "rewardkit serve-reward:"
T = TypeVar("T")


def _seconds(value: Any) -> bool:
    """Whether ``value`` is a positive, finite number of seconds."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _dumps(data: dict[str, Any]) -> bytes:
    """JSON of an answer: orjson when installed (1,280 floats in 0.02 ms against json's 1.4 ms), NaN refused."""
    if orjson is not None:
        return orjson.dumps(data)  # orjson writes NaN as null; the composer's outputs are finite
    return json.dumps(data, allow_nan=False).encode()


class _Metrics:
    """The server's Prometheus series, in a registry of its own."""

    def __init__(self, term_names: Sequence[str]) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("rewardkit_reward_requests", "reward requests answered, by HTTP status", ["status"],
                                registry=r)
        self.completions = Counter("rewardkit_reward_completions", "completions scored", registry=r)
        self.mismatched = Counter("rewardkit_reward_prompt_mismatches",
                                  "queries that did not start with their prompt (scored whole)", registry=r)
        self.batches = Counter("rewardkit_reward_composer_calls", "composer calls (each scores one or more requests)",
                               registry=r)
        self.batch_size = Histogram("rewardkit_reward_batch_completions", "completions per composer call",
                                    buckets=BATCH_BUCKETS, registry=r)
        self.batch_requests = Histogram("rewardkit_reward_batch_requests", "requests merged into one composer call",
                                        buckets=BATCH_BUCKETS, registry=r)
        self.compute_s = Histogram("rewardkit_reward_compute_seconds", "seconds per composer call",
                                   buckets=SECONDS_BUCKETS, registry=r)
        self.request_s = Histogram("rewardkit_reward_request_seconds", "seconds from body read to answer",
                                   buckets=SECONDS_BUCKETS, registry=r)
        self.in_flight = Gauge("rewardkit_reward_in_flight", "reward requests admitted and not yet answered", registry=r)
        self.step = Gauge("rewardkit_reward_step", "the composer's step after the last call", registry=r)
        self.term_mean = Gauge("rewardkit_reward_term_mean", "mean contribution of each term in the last answered request",
                               ["term"], registry=r)
        self.saves = Counter("rewardkit_reward_state_saves", "state file writes that succeeded", registry=r)
        self.save_failures = Counter("rewardkit_reward_state_save_failures",
                                     "state file writes that failed (periodic saves are retried)", registry=r)
        for name in term_names:
            self.term_mean.labels(term=name)


class RewardServer:
    """One composer serving rewards over HTTP; :meth:`app` is the ASGI application."""

    def __init__(self, composer: RewardComposer, *, state_path: str | Path | None = None, api_key: str | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_pending: int = DEFAULT_MAX_PENDING,
                 max_batch: int = DEFAULT_MAX_BATCH, strip_suffixes: Sequence[str] = (),
                 save_every_s: float | None = None, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> None:
        for name, value in (("max_body_bytes", max_body_bytes), ("max_pending", max_pending), ("max_batch", max_batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if save_every_s is not None and not _seconds(save_every_s):
            raise ValueError(f"save_every_s: expected a positive number of seconds or None, got {save_every_s!r}")
        if not _seconds(read_timeout_s):
            raise ValueError(f"read_timeout_s: expected a positive number of seconds, got {read_timeout_s!r}")
        self.save_every_s = save_every_s
        self.read_timeout_s = float(read_timeout_s)
        self.composer = composer
        self.scorer = TextScorer(composer)
        self.state_path = Path(state_path) if state_path is not None else None
        if self.state_path is not None:
            try:
                state.check_writable(self.state_path)
            except ValueError as exc:
                raise ValueError(f"state_path {self.state_path}: {exc}") from None
        self.max_body_bytes = max_body_bytes
        self.max_pending = max_pending
        self.strip_suffixes = tuple(strip_suffixes)
        # None: no key (every route open). A key is never ""; it is compared through its digest, in constant time
        # whatever the length of what a client sends
        try:
            self._key = hashlib.sha256(api_key_bytes(api_key)).digest() if api_key is not None else None
        except ValueError as exc:
            raise ValueError(f"api_key: {exc}") from None
        self.metrics = _Metrics(self.scorer.term_names)
        self.counters = {"requests": 0, "completions": 0}
        self.restored = False
        if self.state_path is not None and self.state_path.exists():
            self.counters.update(state.restore(self.state_path, composer))
            self.restored = True
        self.metrics.step.set(composer.step)
        self.coalescer = Coalescer(self.scorer, max_batch, self._on_batch)
        self._pending = 0
        self._saver: asyncio.Task | None = None
        self._closing: asyncio.Future | None = None

    @property
    def keyed(self) -> bool:
        """Whether requests need the API key."""
        return self._key is not None

    # ---- routes -----------------------------------------------------------------------------
    async def get_reward(self, request: Request) -> Response:
        """Score the request's batch (OpenRLHF's protocol); every answer is counted by its status."""
        began = time.perf_counter()
        try:
            response = await self._answer(request)
        finally:
            self.metrics.request_s.observe(time.perf_counter() - began)
        self.metrics.requests.labels(status=str(response.status_code)).inc()
        return response

    async def _answer(self, request: Request) -> Response:
        refused = self._refuse_unauthorized(request)
        if refused is not None:
            return refused
        try:
            body = await self._read_body(request)  # no slot is held while a client sends (or stalls)
        except RequestError as exc:
            closing = {"Connection": "close"} if exc.status in (408, 413) else None  # the rest of the body is not read
            return self._error(exc.status, str(exc), headers=closing)
        if self._pending >= self.max_pending:
            return self._error(503, f"the server is at its limit of {self.max_pending} requests at once "
                                    "(--max-pending); retry shortly", headers={"Retry-After": "1"})
        self._pending += 1
        self.metrics.in_flight.inc()
        try:
            return await self._scored(body)
        finally:
            self._pending -= 1
            self.metrics.in_flight.dec()

    async def _scored(self, body: bytes) -> Response:
        try:
            return await self._score(body)
        except RequestError as exc:
            return self._error(exc.status, str(exc))
        except INPUT_ERRORS as exc:
            return self._error(400, str(exc))
        except RemoteScoreError as exc:
            return self._error(502, str(exc))
        except RewardKitError as exc:
            return self._error(500, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a component's bug: answered as JSON, its traceback logged
            traceback.print_exc(file=sys.stderr)
            return self._error(500, f"{type(exc).__name__}: {exc}")

    async def _score(self, body: bytes) -> Response:
        req = parse_request(body, self.strip_suffixes)
        if req.mismatched:
            self.metrics.mismatched.inc(req.mismatched)
        if not len(req):
            return self._ok({"rewards": [], "scores": [], "extra_logs": {}, "terms": {}, "step": self.composer.step})
        ctx = self.scorer.context(req.completions, prompts=req.prompts, references=req.labels)
        scored = await self.coalescer.score(ctx, len(req), req.step)
        out = answer(scored.batch, scored.start, scored.stop, scored.step)
        self._count(req, out)
        return self._ok(out)

    def _count(self, req: RewardRequest, out: dict[str, Any]) -> None:
        self.counters["requests"] += 1
        self.counters["completions"] += len(req)
        self.metrics.completions.inc(len(req))
        for name, mean in out["extra_logs"].items():
            self.metrics.term_mean.labels(term=name.removeprefix(LOG_PREFIX)).set(mean)

    async def _read_body(self, request: Request) -> bytes:
        """The whole body, within ``max_body_bytes`` (413) and ``read_timeout_s`` (408)."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise RequestError(413, f"expected a request body of at most {self.max_body_bytes} bytes "
                                    f"(--max-body-bytes), got {declared}")
        parts: list[bytes] = []

        async def read() -> None:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise RequestError(413, f"expected a request body of at most {self.max_body_bytes} bytes "
                                            "(--max-body-bytes), got more")
                parts.append(chunk)

        try:
            await asyncio.wait_for(read(), self.read_timeout_s)
        except ClientDisconnect:
            raise RequestError(400, "the client went away before its request body ended") from None
        except asyncio.TimeoutError:
            got = sum(len(p) for p in parts)
            raise RequestError(408, f"expected the whole request body within {self.read_timeout_s:g} s "
                                    f"(--read-timeout-s), got {got} bytes by then") from None
        return b"".join(parts)

    async def health(self, request: Request) -> Response:
        """Liveness and what the server holds: step, terms, completions scored, requests in flight."""
        return self._ok({"status": "ok", "step": self.composer.step, "terms": list(self.scorer.term_names),
                         "completions": self.counters["completions"], "requests": self.counters["requests"],
                         "in_flight": self._pending, "restored": self.restored})

    async def metrics_route(self, request: Request) -> Response:
        """Prometheus text exposition of the server's metrics."""
        refused = self._refuse_unauthorized(request)
        if refused is not None:
            return refused
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # ---- helpers ------------------------------------------------------------------------------
    def _on_batch(self, completions: int, requests: int, seconds: float) -> None:
        self.metrics.batches.inc()
        self.metrics.batch_size.observe(completions)
        self.metrics.batch_requests.observe(requests)
        self.metrics.compute_s.observe(seconds)
        self.metrics.step.set(self.composer.step)

    def _refuse_unauthorized(self, request: Request) -> Response | None:
        if self._key is None:
            return None
        # Starlette decodes header bytes as latin-1: encoding back gives the bytes the client sent (UTF-8 for a
        # non-ASCII key), compared with the key's UTF-8 bytes
        given = request.headers.get("x-api-key", "").strip().encode("latin-1")
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip().encode("latin-1")
        if given and hmac.compare_digest(hashlib.sha256(given).digest(), self._key):
            return None
        return self._error(401, "expected the server's API key in 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                           headers={"WWW-Authenticate": "Bearer"})

    def _ok(self, data: dict[str, Any]) -> Response:
        return Response(_dumps(data), media_type="application/json")

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        return JSONResponse(error_body(status, message), status_code=status, headers=headers)

    # ---- the state file -------------------------------------------------------------------------
    def save_state(self) -> bool:
        """Write the state file (when one is set), between composer calls; True when written.

        Blocks until no composer call runs: call it from a thread other than the server's loop
        (a remote term's call needs that loop to end)."""
        if self.state_path is None:
            return False
        try:
            with self.scorer.locked():
                state.save(self.state_path, self.composer, self.counters)
        except BaseException:
            self.metrics.save_failures.inc()
            raise
        self.metrics.saves.inc()
        return True

    async def _save_periodically(self, every_s: float) -> None:
        """Save every ``every_s`` seconds when completions were scored since the last save (a crash
        or SIGKILL then loses at most that much); a failed save is logged, counted and retried."""
        saved_at, failure = self.counters["completions"], ""
        while True:
            await asyncio.sleep(every_s)
            if self.counters["completions"] == saved_at:
                continue
            scored = self.counters["completions"]
            try:
                await _in_thread(self.save_state)  # waits for a call in flight without blocking the loop
            except Exception as exc:  # noqa: BLE001 - any failure to write is reported, and the next save tried
                reason = f"{type(exc).__name__}: {exc}"
                if reason != failure:  # once per distinct failure, not every few seconds
                    print(f"{LOG} error: periodic save to {self.state_path} failed ({reason}); retrying every "
                          f"{every_s:g} s (rewardkit_reward_state_save_failures_total counts them)",
                          file=sys.stderr, flush=True)
                failure = reason
                continue
            if failure:
                print(f"{LOG} periodic saves to {self.state_path} work again", file=sys.stderr, flush=True)
            saved_at, failure = scored, ""

    async def aclose(self) -> bool:
        """Stop scoring and write the state: the periodic saves stop, :meth:`stop_scoring`, the state
        file is written and the composer closed. Runs once (later calls wait for the first); False
        when the state file could not be written (the error is printed), True otherwise."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        return await asyncio.shield(self._closing)

    async def stop_scoring(self) -> None:
        """Cancel the composer call in flight (it changes nothing) and answer its requests, the
        waiting ones and any later one with 503; returns once the call has let go of the composer."""
        await self.coalescer.cancel(RequestError(503, "the server is shutting down; retry after its restart "
                                                      "or on another server"))

    async def _close(self) -> bool:
        if self._saver is not None:
            self._saver.cancel()
        try:
            await self.stop_scoring()
            if not await _in_thread(self.save_state, FINAL_SAVE_TIMEOUT_S):
                return True
            print(f"{LOG} state saved to {self.state_path} (step {self.composer.step})", file=sys.stderr, flush=True)
            return True
        except Exception as exc:  # noqa: BLE001 - reported; the caller exits non-zero
            reason = "the composer was still busy" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            print(f"{LOG} error: the state was NOT saved to {self.state_path} ({reason}: {exc})", file=sys.stderr,
                  flush=True)
            return False
        finally:
            self.composer.close()

    def app(self) -> Starlette:
        """The ASGI application; its shutdown calls :meth:`aclose` (the state is written, the composer closed)."""
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            if self.save_every_s is not None and self.state_path is not None:
                self._saver = asyncio.create_task(self._save_periodically(self.save_every_s))
            try:
                yield
            finally:
                await self.aclose()

        routes = [Route("/get_reward", self.get_reward, methods=["POST"]), Route("/", self.get_reward, methods=["POST"]),
                  Route("/health", self.health, methods=["GET"]), Route("/metrics", self.metrics_route, methods=["GET"])]
        async def not_here(request: Request, exc: Exception) -> Response:
            status = getattr(exc, "status_code", 404)
            what = "no such route" if status == 404 else f"{request.method} is not allowed here"
            return self._error(status, f"{request.url.path}: {what} (POST /get_reward or /, GET /health or /metrics)")

        return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_here, 405: not_here})


async def _in_thread(fn: Callable[[], T], timeout_s: float | None = None) -> T:
    """``fn()`` in a daemon thread of its own, awaited (up to ``timeout_s``) without blocking the loop.

    Not the loop's executor: a thread stuck past the timeout must not hold the process at exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(error: BaseException | None, value: Any) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def run() -> None:
        try:
            value, error = fn(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, error, value)

    threading.Thread(target=run, name="rewardkit-state-save", daemon=True).start()
    return await asyncio.wait_for(done, timeout_s)
