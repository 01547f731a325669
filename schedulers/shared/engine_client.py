"""``EngineClient``: the one HTTP/1.1 client the router talks to engines with (gateway, load generator, live env).

A keep-alive connection pool per engine over asyncio streams, nothing more: a request is written
in one piece, the response head is read and parsed, the body is read by its ``Content-Length`` or
its chunks. It is a few times cheaper per request than a general-purpose client, which is what lets
a gateway decide in its loop and still keep up with a Rust peer (``benchmarks/bench_request_path.py``).

Errors are :class:`EngineError` subclasses: :class:`EngineConnectError` (refused, or nothing came
back on a fresh connection: safe to retry elsewhere), :class:`EngineTimeout` (connect or read) and
:class:`EngineProtocolError` (a malformed answer, or the connection closed mid-answer). A pooled
connection the engine has closed while idle is dropped before use; one that fails anyway (closed
as the request went out) is retried once, always on a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import urlsplit


class EngineError(Exception):
    """Talking to an engine failed."""


class EngineConnectError(EngineError):
    """No connection, or nothing at all came back: the engine did not get (or answer) the request."""


class EngineTimeout(EngineError):
    """The engine did not connect or answer in time."""


class EngineProtocolError(EngineError):
    """The engine's answer is not HTTP/1.1 or ended early."""


@dataclass
class EngineResponse:
    """An answer: status, headers (lower-case names) and, once read, the body."""

    status: int
    headers: dict[str, str]
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        #: the last answer was read to its end, and the engine keeps the connection open
        self.reusable = False

    def close(self) -> None:
        self.writer.close()


def _target(url: str) -> tuple[str, int, bool, str]:
    """Host, port, whether TLS, and the path of ``url``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"expected an http(s):// URL, got {url!r}")
    tls = parts.scheme == "https"
    path = parts.path or "/"
    return parts.hostname, parts.port or (443 if tls else 80), tls, path + (f"?{parts.query}" if parts.query else "")


#: ``timeout_s`` for a call whose caller bounds it (the gateway's deadlines): no timeout scope per read
UNBOUNDED = math.inf


_NO_SCOPE = contextlib.nullcontext()  # reusable: it holds no state


def _within(timeout: float) -> Any:
    """A timeout scope of ``timeout`` seconds, or none for :data:`UNBOUNDED`."""
    return _NO_SCOPE if timeout == UNBOUNDED else asyncio.timeout(timeout)


class EngineClient:
    """Keep-alive HTTP/1.1 to engines; ``timeout_s`` bounds each read, ``connect_timeout_s`` each connect."""

    def __init__(self, timeout_s: float = 300.0, connect_timeout_s: float = 10.0, max_idle: int = 256) -> None:
        self.timeout_s, self.connect_timeout_s, self.max_idle = timeout_s, min(connect_timeout_s, timeout_s), max_idle
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        #: each URL's host, port, TLS and path, parsed once (a few engines, a parse per request is measurable)
        self._targets: dict[str, tuple[str, int, bool, str]] = {}

    async def __aenter__(self) -> "EngineClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    # ---- requests ------------------------------------------------------------------------------
    async def request(self, method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None,
                      timeout_s: float | None = None) -> EngineResponse:
        """One request, its whole answer read."""
        async with self.stream(method, url, body, headers, timeout_s) as (resp, chunks):
            resp.body = b"".join([chunk async for chunk in chunks])
        return resp

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None,
                     timeout_s: float | None = None) -> AsyncIterator[tuple[EngineResponse, AsyncIterator[bytes]]]:
        """``(response head, body chunks)``; leaving before the end closes the connection (the engine
        sees the client go away and cancels the request). ``timeout_s``: each read's bound, or
        :data:`UNBOUNDED` when the caller bounds the call."""
        target = self._targets.get(url)
        if target is None:
            target = _target(url)
            if len(self._targets) < 1024:
                self._targets[url] = target
        host, port, tls, path = target
        timeout = self.timeout_s if timeout_s is None else timeout_s
        head = (f"{method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-length: {len(body)}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()) + "\r\n").encode()
        conn, resp = await self._send(host, port, tls, head + body, timeout)
        try:
            yield resp, self._body(conn, resp, timeout)
        finally:
            if conn.reusable:
                self._release(host, port, tls, conn)
            else:
                conn.close()

    async def _send(self, host: str, port: int, tls: bool, data: bytes,
                    timeout: float) -> tuple[_Connection, EngineResponse]:
        for attempt in range(2):
            # the retry takes a fresh connection: after a long pause the engine may have closed every
            # idle one (uvicorn after 5 s), and a second stale one would fail the request for nothing
            conn = self._pooled(host, port, tls) if attempt == 0 else None
            fresh = conn is None
            if conn is None:
                conn = await self._connect(host, port, tls)
            conn.reusable = False
            try:
                conn.writer.write(data)
                return conn, await self._head(conn, timeout)
            except (ConnectionError, asyncio.IncompleteReadError, EngineConnectError) as exc:
                conn.close()
                if fresh or attempt:  # a fresh connection got nothing back: the engine never answered
                    raise EngineConnectError(f"{host}:{port}: connection closed before an answer ({exc!r})") from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _pooled(self, host: str, port: int, tls: bool) -> _Connection | None:
        """The most recently used idle connection the engine has not closed yet (closed ones are dropped)."""
        pooled = self._idle.get((host, port, tls))
        while pooled:
            conn = pooled.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.close()
        return None

    async def _connect(self, host: str, port: int, tls: bool) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(host, port, ssl=True if tls else None)
        except TimeoutError:
            raise EngineTimeout(f"{host}:{port}: no connection within {self.connect_timeout_s:g} s") from None
        except OSError as exc:
            raise EngineConnectError(f"{host}:{port}: {exc.strerror or exc}") from None
        return _Connection(reader, writer)

    async def _head(self, conn: _Connection, timeout: float) -> EngineResponse:
        try:
            async with _within(timeout):
                raw = await conn.reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise EngineTimeout(f"no answer within {timeout:g} s") from None
        except asyncio.LimitOverrunError:
            raise EngineProtocolError("response head too long") from None
        lines = raw.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
            raise EngineProtocolError(f"expected an HTTP/1.1 status line, got {lines[0][:80]!r}")
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return EngineResponse(int(status_line[1]), headers)

    async def _body(self, conn: _Connection, resp: EngineResponse, timeout: float) -> AsyncIterator[bytes]:
        reader, h = conn.reader, resp.headers
        keep = h.get("connection", "").lower() != "close"
        try:
            if "chunked" in h.get("transfer-encoding", "").lower():
                while True:
                    async with _within(timeout):
                        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
                        data = await reader.readexactly(size + 2)  # the chunk and its CRLF (the last: no trailers)
                    if size == 0:
                        break
                    yield data[:-2]
            elif "content-length" in h:
                remaining = int(h["content-length"])
                while remaining > 0:
                    async with _within(timeout):
                        data = await reader.read(min(remaining, 1 << 16))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", remaining)
                    remaining -= len(data)
                    yield data
            else:  # read to the end of the connection
                keep = False
                while True:
                    async with _within(timeout):
                        data = await reader.read(1 << 16)
                    if not data:
                        break
                    yield data
        except TimeoutError:
            raise EngineTimeout(f"the answer stalled for {timeout:g} s") from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            raise EngineProtocolError(f"the answer ended early or is malformed ({exc!r})") from None
        conn.reusable = keep

    def _release(self, host: str, port: int, tls: bool, conn: _Connection) -> None:
        idle = self._idle.setdefault((host, port, tls), [])
        if len(idle) < self.max_idle:
            idle.append(conn)
        else:
            conn.close()
