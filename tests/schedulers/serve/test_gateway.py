"""``rewardkit gateway`` against stub engines: routing, streaming, metrics, decision log, rewards, faults, bad input."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
import torch

from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.live.decision_log import read_decision_log
from schedulers.rl.scorer_network import ReplicaScorerPolicy
from schedulers.routing.observation import FEATURE_NAMES
from schedulers.serve.app import create_app
from schedulers.serve.gateway import GatewaySettings

ROOT = Path(__file__).resolve().parents[3]


class Cluster:
    """Stub engines and a gateway over them, each on its own port in this process."""

    def __init__(self, engines: list[StubEngine], **settings) -> None:
        self.engines = engines
        self.ports = [free_port() for _ in engines]
        self.servers = [ServerThread(e.app(), p).start() for e, p in zip(engines, self.ports, strict=True)]
        self.settings = GatewaySettings([s.url for s in self.servers], **{"health_interval_s": 0.2, **settings})
        self.gateway = ServerThread(create_app(self.settings), free_port()).start()
        self.url = self.gateway.url

    def restart(self, i: int) -> None:
        self.servers[i] = ServerThread(self.engines[i].app(), self.ports[i]).start()

    def metric(self, name: str, replica: str) -> float:
        for line in httpx.get(self.url + "/metrics").text.splitlines():
            if line.startswith(name + "{") and f'replica="{replica}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def close(self) -> None:
        self.gateway.stop()
        for s in self.servers:
            s.stop()


@pytest.fixture
def cluster_factory():
    made = []

    def make(engines, **settings):
        made.append(Cluster(engines, **settings))
        return made[-1]

    yield make
    for c in made:
        c.close()


def completion(url: str, tokens: int = 4, prompt=None, **extra) -> httpx.Response:
    body = {"model": "stub-model", "prompt": prompt or [1, 2, 3, 4, 5, 6], "max_tokens": tokens, **extra}
    return httpx.post(url + "/v1/completions", json=body, timeout=30)


async def burst(url: str, n: int, tokens: int = 4) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as client:
        body = {"model": "stub-model", "prompt": [1, 2, 3, 4], "max_tokens": tokens}
        return await asyncio.gather(*(client.post(url + "/v1/completions", json=body) for _ in range(n)))


def test_a_load_aware_router_spreads_a_burst_and_logs_every_decision(cluster_factory, tmp_path):
    log = tmp_path / "decisions.jsonl"
    c = cluster_factory([StubEngine("a", ttft_s=0.05), StubEngine("b", ttft_s=0.05)], router="jsq",
                        decision_log=str(log))
    answers = asyncio.run(burst(c.url, 20))
    assert [r.status_code for r in answers] == [200] * 20
    served = {r.json()["served_by"] for r in answers}
    assert served == {"a", "b"} and min(e.served for e in c.engines) >= 5
    assert c.metric("rewardkit_gateway_routed_total", "0") + c.metric("rewardkit_gateway_routed_total", "1") == 20
    read = read_decision_log(log)
    assert read.header["router"] == "jsq" and read.header["features"] == list(FEATURE_NAMES)
    assert len(read.decisions) == 20 and {d.action for d in read.decisions} == {0, 1}
    assert all(len(d.observation) == 2 and len(d.observation[0]) == len(FEATURE_NAMES) for d in read.decisions)
    assert all(d.status == "ok" and d.output_tokens == 4 and d.e2e_s > 0 for d in read.decisions)


def test_load_the_engines_report_on_their_metrics_steers_routing(cluster_factory, tmp_path):
    """Other clients' requests queue on engine a (its /metrics says 12 waiting, KV 90% used): a load-aware
    gateway that scrapes /metrics sends its own requests to b; the logged rows show the engine's numbers."""
    busy, idle = StubEngine("a", extra_waiting=12, kv_usage=0.9), StubEngine("b")
    log = tmp_path / "d.jsonl"
    c = cluster_factory([busy, idle], router="jsq", decision_log=str(log), scrape_interval_s=0.05)
    time.sleep(0.5)  # a few scrapes
    answers = [completion(c.url) for _ in range(6)]
    assert {r.json()["served_by"] for r in answers} == {"b"}
    rows = read_decision_log(log).decisions[0].observation
    waiting, kv = FEATURE_NAMES.index("waiting"), FEATURE_NAMES.index("kv_used_frac")
    assert rows[0][waiting] == pytest.approx(12 / 16) and rows[0][kv] == pytest.approx(0.9)  # count_scale 16
    assert rows[1][waiting] == 0 and rows[1][kv] == 0
    # without scraping the gateway sees only its own requests and spreads them
    blind = cluster_factory([StubEngine("a", extra_waiting=12), StubEngine("b")], router="jsq", scrape_interval_s=0)
    time.sleep(0.3)
    assert {completion(blind.url).json()["served_by"] for _ in range(12)} == {"a", "b"}


def test_least_kv_reads_each_engines_own_kv_capacity_scrape_after_scrape(cluster_factory):
    """Half of a's 1,024-token cache is fewer blocks than a tenth of b's 65,536: least_kv picks a,
    which it would not with one capacity for both; later scrapes keep updating the view."""
    small, large = StubEngine("a", kv_usage=0.5, kv_blocks=64), StubEngine("b", kv_usage=0.1, kv_blocks=4096)
    c = cluster_factory([small, large], router="least_kv", scrape_interval_s=0.05)
    time.sleep(0.5)
    assert {completion(c.url).json()["served_by"] for _ in range(3)} == {"a"}
    small.kv_usage, large.kv_usage = 1.0, 0.0
    time.sleep(0.5)
    assert {completion(c.url).json()["served_by"] for _ in range(3)} == {"b"}


def test_streaming_passes_through_chunk_by_chunk_with_ttft_and_rewards(cluster_factory, tmp_path):
    log = tmp_path / "d.jsonl"
    c = cluster_factory([StubEngine("a", ttft_s=0.05, per_token_s=0.05)], router="least_prefill",
                        decision_log=str(log), reward=str(ROOT / "configs" / "rewards" / "request_ttft.yaml"))
    arrivals = []
    with httpx.stream("POST", c.url + "/v1/completions", timeout=30,
                      json={"model": "stub-model", "prompt": [1, 2, 3], "max_tokens": 6, "stream": True}) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: "):
                arrivals.append((time.monotonic(), line))
    assert len(arrivals) == 8 and arrivals[-1][1] == "data: [DONE]"  # 6 tokens, the finish event, [DONE]
    assert arrivals[-1][0] - arrivals[0][0] > 0.2  # the first token came well before the last (not buffered)
    decision, = read_decision_log(log).decisions
    assert decision.output_tokens == 6 and 0.04 < decision.ttft_s < decision.e2e_s
    assert decision.reward is not None and decision.reward_terms
    assert c.metric("rewardkit_gateway_ttft_seconds_count", "0") == 1


def test_a_request_to_a_dead_backend_is_retried_once_elsewhere(cluster_factory, tmp_path):
    """Health checks too slow to notice (30 s): the failed connection marks it unhealthy and the request moves."""
    c = cluster_factory([StubEngine("a"), StubEngine("b")], router="round_robin", decision_log=str(tmp_path / "d.jsonl"),
                        health_interval_s=30)
    c.servers[1].stop()
    answers = [completion(c.url) for _ in range(6)]
    assert [r.status_code for r in answers] == [200] * 6 and {r.json()["served_by"] for r in answers} == {"a"}
    decisions = read_decision_log(tmp_path / "d.jsonl").decisions
    assert [d.status for d in decisions].count("retried") == 1 and [d.status for d in decisions].count("ok") == 6
    assert {d.action for d in decisions if d.status == "retried"} == {1}
    assert c.metric("rewardkit_gateway_backend_healthy", "1") == 0
    assert c.metric("rewardkit_gateway_retried_total", "1") == 1


def test_a_dead_backend_is_marked_unhealthy_and_rejoins_when_back(cluster_factory):
    c = cluster_factory([StubEngine("a"), StubEngine("b")], router="round_robin")
    c.servers[1].stop()
    deadline = time.monotonic() + 10
    while c.metric("rewardkit_gateway_backend_healthy", "1") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {completion(c.url).json()["served_by"] for _ in range(4)} == {"a"}
    c.restart(1)
    deadline = time.monotonic() + 10
    while c.metric("rewardkit_gateway_backend_healthy", "1") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {completion(c.url).json()["served_by"] for _ in range(4)} == {"a", "b"}


def test_a_backend_late_with_its_first_byte_is_left_and_the_request_retried_elsewhere(cluster_factory):
    """Late is not dead: the request moves, the replica stays in rotation until health checks say otherwise."""
    hung = StubEngine("hung", mode="hang")
    c = cluster_factory([hung, StubEngine("b")], router="round_robin", first_byte_timeout_s=0.5,
                        request_timeout_s=5, health_interval_s=30)
    answers = [completion(c.url) for _ in range(2)]
    assert [r.status_code for r in answers] == [200, 200] and {r.json()["served_by"] for r in answers} == {"b"}
    assert c.metric("rewardkit_gateway_retried_total", "0") >= 1 and c.metric("rewardkit_gateway_backend_healthy", "0") == 1
    assert c.metric("rewardkit_gateway_in_flight", "0") == 0 and c.metric("rewardkit_gateway_in_flight", "1") == 0


def test_no_healthy_backend_is_a_503_in_openai_shape(cluster_factory):
    c = cluster_factory([StubEngine("a")], router="jsq")
    c.servers[0].stop()
    resp = completion(c.url)
    assert resp.status_code == 503 and resp.json()["error"]["type"] == "service_unavailable"
    time.sleep(0.5)
    assert httpx.get(c.url + "/health").status_code == 503


@pytest.mark.parametrize(("body", "status", "message"), [
    (b"{not json", 400, "malformed request body"),
    (b"[1, 2]", 400, "expected a JSON object"),
    (b'{"prompt": 12}', 400, "prompt: expected a string or a non-empty list of token ids"),
    (b'{"prompt": "' + b"x" * 2_000_000 + b'"}', 413, "at most 1048576 bytes"),
])
def test_bad_bodies_get_400_or_413_in_openai_shape(cluster_factory, body, status, message):
    c = cluster_factory([StubEngine("a")], router="jsq")
    resp = httpx.post(c.url + "/v1/completions", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == status
    error = resp.json()["error"]
    assert message in error["message"] and error["code"] == status and error["type"] == "invalid_request_error"
    assert c.engines[0].served == 0


def test_a_client_that_disconnects_cancels_its_upstream_request(cluster_factory):
    engine = StubEngine("a", per_token_s=0.1)
    c = cluster_factory([engine], router="jsq")
    with httpx.stream("POST", c.url + "/v1/completions", timeout=30,
                      json={"model": "stub-model", "prompt": [1, 2], "max_tokens": 100, "stream": True}) as resp:
        next(resp.iter_lines())
    deadline = time.monotonic() + 5
    while engine.cancelled == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.cancelled == 1 and engine.served == 0 and engine.running == 0


def test_every_answer_names_the_replica_that_served_it_and_loadgen_records_it(cluster_factory):
    from schedulers.loadgen.runner import replay
    from schedulers.shared.requests import RequestSpec

    c = cluster_factory([StubEngine("a"), StubEngine("b", per_token_s=0.01)], router="round_robin")
    plain = [completion(c.url) for _ in range(4)]
    assert [r.headers["x-rewardkit-replica"] for r in plain] == ["0", "1", "0", "1"]
    with httpx.stream("POST", c.url + "/v1/completions", timeout=30,
                      json={"model": "stub-model", "prompt": [1, 2], "max_tokens": 3, "stream": True}) as resp:
        assert resp.headers["x-rewardkit-replica"] == "0"
    specs = [RequestSpec(index=i, arrival_s=0.01 * i, prompt_ids=(1, 2, 3), output_tokens=3) for i in range(4)]
    records, _ = asyncio.run(replay(c.url, specs, model="stub-model", timeout_s=30))
    assert sorted(r.replica for r in records) == ["0", "0", "1", "1"]


def test_the_ppo_router_routes_live(cluster_factory, tmp_path):
    policy = tmp_path / "policy.pt"
    torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), policy)
    c = cluster_factory([StubEngine("a"), StubEngine("b")], router="ppo", checkpoint=str(policy))
    assert all(completion(c.url).status_code == 200 for _ in range(5))
    assert sum(e.served for e in c.engines) == 5


def test_a_ppo_gateway_decides_on_one_torch_thread_by_default(tmp_path):
    """More threads spin on the cores the engines of the same machine need (docs/serving.md)."""
    from schedulers.serve.gateway import Gateway

    policy = tmp_path / "policy.pt"
    torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), policy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        Gateway(GatewaySettings(["http://127.0.0.1:1"], router="ppo", checkpoint=str(policy)))
        assert torch.get_num_threads() == 1
        Gateway(GatewaySettings(["http://127.0.0.1:1"], router="ppo", checkpoint=str(policy), torch_threads=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_router_flags_help_names_the_registrys_live_routers(monkeypatch):
    """``--router``'s help lists what the registry can route live (a plug-in included, the oracle not)."""
    import argparse

    from schedulers.routing import policy as policy_module
    from schedulers.serve.cli import add_gateway_command

    class PlugIn(policy_module.HeuristicPolicy):
        def pick(self, snapshot, prompt_tokens, true_speed):
            return 0

    policy_module.registered_policies()  # the built-ins first, as a plug-in finds them
    monkeypatch.setitem(policy_module._REGISTRY, "plugged_in_router", PlugIn)
    parser = argparse.ArgumentParser(prog="rewardkit")
    add_gateway_command(parser.add_subparsers())
    gateway = parser._subparsers._group_actions[0].choices["gateway"]
    text = " ".join(gateway.format_help().split())
    assert "a router of the routing registry that can route live (round_robin, random," in text
    assert "least_prefill" in text and "dynamo_kv" in text and "plugged_in_router" in text and "ppo needs --checkpoint" in text
    assert "oracle" not in text and "a heuristic name" not in text


def test_bad_gateway_flags_are_one_line_errors(capsys):
    from rewardkit.cli import main

    assert main(["gateway", "--backend", "notaurl"]) == 2
    assert "--backend: expected an http(s) URL" in capsys.readouterr().err
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--router", "oracle"]) == 2
    assert "--router oracle: router 'oracle' reads the replicas' true speeds" in capsys.readouterr().err
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--router", "ppo"]) == 2
    assert "--router ppo: router 'ppo' needs a checkpoint" in capsys.readouterr().err
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--scrape-interval", "-1"]) == 2
    assert "--scrape-interval: expected 0 or seconds from 0.01 to 86400, got -1" in capsys.readouterr().err
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--torch-threads", "0"]) == 2
    assert "--torch-threads: expected an integer from 1 to 256, got 0" in capsys.readouterr().err
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--router", "cache_aware:cache_threshold=2"]) == 2
    assert "cache_threshold: expected a number >= 0 and <= 1, got 2.0" in capsys.readouterr().err


@pytest.mark.parametrize("router", ["cache_aware", "affinity_token_load:exploration_probability=0", "llm_d_default",
                                    "llm_d_optimized", "dynamo_kv"])
def test_the_prefix_baselines_keep_a_conversation_on_the_replica_that_cached_it(cluster_factory, router):
    c = cluster_factory([StubEngine("a"), StubEngine("b")], router=router, scrape_interval_s=0)
    system = list(range(10, 138))  # a 128-token system prompt: 4 blocks of the gateway's 32
    served = set()
    for turn in range(6):
        r = completion(c.url, prompt=system + list(range(1000, 1000 + 8 * (turn + 1))))
        assert r.status_code == 200
        served.add(r.headers["x-rewardkit-replica"])
    assert len(served) == 1  # every turn after the first followed its cached prefix


def test_smgs_least_load_spreads_a_burst_by_the_prompt_tokens_waiting(cluster_factory, capsys):
    """``--router least_load``: each request's prompt counts on its replica until its first token, so a burst
    spreads; a bad parameter is refused, naming it."""
    c = cluster_factory([StubEngine("a", ttft_s=0.3), StubEngine("b", ttft_s=0.3)], router="least_load",
                        scrape_interval_s=0)
    answers = asyncio.run(burst(c.url, 20))
    assert [r.status_code for r in answers] == [200] * 20
    # the burst arrives within the first token's 0.3 s: each request goes where fewer prompt tokens wait
    # (a coin per request would leave a gap of 4 or more about half the time)
    assert abs(c.engines[0].served - c.engines[1].served) <= 2
    from rewardkit.cli import main

    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--router", "least_load:measured_throughput=2"]) == 2
    assert "measured_throughput: expected 0 or 1, got 2.0" in capsys.readouterr().err


def test_the_usage_event_the_gateway_asks_for_reaches_only_clients_that_asked(cluster_factory, tmp_path):
    c = cluster_factory([StubEngine("a")], router="jsq", decision_log=str(tmp_path / "d.jsonl"))
    body = {"model": "stub-model", "prompt": [1, 2, 3], "max_tokens": 5, "stream": True}
    plain = httpx.post(c.url + "/v1/completions", json=body, timeout=30).text
    asked = httpx.post(c.url + "/v1/completions", json={**body, "stream_options": {"include_usage": True}},
                       timeout=30).text
    assert '"usage"' not in plain and plain.endswith("data: [DONE]\n\n")
    assert '"completion_tokens": 5' in asked
    assert [d.output_tokens for d in read_decision_log(tmp_path / "d.jsonl").decisions] == [5, 5]
