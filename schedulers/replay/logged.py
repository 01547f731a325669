"""Decision logs read for replay: the answered requests of one or several gateway runs, in arrival order.

A request the gateway moved to a second replica has two lines (the first ``retried``): the first
line gives its arrival, the last its replica and outcome. Requests that did not end ``ok`` (errors,
cancelled) are left out and counted. Several logs are laid end to end, each starting one second
after the previous one's last request ended, so runs do not overlap. Every error names the file
(and line or key) and what was expected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rewardkit.errors import ConfigError

from ..live.decision_log import read_decision_log

#: fewest answered requests a replay accepts (fewer say nothing about a p99)
MIN_REQUESTS = 20
#: seconds between two logs laid end to end
GAP_S = 1.0


@dataclass(frozen=True)
class LoggedRequest:
    """One answered request: arrival (s from the first), lengths, prompt blocks, replica and logged latencies."""

    arrived_at: float
    prompt_tokens: int
    output_tokens: int
    prompt_blocks: tuple[str, ...]
    replica: int
    ttft_s: float
    e2e_s: float


@dataclass
class LoggedRun:
    """The answered requests of the logs, their header (the first log's) and what was left out."""

    header: dict[str, Any]
    requests: list[LoggedRequest]
    sources: list[str]
    dropped: int = 0
    #: the replicas' addresses as the header names them
    replicas: list[str] = field(default_factory=list)
    #: each replica's KV-cache capacity in tokens, as its engine last reported it in the logs (None: never)
    kv_tokens: list[int | None] = field(default_factory=list)

    @property
    def router(self) -> str:
        """The router that made the logged decisions."""
        return str(self.header.get("router") or "")

    @property
    def num_replicas(self) -> int:
        """Replicas of the logged cluster."""
        return len(self.replicas)

    @property
    def block_tokens(self) -> int | None:
        """Tokens per logged prompt block (None: the log has no block names)."""
        value = self.header.get("prompt_block_tokens")
        return int(value) if isinstance(value, int) and value > 0 else None


def read_logged_run(paths: Sequence[str | os.PathLike[str]], min_requests: int = MIN_REQUESTS) -> LoggedRun:
    """The answered requests of ``paths`` laid end to end (see the module doc); ConfigError on bad input."""
    if not paths:
        raise ConfigError("expected at least one decision log")
    run: LoggedRun | None = None
    offset = 0.0
    for path in paths:
        log = read_decision_log(path)
        header = log.header
        replicas = header.get("replicas")
        if not isinstance(replicas, list) or not replicas:
            raise ConfigError(f"{path}: header: replicas: expected a non-empty list of replica addresses, got {replicas!r}")
        if run is None:
            run = LoggedRun(header, [], [], replicas=list(replicas))
        elif list(replicas) != run.replicas:
            raise ConfigError(f"{path}: header: replicas: expected the replica set of {run.sources[0]} "
                              f"({', '.join(map(str, run.replicas))}), got {', '.join(map(str, replicas))}: "
                              "replay logs of one cluster together")
        elif header.get("prompt_block_tokens") != run.header.get("prompt_block_tokens"):
            raise ConfigError(f"{path}: header: prompt_block_tokens: expected {run.header.get('prompt_block_tokens')!r} "
                              f"as in {run.sources[0]}, got {header.get('prompt_block_tokens')!r}")
        run.sources.append(str(path))
        known = log.kv_tokens or [None] * len(run.replicas)
        run.kv_tokens = [new if new is not None else old
                         for old, new in zip(run.kv_tokens or [None] * len(run.replicas), known, strict=True)]
        first: dict[str, float] = {}
        last: dict[str, Any] = {}
        for d in log.decisions:
            first.setdefault(d.request_id or f"#{id(d)}", float(d.time))
            last[d.request_id or f"#{id(d)}"] = d
        answered = [(first[k], d) for k, d in last.items() if d.status == "ok" and d.e2e_s is not None]
        run.dropped += len(last) - len(answered)
        if not answered:
            continue
        answered.sort(key=lambda x: x[0])
        start = answered[0][0]
        end = offset
        for t, d in answered:
            at = offset + t - start
            ttft = float(d.ttft_s) if d.ttft_s is not None else float(d.e2e_s)
            run.requests.append(LoggedRequest(at, max(int(d.prompt_tokens), 1), max(int(d.output_tokens), 1),
                                              tuple(d.prompt_blocks or ()), int(d.action), ttft, float(d.e2e_s)))
            end = max(end, at + float(d.e2e_s))
        offset = end + GAP_S
    assert run is not None
    if len(run.requests) < min_requests:
        raise ConfigError(f"{', '.join(run.sources)}: expected at least {min_requests} answered requests to replay, "
                          f"got {len(run.requests)} ({run.dropped} not answered)")
    return run


def describe_sources(run: LoggedRun) -> str:
    """``a.jsonl, b.jsonl: 240 requests on 2 replicas, routed by least_prefill``."""
    names = ", ".join(Path(s).name for s in run.sources)
    return (f"{names}: {len(run.requests)} requests on {run.num_replicas} replicas, routed by {run.router or '?'}"
            + (f" ({run.dropped} not answered, left out)" if run.dropped else ""))
