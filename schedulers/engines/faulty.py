"""An engine that fails on demand, byte by byte: for the gateway's fault tests and probes.

A raw asyncio HTTP/1.1 server (no framework between it and the socket, so it can break the
protocol the ways a crashing or buggy engine does). ``mode`` decides what a completion request
gets; ``/health`` always answers 200 (the faults are in the answers, not in liveness):

- ``ok``: a plain JSON completion, or with ``"stream": true`` ``tokens`` events then ``[DONE]``
- ``die_mid_body``: headers promising 1,000 bytes, 10 of them, then the connection closes
- ``hang_after_headers``: headers, then nothing until the client leaves
- ``slow_plain``: a plain answer after ``delay_s`` (notices a client that leaves first)
- ``trickle``: a stream of one event every ``interval_s``, forever
- ``crlf``: a stream whose lines end with ``\\r\\n``, one event every ``interval_s``
- ``endless_event``: a stream of one event that never ends (``data: xxxx...`` without a blank line)
- ``die_mid_stream``: three events, then the connection closes without ending the chunked body
- ``error_500``: a plain-text 500;  ``garbage``: a 200 whose body is not JSON

It records each request's headers and body, when it sent each stream's last event, and how many
clients left before their answer was complete (``abandoned``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

MODES = ("ok", "die_mid_body", "hang_after_headers", "slow_plain", "trickle", "crlf", "endless_event",
         "die_mid_stream", "error_500", "garbage")


async def _cancel_the_rest() -> None:
    """Cancel every other task of this loop and let them finish (their sockets close cleanly)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)


@dataclass
class FaultyEngine:
    """Serves on 127.0.0.1:``port`` in a daemon thread (:meth:`start`, :meth:`stop`)."""

    port: int
    mode: str = "ok"
    tokens: int = 5
    interval_s: float = 0.2
    delay_s: float = 5.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    abandoned: int = 0
    last_event_sent: float | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FaultyEngine":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
            ready.set()
            try:
                self._loop.run_forever()
            finally:  # end the open connections' handlers and close their sockets, then the loop
                server.close()
                self._loop.run_until_complete(_cancel_the_rest())
                self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"faulty engine on port {self.port} did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                if path == "/health":
                    self._send(writer, 200, b"ok", "text/plain")
                elif path.startswith("/v1/"):
                    payload = json.loads(body or b"{}")
                    self.requests.append({"path": path, "headers": headers, "body": payload})
                    if not await self._complete(reader, writer, payload):
                        return
                else:
                    self._send(writer, 404, b"not found", "text/plain")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: int, body: bytes, kind: str, length: int | None = None) -> None:
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {len(body) if length is None else length}"
                     f"\r\n\r\n".encode() + body)

    async def _left(self, reader: asyncio.StreamReader, seconds: float) -> bool:
        """Wait ``seconds``; True (and counted) when the client closed its connection meanwhile."""
        try:
            data = await asyncio.wait_for(reader.read(1), seconds)
        except asyncio.TimeoutError:
            return False
        if data == b"":
            self.abandoned += 1
            return True
        return False

    async def _complete(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: dict) -> bool:
        """Answer one completion request in ``mode``; False when the connection is over."""
        mode, stream = self.mode, bool(payload.get("stream"))
        answer = json.dumps({"id": "f", "object": "text_completion", "model": "faulty",
                             "choices": [{"index": 0, "text": "x" * self.tokens, "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": self.tokens,
                                       "total_tokens": 1 + self.tokens}}).encode()
        if mode == "error_500":
            self._send(writer, 500, b"Internal Server Error", "text/plain")
        elif mode == "garbage":
            self._send(writer, 200, b"\x00\xffnot json at all", "application/json")
        elif mode == "die_mid_body":
            self._send(writer, 200, answer[:10], "application/json", length=1000)
            await writer.drain()
            return False
        elif mode == "hang_after_headers":
            self._send(writer, 200, b"", "application/json", length=1000)
            await writer.drain()
            while not await self._left(reader, 1.0):
                pass
            return False
        elif mode == "slow_plain":
            if await self._left(reader, self.delay_s):
                return False
            self._send(writer, 200, answer, "application/json")
        elif mode == "ok" and not stream:
            self._send(writer, 200, answer, "application/json")
        else:
            return await self._stream(reader, writer, mode)
        return True

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

        def chunk(data: bytes) -> None:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        event = b'data: {"choices": [{"index": 0, "text": "x", "finish_reason": null}]}'
        end = b"\r\n\r\n" if mode == "crlf" else b"\n\n"
        try:
            if mode == "endless_event":
                chunk(b"data: ")
                while True:
                    chunk(b"x" * 65536)
                    await writer.drain()
                    await asyncio.sleep(0)
            count = 0
            while mode == "trickle" or count < self.tokens:
                chunk(event + end)
                await writer.drain()
                count += 1
                self.last_event_sent = time.monotonic()
                if mode == "die_mid_stream" and count == 3:
                    return False
                if await self._left(reader, self.interval_s if mode in ("trickle", "crlf") else 0.0):
                    return False
            chunk(b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}' + end)
            chunk(b"data: [DONE]" + end)
            writer.write(b"0\r\n\r\n")
            self.last_event_sent = time.monotonic()
            return True
        except ConnectionError:
            self.abandoned += 1
            return False
