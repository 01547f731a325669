"""OpenAI-compatible requests to an engine: their bodies, one request sent and measured, its record.

Used by the load generator, the live env and the serving benchmark (the gateway relays with the
same :class:`~schedulers.shared.sse.SSEStream` rule). A streamed request is timed event by event:
TTFT at the first event carrying a token, inter-token latencies between such events, end-to-end at
the end of the stream; output tokens are the engine's ``usage`` when it sends one, else the events
that carried a token. Errors are recorded, never raised. HTTP is the one engine client,
:class:`~schedulers.shared.engine_client.EngineClient`, the gateway's too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .engine_client import EngineClient, EngineError
from .sse import SSEStream

#: response header with the index of the replica that answered (``rewardkit gateway`` sets it),
#: recorded as the request's ``replica`` when present.
REPLICA_HEADER = "x-rewardkit-replica"


@dataclass
class RequestRecord:
    """What happened to one request (times in seconds; ``sent_s`` from the run's start)."""

    index: int
    arrival_s: float
    prompt_tokens: int
    max_tokens: int
    sent_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    usage_prompt_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    replica: str | None = None
    group: int | None = None
    session: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200 and self.e2e_s is not None

    @property
    def late_s(self) -> float:
        """How long after its arrival the request was sent (a caller's lag counts as latency)."""
        return max(0.0, (self.sent_s or self.arrival_s) - self.arrival_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_url(url: str) -> str:
    """``http://host:port`` from a URL given with or without ``/v1`` and trailing slashes."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--url: expected http://HOST:PORT, got {url!r}")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def request_body(spec: Any, model: str, api: str, prompt_format: str, stream: bool, ignore_eos: bool) -> dict[str, Any]:
    """The JSON body of a :class:`~schedulers.shared.requests.RequestSpec` for the completions or chat API."""
    body: dict[str, Any] = {"model": model, "max_tokens": spec.output_tokens, "temperature": 0.0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if api == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt_text()}]
    else:
        body["prompt"] = list(spec.prompt_ids) if prompt_format == "ids" else spec.prompt_text()
    return body


#: ``event(kind)`` hook: ``"token"`` per event carrying a token, ``"done"`` at the end.
Event = Callable[[str], None]


def no_events(kind: str) -> None:
    """Event hook that ignores events."""


JSON_HEADERS = {"content-type": "application/json"}
#: the environment variable holding the key ``rewardkit gateway`` wants from clients (and
#: ``rewardkit loadgen`` sends when ``--api-key`` is not given)
GATEWAY_KEY_ENV = "REWARDKIT_GATEWAY_API_KEY"


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY`` for an endpoint that wants a key (none without one)."""
    if not api_key:
        return {}
    if any(c in api_key for c in "\r\n\0 "):
        raise ValueError("--api-key: expected a key without spaces or line breaks")
    return {"authorization": f"Bearer {api_key}"}


def engine_http_client(timeout_s: float) -> EngineClient:
    """The engine client: keep-alive connections, ``timeout_s`` per read (10 s at most to connect)."""
    return EngineClient(timeout_s, connect_timeout_s=10.0)


async def send_request(client: EngineClient, url: str, body: dict[str, Any], record: RequestRecord, start: float,
                       event: Event = no_events, headers: dict[str, str] | None = None) -> None:
    """Send one request and fill ``record`` (errors recorded, never raised); ``event`` hears its progress;
    ``headers`` are sent with it (default: the JSON content type alone)."""
    try:
        await _send(client, url, body, record, start, event, headers or JSON_HEADERS)
    finally:
        event("done")


async def _send(client: EngineClient, url: str, body: dict[str, Any], record: RequestRecord, start: float,
                event: Event, headers: dict[str, str]) -> None:
    sent = time.perf_counter()
    record.sent_s = sent - start
    last = None
    try:
        async with client.stream("POST", url, json.dumps(body).encode(), headers) as (resp, chunks):
            record.status = resp.status
            record.replica = resp.headers.get(REPLICA_HEADER, record.replica)
            if resp.status != 200:
                text = b"".join([c async for c in chunks]).decode("utf-8", "replace")
                record.error = f"HTTP {resp.status}: {text[:300]}"
                return
            if not body.get("stream"):
                data = json.loads(b"".join([c async for c in chunks]))
                record.e2e_s = time.perf_counter() - sent
                usage = data.get("usage") or {}
                record.output_tokens = int(usage.get("completion_tokens") or 0)
                record.usage_prompt_tokens = usage.get("prompt_tokens")
                return
            stream = SSEStream()
            async for chunk in chunks:
                for ev in stream.feed(chunk):
                    if not ev.token:
                        continue
                    event("token")
                    now = time.perf_counter()
                    if last is None:
                        record.ttft_s = now - sent
                    else:
                        record.itl_s.append(now - last)
                    last = now
            record.e2e_s = time.perf_counter() - sent
            record.output_tokens = stream.tokens
            if stream.usage is not None:
                record.usage_prompt_tokens = stream.usage.get("prompt_tokens")
    except EngineError as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    except (json.JSONDecodeError, ValueError) as exc:
        record.error = f"bad response: {exc}"
