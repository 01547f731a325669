"""Replay a workload against an OpenAI-compatible endpoint (open loop) and measure every request.

Each request is sent at its arrival time whatever the state of earlier ones (like vLLM's serving
benchmark), streamed, and timed by :func:`schedulers.shared.engine_requests.send_request`: TTFT
(first event carrying a token), inter-token latencies, end-to-end latency. Output lengths follow
the workload (``max_tokens`` with ``ignore_eos``, a vLLM extension other servers ignore). The run
is bounded by the number of requests and by ``duration_s`` (no request is sent after it;
unfinished ones are cancelled at ``duration_s + timeout_s``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..shared.engine_requests import (JSON_HEADERS, Event, RequestRecord, auth_headers, base_url, engine_http_client,
                                      no_events, request_body, send_request)
from ..shared.requests import RequestSpec

#: client-side routing: the base URL for a request, a label recorded as its replica, and its event hook.
Dispatch = Callable[[RequestSpec], "tuple[str, str, Event]"]

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
    dispatch: Dispatch | None = None,
    api_key: str | None = None,
) -> tuple[list[RequestRecord], float]:
    """Send every request of ``specs`` at its arrival time; return the records and the run's wall time (s).

    ``dispatch`` routes in the client instead of at ``url`` (called at each request's send time);
    ``api_key`` goes with every request as ``Authorization: Bearer`` (a gateway started with ``--api-key``).
    """
    headers = {**JSON_HEADERS, **auth_headers(api_key)}
    if api not in ("completions", "chat"):
        raise ValueError(f"--api: expected completions or chat, got {api!r}")
    endpoint = base_url(url) + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    records = [RequestRecord(s.index, s.arrival_s, s.prompt_tokens, s.output_tokens, group=s.group, session=s.session)
               for s in specs]
    async with engine_http_client(timeout_s) as client:
        start = time.perf_counter()

        async def one(spec: RequestSpec, record: RequestRecord) -> None:
            delay = spec.arrival_s - (time.perf_counter() - start)
            if delay > 0:
                await asyncio.sleep(delay)
            target, event = endpoint, no_events
            if dispatch is not None:
                backend, record.replica, event = dispatch(spec)
                target = base_url(backend) + endpoint[len(base_url(url)):]
            body = request_body(spec, model, api, prompt_format, stream, ignore_eos)
            try:
                await asyncio.wait_for(send_request(client, target, body, record, start, event, headers), timeout_s)
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
