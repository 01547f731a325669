"""``RewardServer``: a reward config behind HTTP, answering OpenRLHF's remote reward protocol.

POST ``/get_reward`` (and ``/``) scores a batch (:mod:`.protocol`); concurrent requests share
composer calls (:mod:`rewardkit.integrations.coalescer`); remote terms run concurrently on the server's event loop
(``composer.acall``). GET ``/health`` answers without a key (for load balancers), GET ``/metrics``
gives Prometheus text. Bounds: a body larger than ``max_body_bytes`` is refused with 413 before it
is held whole; more than ``max_pending`` requests at once get 503 (with ``Retry-After``). With an
API key every route but ``/health`` needs ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (401).
The state (:mod:`.state`) is restored when the server is built and saved when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

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
from .protocol import (DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_PENDING, LOG_PREFIX, RequestError, RewardRequest,
                       answer, error_body, parse_request)

try:
    import orjson
except ImportError:  # the stdlib's json is 70x slower on float lists, still correct
    orjson = None

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


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
        for name in term_names:
            self.term_mean.labels(term=name)


class RewardServer:
    """One composer serving rewards over HTTP; :meth:`app` is the ASGI application."""

    def __init__(self, composer: RewardComposer, *, state_path: str | Path | None = None, api_key: str | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_pending: int = DEFAULT_MAX_PENDING,
                 max_batch: int = DEFAULT_MAX_BATCH, strip_suffixes: Sequence[str] = (),
                 save_every_s: float | None = None) -> None:
        for name, value in (("max_body_bytes", max_body_bytes), ("max_pending", max_pending), ("max_batch", max_batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if save_every_s is not None and not save_every_s > 0:
            raise ValueError(f"save_every_s: expected a positive number of seconds or None, got {save_every_s!r}")
        self.save_every_s = save_every_s
        self.composer = composer
        self.scorer = TextScorer(composer)
        self.state_path = Path(state_path) if state_path is not None else None
        self.max_body_bytes = max_body_bytes
        self.max_pending = max_pending
        self.strip_suffixes = tuple(strip_suffixes)
        self._key = api_key.encode() if api_key else None
        self.metrics = _Metrics(self.scorer.term_names)
        self.counters = {"requests": 0, "completions": 0}
        self.restored = False
        if self.state_path is not None and self.state_path.exists():
            self.counters.update(state.restore(self.state_path, composer))
            self.restored = True
        self.metrics.step.set(composer.step)
        self.coalescer = Coalescer(self.scorer, max_batch, self._on_batch)
        self._pending = 0

    # ---- routes -----------------------------------------------------------------------------
    async def get_reward(self, request: Request) -> Response:
        """Score the request's batch (OpenRLHF's protocol)."""
        refused = self._refuse_unauthorized(request)
        if refused is not None:
            return refused
        if self._pending >= self.max_pending:
            return self._error(503, f"the server is at its limit of {self.max_pending} requests at once "
                                    "(--max-pending); retry shortly", headers={"Retry-After": "1"})
        self._pending += 1
        self.metrics.in_flight.inc()
        began = time.perf_counter()
        try:
            return await self._score(request)
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
        finally:
            self._pending -= 1
            self.metrics.in_flight.dec()
            self.metrics.request_s.observe(time.perf_counter() - began)

    async def _score(self, request: Request) -> Response:
        body = await self._read_body(request)
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
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise RequestError(413, f"expected a request body of at most {self.max_body_bytes} bytes "
                                    f"(--max-body-bytes), got {declared}")
        parts, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise RequestError(413, f"expected a request body of at most {self.max_body_bytes} bytes "
                                            "(--max-body-bytes), got more")
                parts.append(chunk)
        except ClientDisconnect:
            raise RequestError(400, "the client went away before its request body ended") from None
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
        given = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        if given and hmac.compare_digest(given.encode(), self._key):
            return None
        return self._error(401, "expected the server's API key in 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                           headers={"WWW-Authenticate": "Bearer"})

    def _ok(self, data: dict[str, Any]) -> Response:
        self.metrics.requests.labels(status="200").inc()
        return Response(_dumps(data), media_type="application/json")

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        self.metrics.requests.labels(status=str(status)).inc()
        return JSONResponse(error_body(status, message), status_code=status, headers=headers)

    def save_state(self) -> bool:
        """Write the state file (when one is set), between composer calls; True when written."""
        if self.state_path is None:
            return False
        with self.scorer.locked():
            state.save(self.state_path, self.composer, self.counters)
        return True

    async def _save_periodically(self, every_s: float) -> None:
        """Save every ``every_s`` seconds when completions were scored since the last save (a crash
        or SIGKILL then loses at most that much)."""
        saved_at = self.counters["completions"]
        while True:
            await asyncio.sleep(every_s)
            if self.counters["completions"] != saved_at:
                saved_at = self.counters["completions"]
                await asyncio.to_thread(self.save_state)  # waits for a remote call in flight without blocking the loop

    def app(self) -> Starlette:
        """The ASGI application; its shutdown saves the state and closes the composer."""
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            saver = (asyncio.create_task(self._save_periodically(self.save_every_s))
                     if self.save_every_s is not None and self.state_path is not None else None)
            try:
                yield
            finally:
                if saver is not None:
                    saver.cancel()
                try:
                    if self.save_state():
                        print(f"rewardkit serve-reward: state saved to {self.state_path} (step {self.composer.step})",
                              file=sys.stderr, flush=True)
                finally:
                    self.composer.close()

        routes = [Route("/get_reward", self.get_reward, methods=["POST"]), Route("/", self.get_reward, methods=["POST"]),
                  Route("/health", self.health, methods=["GET"]), Route("/metrics", self.metrics_route, methods=["GET"])]
        async def not_here(request: Request, exc: Exception) -> Response:
            status = getattr(exc, "status_code", 404)
            what = "no such route" if status == 404 else f"{request.method} is not allowed here"
            return self._error(status, f"{request.url.path}: {what} (POST /get_reward or /, GET /health or /metrics)")

        return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_here, 405: not_here})
