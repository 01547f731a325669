"""Replay a workload against an OpenAI-compatible endpoint (open loop) and measure every request.

Each request is sent at its arrival time whatever the state of earlier ones (like vLLM's serving
benchmark), streamed, and timed: TTFT (first content chunk), inter-token latencies (gaps between
content chunks), end-to-end latency. Output lengths follow the workload (``max_tokens`` with
``ignore_eos``, a vLLM extension other servers ignore). The run is bounded by the number of
requests and by ``duration_s`` (no request is sent after it; unfinished ones are cancelled at
``duration_s + timeout_s``). Async HTTP with httpx.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import httpx
import numpy as np

from .workload import RequestSpec

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def base_url(url: str) -> str:
    """``http://host:port`` from a URL given with or without ``/v1`` and trailing slashes."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--url: expected http://HOST:PORT, got {url!r}")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def request_body(spec: RequestSpec, model: str, api: str, prompt_format: str, stream: bool, ignore_eos: bool) -> dict[str, Any]:
    """The JSON body of ``spec`` for the completions or chat API."""
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


def _chunk_text(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if "text" in choice:
        return choice.get("text") or ""
    return (choice.get("delta") or {}).get("content") or ""


#: ``event(kind)`` hook of a client-side dispatch: ``"token"`` per streamed chunk, ``"done"`` at the end.
Event = Callable[[str], None]
#: client-side routing: the base URL for a request, a label recorded as its replica, and its event hook.
Dispatch = Callable[[RequestSpec], "tuple[str, str, Event]"]


def _noop(kind: str) -> None:
    """Event hook that ignores events."""


async def send_request(client: httpx.AsyncClient, url: str, body: dict[str, Any], record: RequestRecord, start: float,
                event: Event = _noop) -> None:
    """Send one request and fill ``record`` (errors recorded, never raised); ``event`` hears its progress."""
    try:
        await _send_inner(client, url, body, record, start, event)
    finally:
        event("done")


async def _send_inner(client: httpx.AsyncClient, url: str, body: dict[str, Any], record: RequestRecord, start: float,
                      event: Event) -> None:
    sent = time.perf_counter()
    record.sent_s = sent - start
    last = None
    try:
        async with client.stream("POST", url, json=body) as resp:
            record.status = resp.status_code
            record.replica = resp.headers.get(REPLICA_HEADER, record.replica)
            if resp.status_code != 200:
                text = (await resp.aread()).decode("utf-8", "replace")
                record.error = f"HTTP {resp.status_code}: {text[:300]}"
                return
            if not body.get("stream"):
                data = json.loads(await resp.aread())
                now = time.perf_counter()
                record.e2e_s = now - sent
                usage = data.get("usage") or {}
                record.output_tokens = int(usage.get("completion_tokens") or 0)
                record.usage_prompt_tokens = usage.get("prompt_tokens")
                return
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if chunk.get("usage"):
                    record.usage_prompt_tokens = chunk["usage"].get("prompt_tokens")
                    record.output_tokens = int(chunk["usage"].get("completion_tokens") or record.output_tokens)
                if _chunk_text(chunk):
                    event("token")
                    now = time.perf_counter()
                    if last is None:
                        record.ttft_s = now - sent
                    else:
                        record.itl_s.append(now - last)
                    last = now
                    if not chunk.get("usage"):
                        record.output_tokens = max(record.output_tokens, len(record.itl_s) + 1)
            record.e2e_s = time.perf_counter() - sent
    except httpx.HTTPError as exc:
        record.error = f"{type(exc).__name__}: {exc}" or type(exc).__name__
    except (json.JSONDecodeError, ValueError) as exc:
        record.error = f"bad response: {exc}"


async def replay(
    url: str,
    specs: Sequence[RequestSpec],
    *,
    model: str,
    api: str = "completions",
    prompt_format: str = "ids",
    stream: bool = True,
    ignore_eos: bool = True,
    timeout_s: float = 300.0,
    duration_s: float | None = None,
    on_done: Callable[[RequestRecord], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    dispatch: Dispatch | None = None,
) -> tuple[list[RequestRecord], float]:
    """Send every request of ``specs`` at its arrival time; return the records and the run's wall time (s).

    ``transport`` replaces the network (tests pass an ``httpx.MockTransport``). ``dispatch`` routes
    in the client instead of at ``url`` (called at each request's send time).
    """
    if api not in ("completions", "chat"):
        raise ValueError(f"--api: expected completions or chat, got {api!r}")
    endpoint = base_url(url) + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    records = [RequestRecord(s.index, s.arrival_s, s.prompt_tokens, s.output_tokens, group=s.group, session=s.session)
               for s in specs]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    async with httpx.AsyncClient(limits=limits, timeout=timeout, transport=transport) as client:
        start = time.perf_counter()

        async def one(spec: RequestSpec, record: RequestRecord) -> None:
            delay = spec.arrival_s - (time.perf_counter() - start)
            if delay > 0:
                await asyncio.sleep(delay)
            target, event = endpoint, _noop
            if dispatch is not None:
                backend, record.replica, event = dispatch(spec)
                target = base_url(backend) + endpoint[len(base_url(url)):]
            body = request_body(spec, model, api, prompt_format, stream, ignore_eos)
            try:
                await asyncio.wait_for(send_request(client, target, body, record, start, event), timeout_s)
            except asyncio.TimeoutError:
                record.error = f"timeout after {timeout_s:g} s"
            if on_done is not None:
                on_done(record)

        sendable = []
        for s, r in zip(specs, records, strict=True):
            if duration_s is None or s.arrival_s <= duration_s:
                sendable.append((s, r))
            else:
                r.error = "not sent: past --duration"
        tasks = [asyncio.create_task(one(s, r)) for s, r in sendable]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        wall = time.perf_counter() - start
    for record in records:
        if record.error is None and record.e2e_s is None and record.sent_s is not None:
            record.error = "cancelled"
    return records, wall


def percentiles(values: Sequence[float], qs: Sequence[int] = (50, 90, 99)) -> dict[str, float | None]:
    """Mean and the given percentiles of ``values`` in milliseconds (None when there are none)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {"mean": None, **{f"p{q}": None for q in qs}}
    out: dict[str, float | None] = {"mean": float(arr.mean() * 1000)}
    out.update({f"p{q}": float(np.percentile(arr, q) * 1000) for q in qs})
    return out


def summarize(records: Sequence[RequestRecord], wall_s: float) -> dict[str, Any]:
    """Throughput and TTFT / TPOT / ITL / e2e statistics (ms) over the answered requests."""
    ok = [r for r in records if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    prompt_tokens = sum(r.usage_prompt_tokens or r.prompt_tokens for r in ok)
    tpot = [(r.e2e_s - r.ttft_s) / (r.output_tokens - 1) for r in ok
            if r.ttft_s is not None and r.e2e_s is not None and r.output_tokens > 1]
    replicas: dict[str, int] = {}
    for r in ok:
        if r.replica is not None:
            replicas[r.replica] = replicas.get(r.replica, 0) + 1
    return {
        "requests": len(records),
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "errors": sorted({(r.error or "")[:120] for r in records if not r.ok})[:5],
        "duration_s": wall_s,
        "request_throughput": len(ok) / wall_s if wall_s > 0 else 0.0,
        "output_token_throughput": out_tokens / wall_s if wall_s > 0 else 0.0,
        "total_token_throughput": (out_tokens + prompt_tokens) / wall_s if wall_s > 0 else 0.0,
        "ttft_ms": percentiles([r.ttft_s for r in ok if r.ttft_s is not None]),
        "tpot_ms": percentiles(tpot),
        "itl_ms": percentiles([x for r in ok for x in r.itl_s]),
        "e2e_ms": percentiles([r.e2e_s for r in ok if r.e2e_s is not None]),
        "per_replica": dict(sorted(replicas.items())),
    }


def format_summary(summary: dict[str, Any], title: str = "") -> str:
    """A plain-text table of a summary, like vLLM's serving benchmark prints."""
    lines = [f"== {title} ==" if title else "== load generator =="]
    lines.append(f"requests {summary['completed']}/{summary['requests']} answered, {summary['failed']} failed, "
                 f"{summary['duration_s']:.1f} s")
    lines.append(f"throughput: {summary['request_throughput']:.2f} req/s, {summary['output_token_throughput']:.0f} output tok/s, "
                 f"{summary['total_token_throughput']:.0f} total tok/s")
    lines.append(f"{'metric (ms)':<12} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9}")
    for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "e2e")):
        row = summary[key]
        cells = ["-" if row[k] is None else f"{row[k]:.1f}" for k in ("mean", "p50", "p90", "p99")]
        lines.append(f"{label:<12} " + " ".join(f"{c:>9}" for c in cells))
    if summary.get("per_replica"):
        lines.append("per replica: " + ", ".join(f"{k}: {v}" for k, v in summary["per_replica"].items()))
    if summary["errors"]:
        lines.append("errors: " + "; ".join(summary["errors"]))
    return "\n".join(lines)


def progress_bar(total: int, enabled: bool) -> Callable[[RequestRecord], None] | None:
    """A tqdm bar on stderr advanced by each finished request (None when disabled)."""
    if not enabled:
        return None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="req", file=sys.stderr, dynamic_ncols=True, leave=False)

    def done(record: RequestRecord) -> None:
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return done
