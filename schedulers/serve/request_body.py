"""A client's request body: read within its size bound, parsed, checked, or refused in OpenAI's shape.

The bound holds while reading (a chunked body without a ``content-length`` is refused as soon as it
passes the bound, not after being held whole), and anything a client can send that the gateway
cannot route is a 400: JSON nested past what a parser recurses into, a ``stream`` that is not a
boolean, ``stream_options`` that are not an object, a prompt that is not one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable


class BadRequest(Exception):
    """The client's request cannot be served: ``status`` (400 or 413) and a message saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Payload:
    """A parsed request: its JSON, prompt tokens (exact for token ids, else ~4 bytes a token) and ids."""

    data: dict[str, Any]
    prompt_tokens: int
    prompt_ids: list[int]

    @property
    def stream(self) -> bool:
        return bool(self.data.get("stream"))

    @property
    def client_wants_usage(self) -> bool:
        options = self.data.get("stream_options")
        return isinstance(options, dict) and bool(options.get("include_usage"))


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]], headers: dict[bytes, bytes], limit: int) -> bytes:
    """The body of a raw ASGI request, at most ``limit`` bytes: :class:`BadRequest` 413 before more is held
    (and 400 when the client leaves mid-body)."""
    declared = headers.get(b"content-length", b"").decode("latin-1")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"expected a request body of at most {limit} bytes, got {declared}")
    parts, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            raise BadRequest(400, "the client went away before its request body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"expected a request body of at most {limit} bytes, got more")
        parts.append(chunk)
        more = message.get("more_body", False)
    return b"".join(parts)


def parse_payload(body: bytes, chat: bool) -> Payload:
    """The request's JSON and prompt; :class:`BadRequest` 400 naming what is wrong."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise BadRequest(400, "malformed request body: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"malformed request body: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "malformed request body: expected a JSON object")
    if data.get("stream") is not None and not isinstance(data["stream"], bool):
        raise BadRequest(400, f"stream: expected true or false, got {_kind(data['stream'])}")
    if data.get("stream_options") is not None and not isinstance(data["stream_options"], dict):
        raise BadRequest(400, f"stream_options: expected an object, got {_kind(data['stream_options'])}")
    try:
        prompt_tokens, prompt_ids = prompt_of(data, chat)
    except ValueError as exc:
        raise BadRequest(400, f"malformed request body: {exc}") from None
    return Payload(data, prompt_tokens, prompt_ids)


def prompt_of(payload: dict[str, Any], chat: bool) -> tuple[int, list[int]]:
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


def upstream_body(body: bytes, payload: Payload) -> bytes:
    """What the engine gets: the client's body, asking for the usage event in a stream (the engine's
    own token count, for the record) when the client did not."""
    if not payload.stream or payload.client_wants_usage:
        return body
    options = payload.data.get("stream_options") or {}
    try:
        return json.dumps({**payload.data, "stream_options": {**options, "include_usage": True}}).encode()
    except RecursionError:
        raise BadRequest(400, "malformed request body: JSON nested too deeply") from None


def _kind(value: Any) -> str:
    """A JSON value's kind, for a message (never the value: it may be huge or nested)."""
    return {str: "a string", int: "a number", float: "a number", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__)
