"""``RemoteClient``: POST JSON to one URL, at most N requests in flight, a timeout per request,
retries with exponential backoff on transient failures, answers read up to a size limit.

Whatever a scorer answers cannot escape the term's failure policy: an answer larger than
``max_answer_bytes`` (read as a stream, stopped at the limit), a body that is not JSON (nested
too deeply included) or one the term cannot read (any exception its reader raises) is a failed
request, and messages show the URL with its credentials as ``***``.

httpx is imported lazily (the ``remote`` extra), so ``import rewardkit`` works without it. The
httpx client and the in-flight limit belong to one event loop; a client used from another loop
(a sync ``compute`` runs its own) makes new ones there. Each httpx client is closed when its loop
shuts down (``asyncio.run`` and the composer's background loop call ``shutdown_asyncgens()``,
which closes the small async generator that owns it), so no connection outlives its loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from types import ModuleType
from typing import Any, AsyncIterator, Callable, Mapping, TypeVar

from ..params import describe
from .budget import RequestBudget
from .stats import CallStats
from .term_params import DEFAULT_MAX_ANSWER_BYTES, secrets_of

T = TypeVar("T")
#: HTTP statuses worth another try: the scorer is overloaded or briefly down, not refusing the request.
TRANSIENT_STATUSES = frozenset({408, 425, 429})


class RequestFailed(Exception):
    """A request failed (after its retries); ``reason`` says how, in words fit for an error message."""

    def __init__(self, reason: str, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


class MalformedAnswer(ValueError):
    """The scorer answered with a success status but a body the term cannot read (not retried)."""


def import_httpx(component: str) -> ModuleType:
    """The httpx module; ``ImportError`` naming the ``remote`` extra when it is not installed."""
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(f"the {component} component needs httpx: pip install 'rewardkit[remote]' ({exc})") from None
    return httpx


class RemoteClient:
    """Sends JSON bodies to ``url`` and reads the answers with a caller-given function.

    ``post`` holds one of ``max_concurrency`` slots while it sends and retries, spends one
    request of the budget per attempt, gives each attempt ``timeout_s`` seconds (connecting,
    sending and reading), and retries transient failures (timeouts, refused or dropped
    connections, HTTP 5xx, 408, 425, 429) up to ``retries`` times after ``backoff_s * 2**k``
    seconds. A malformed answer or another 4xx is not retried: asking again would not change it.
    """

    def __init__(self, url: str, *, max_concurrency: int, timeout_s: float, retries: int, backoff_s: float,
                 api_key_env: str | None = None, component: str = "remote term",
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.url = url
        self.max_answer_bytes = max_answer_bytes
        self._secrets = secrets_of(url)
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.api_key_env = api_key_env
        self.component = component
        # (weakref to loop, httpx.AsyncClient, Semaphore, the async generator that closes the client)
        self._held: tuple[Any, Any, Any, Any] | None = None
        self._ssl: Any = None  # built once: loading the CA bundle costs tens of ms per client

    def headers(self) -> dict[str, str]:
        """Request headers: a bearer token read from ``api_key_env`` when one is named."""
        if self.api_key_env is None:
            return {}
        return {"Authorization": f"Bearer {os.environ.get(self.api_key_env, '')}"}

    async def _for_running_loop(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        held = self._held
        if held is None or held[0]() is not loop:
            httpx = import_httpx(self.component)
            limits = httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency)
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            client = httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=self.headers(), verify=self._ssl)
            closer = _close_at_loop_shutdown(client)
            await closer.__anext__()  # now the loop tracks it: its shutdown_asyncgens() closes the client
            held = self._held = (weakref.ref(loop), client, asyncio.Semaphore(self.max_concurrency), closer)
        return held[1], held[2]

    async def post(self, payload: Mapping[str, Any], read: Callable[[Any], T], budget: RequestBudget,
                   stats: CallStats) -> T:
        """POST ``payload`` and return ``read(answer JSON)``; :class:`RequestFailed` when every try failed.

        ``read`` raises :class:`MalformedAnswer` for a body it cannot use.
        """
        client, slots = await self._for_running_loop()
        async with slots:
            attempt = 0
            while True:
                if not budget.take():
                    raise RequestFailed(f"request budget spent ({budget.describe()})")
                stats.requests += 1
                stats.spend_requests = budget.spent
                try:
                    return await self._send_once(client, payload, read)
                except RequestFailed as failed:
                    stats.failures += 1
                    if not failed.transient or attempt >= self.retries:
                        if attempt:
                            failed.reason += f" (after {attempt + 1} attempts)"
                        raise
                await asyncio.sleep(self.backoff_s * 2 ** attempt)
                attempt += 1

    async def _send_once(self, client: Any, payload: Mapping[str, Any], read: Callable[[Any], T]) -> T:
        httpx = import_httpx(self.component)
        try:
            status, content = await asyncio.wait_for(self._exchange(client, payload), self.timeout_s)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise RequestFailed(f"no answer within timeout_s={self.timeout_s:g} s", transient=True) from None
        except httpx.TransportError as exc:
            detail = self.hide_secrets(str(exc)) or "no detail"
            raise RequestFailed(f"connection failed ({type(exc).__name__}: {detail})", transient=True) from None
        text = content.decode("utf-8", errors="replace")
        if not 200 <= status < 300:
            transient = status >= 500 or status in TRANSIENT_STATUSES
            raise RequestFailed(f"HTTP {status} {describe(self.hide_secrets(text))}", transient)
        try:
            body = json.loads(text)
        except ValueError:
            raise RequestFailed(f"malformed answer: not JSON: {describe(text[:200])}") from None
        except RecursionError:
            raise RequestFailed("malformed answer: JSON nested too deeply") from None
        try:
            return read(body)
        except MalformedAnswer as exc:
            raise RequestFailed(f"malformed answer: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - whatever the answer holds, it is the scorer's fault
            detail = str(exc)[:200] if not isinstance(exc, RecursionError) else "nested too deeply"
            raise RequestFailed(f"malformed answer: {type(exc).__name__}: {detail}") from None

    async def _exchange(self, client: Any, payload: Mapping[str, Any]) -> tuple[int, bytes]:
        """POST ``payload``; (status, body) with the body read up to ``max_answer_bytes``."""
        limit = self.max_answer_bytes
        too_large = f"answer larger than max_answer_bytes={limit}"
        async with client.stream("POST", self.url, json=payload) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise RequestFailed(f"{too_large} ({declared} bytes declared)")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise RequestFailed(too_large)
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    def hide_secrets(self, text: str) -> str:
        """``text`` with the URL's credentials written as ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    async def aclose(self) -> None:
        """Close the httpx client of the running loop (its connections); a later post opens a new one."""
        held, self._held = self._held, None
        if held is not None and held[0]() is asyncio.get_running_loop():
            await held[3].aclose()

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles open their own connections
        state = self.__dict__.copy()
        state["_held"] = state["_ssl"] = None
        return state


async def _close_at_loop_shutdown(client: Any) -> AsyncIterator[None]:
    """Suspended for the client's life; closing it (``aclose()``, or the loop's shutdown) closes the client."""
    try:
        yield
    finally:
        await client.aclose()
