"""The gateway logs each prompt as stable block names (never its text), which a replay turns back into shared prefixes."""

from __future__ import annotations

import json

import numpy as np

from schedulers.engines.stub import StubEngine
from schedulers.live.decision_log import read_decision_log
from schedulers.replay.logged import read_logged_run
from schedulers.replay.workload import build_workload
from schedulers.shared.block_hashes import stable_block_hashes
from test_gateway import cluster_factory, completion  # noqa: F401 - the gateway tests' stub cluster fixture


def test_the_gateway_logs_the_prompt_blocks_the_prefix_index_hashes(cluster_factory, tmp_path):  # noqa: F811
    log = tmp_path / "d.jsonl"
    c = cluster_factory([StubEngine("a", ttft_s=0.01), StubEngine("b", ttft_s=0.01)], router="least_prefill",
                        decision_log=str(log))
    system = list(range(10, 74))  # two 32-token blocks every prompt shares
    prompts = [system + [100 + i] * (8 + 20 * (i % 3)) for i in range(24)]
    for p in prompts:
        assert completion(c.url, prompt=p).status_code == 200
    assert completion(c.url, prompt="a text prompt, which has no token ids").status_code == 200
    read = read_decision_log(log)
    assert read.header["prompt_block_tokens"] == 32
    logged = read.decisions
    assert [d.prompt_blocks for d in logged[:24]] == [stable_block_hashes(p, 32) for p in prompts]
    assert logged[24].prompt_blocks == []  # a text prompt: nothing hashed, and no text written
    text = log.read_text()
    assert "a text prompt" not in text and json.dumps(system)[1:-1] not in text
    assert len({d.prompt_blocks[0] for d in logged[:24]}) == 1 and len(logged[2].prompt_blocks) == 3

    # the replay's workload: arrivals as logged, lengths, and prefixes shared exactly as far as the prompts share
    run = read_logged_run([log])
    work = build_workload(run, 16, 1024)
    times = np.array([d.time for d in logged])
    assert np.allclose(work.arrived_at, times - times[0], atol=1e-6)
    assert list(work.prompt_tokens) == [len(p) for p in prompts] + [logged[24].prompt_tokens]
    assert list(work.output_tokens) == [4] * 25
    first, third = work.block_names[0], work.block_names[2]
    assert len(first) == 4 and first == third[:4] and len(third) == 6  # 64 shared tokens = 4 simulated blocks
    assert work.block_names[1][:4] == first and work.block_names[1][4:] != third[4:6]
    assert work.block_names[24] == ()


def test_a_log_written_before_prompt_blocks_still_reads(tmp_path):
    log = tmp_path / "old.jsonl"
    header = {"kind": "header", "v": 1, "started": 0, "router": "jsq", "replicas": ["a", "b"], "observation": {},
              "features": [], "reward": None}
    line = {"kind": "decision", "v": 1, "request_id": "r", "router": "jsq", "action": 1, "observation": [[0], [0]],
            "prompt_tokens": 5, "output_tokens": 2, "ttft_s": 0.1, "e2e_s": 0.2, "status": "ok", "reward": None,
            "reward_terms": {}, "time": 1.0}
    log.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    decision, = read_decision_log(log).decisions
    assert decision.prompt_blocks is None and decision.action == 1


def test_the_gateway_logs_each_engine_s_kv_capacity_once_and_again_when_it_changes(cluster_factory, tmp_path):  # noqa: F811
    """What the engines report of their KV cache (``vllm:cache_config_info``) goes to the decision log as an
    ``engines`` line: once when first scraped, again only on a change; the replay sizes each prefix cache by it."""
    import time

    log = tmp_path / "d.jsonl"
    small, large = StubEngine("a", kv_blocks=340), StubEngine("b", kv_blocks=2048)
    c = cluster_factory([small, large], router="least_prefill", decision_log=str(log), scrape_interval_s=0.05)
    time.sleep(0.5)  # several scrapes
    for i in range(24):
        assert completion(c.url, prompt=list(range(40)) + [i]).status_code == 200
    small.kv_blocks = 680
    time.sleep(0.5)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    engines = [x["kv_tokens"] for x in lines if x["kind"] == "engines"]
    assert engines[-1] == [680 * 16, 2048 * 16] and [340 * 16, 2048 * 16] in engines
    assert len(engines) <= 3  # a or b first, then both, then a's change: not one line per scrape
    assert read_decision_log(log).kv_tokens == [680 * 16, 2048 * 16]
    assert read_logged_run([log]).kv_tokens == [680 * 16, 2048 * 16]
