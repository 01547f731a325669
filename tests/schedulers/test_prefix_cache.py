"""Prefix caching in the simulator: the per-replica LRU cache, the shared-prefix workload, the env and evaluate."""

from __future__ import annotations

import argparse
import csv

import numpy as np
import pytest

pytest.importorskip("vidur")

from vidur.entities import Request  # noqa: E402

from schedulers.loadgen.cli import build_workload  # noqa: E402
from schedulers.sim.env_config import with_overrides  # noqa: E402
from schedulers.sim.prefix_cache import SimulatedPrefixCache  # noqa: E402

SHARED = {"groups": 2, "prefix_tokens": 256, "sessions": 6}


def request(tokens: int) -> Request:
    return Request(arrived_at=0.0, num_prefill_tokens=tokens, num_decode_tokens=4)


def test_a_routed_request_prefills_only_what_its_replica_has_not_cached() -> None:
    cache = SimulatedPrefixCache(num_replicas=2, capacity_blocks=100, block_size=16)
    first, second = request(100), request(100)
    hashes = [11, 12, 13, 14, 15, 16]  # 6 full blocks = 96 tokens of a 100-token prompt
    cache.add_request(first, hashes)
    cache.add_request(second, hashes)
    assert cache.route(first, 0) == 0 and first.num_prefill_tokens == 100
    np.testing.assert_allclose(cache.match(second), [0.96, 0.0])  # the router's mirror knows at once
    assert cache.route(second, 0) == 0  # the engine caches blocks once their prefill completed
    cache.prefill_done(first)
    third = request(100)
    cache.add_request(third, hashes)
    assert cache.route(third, 1) == 0 and third.num_prefill_tokens == 100  # replica 1 holds nothing
    fourth = request(100)
    cache.add_request(fourth, hashes)
    assert cache.route(fourth, 0) == 96 and fourth.num_prefill_tokens == 4
    assert cache.prompt_tokens == 400 and cache.cached_tokens == 96
    assert cache.hit_rate == pytest.approx(96 / 400)


def test_a_fully_cached_prompt_still_computes_its_last_token() -> None:
    cache = SimulatedPrefixCache(1, 100, 16)
    a, b = request(64), request(64)
    for r in (a, b):
        cache.add_request(r, [1, 2, 3, 4])
    cache.route(a, 0)
    cache.prefill_done(a)
    assert cache.route(b, 0) == 48 and b.num_prefill_tokens == 16  # vLLM recomputes the last block


def test_the_cache_evicts_the_least_recently_used_prefix() -> None:
    cache = SimulatedPrefixCache(1, capacity_blocks=4, block_size=16)
    old, new, again = request(33), request(33), request(33)
    cache.add_request(old, [1, 2])
    cache.add_request(new, [3, 4, 5])
    cache.add_request(again, [1, 2])
    for r in (old, new):
        cache.route(r, 0)
        cache.prefill_done(r)
    assert cache.engine.size(0) == 4
    assert cache.route(again, 0) == 0  # block 1 was evicted, so the chain misses from the start


def loadgen_args(env: str, seed: int, requests: int) -> argparse.Namespace:
    return argparse.Namespace(trace=None, env=env, seed=seed, qps=None, requests=requests, shared_prefix=None,
                              sessions=0, max_model_len=None, length_scale=1.0, vocab_size=2000)


def test_the_simulator_and_the_load_generator_send_the_same_prompts(tmp_path, tiny_config, vidur_predictor) -> None:
    import yaml

    from schedulers.shared.arrivals import resolved_trace_file, sample_arrivals
    from schedulers.sim.prefix_cache import shared_prefix_workload

    cfg = with_overrides(tiny_config, shared_prefix=SHARED, max_tokens=1024)
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump({**cfg.to_dict(), "trace_file": str(resolved_trace_file(cfg))}))
    sim = shared_prefix_workload(cfg, sample_arrivals(cfg, 7), 7, block_size=16)
    specs = build_workload(loadgen_args(str(path), 7, cfg.requests_per_episode))
    assert [s.prompt_tokens for s in specs] == sim.arrivals.prefill_tokens.tolist()
    assert [s.output_tokens for s in specs] == sim.arrivals.decode_tokens.tolist()
    assert [s.shared_tokens for s in specs] == sim.shared_tokens.tolist()
    assert all(s.prompt_tokens + s.output_tokens <= 1024 for s in specs)
    assert sum(s.shared_tokens for s in specs) > 0.3 * sum(s.prompt_tokens for s in specs)


def run(env, route) -> dict:
    env.reset(seed=5)
    while True:
        _, _, term, trunc, _ = env.step(route(env))
        if term or trunc:
            return env.episode_metrics()


def test_prefix_affinity_raises_the_hit_rate_and_shortens_prefills(make_tiny_env, tiny_config) -> None:
    cfg = with_overrides(tiny_config, shared_prefix=SHARED, max_tokens=1024, qps=3.0)
    env = make_tiny_env(env_config=cfg, evaluate=True, compute_reward=False)
    # sticky: follow the router's mirror (the best-matching replica), else replica 0
    sticky = run(env, lambda e: int(np.argmax(e.unwrapped.snapshot().prefix_match)))
    assert sticky.cached_prompt_tokens > 0
    cache = env._tracker.prefix_cache
    cached = np.array([cache.cached_by_request[r.id] for r in env._ep.requests])
    prompts = np.array([r.num_prefill_tokens for r in env._ep.requests]) + cached
    assert sticky.prompt_tokens == prompts.sum()
    assert sticky.prefix_hit_rate == pytest.approx(cached.sum() / prompts.sum())
    alternating = run(env, lambda e: e._ep.decisions % 2)
    assert sticky.prefix_hit_rate > alternating.prefix_hit_rate > 0.0
    plain = make_tiny_env(env_config=with_overrides(tiny_config, max_tokens=1024, qps=3.0), evaluate=True,
                          compute_reward=False)
    assert run(plain, lambda e: e._ep.decisions % 2).prefix_hit_rate == 0.0  # unique prompts never hit


def test_evaluate_reports_each_routers_prefix_hit_rate(tmp_path, tiny_config, vidur_predictor) -> None:
    from schedulers.evaluate.paired import evaluate_policies
    from schedulers.routing.policy import make_policy

    cfg = with_overrides(tiny_config, shared_prefix=SHARED, max_tokens=1024, requests_per_episode=40)
    routers = {name: make_policy(name) for name in ("round_robin", "prefix_aware")}
    evaluate_policies(cfg, routers, [3], out_dir=tmp_path, log=lambda _m: None)
    with open(tmp_path / "summary.csv") as fh:
        rows = {row["router"]: row for row in csv.DictReader(fh)}
    assert set(rows) == {"round_robin", "prefix_aware"}
    for row in rows.values():
        assert 0.0 < float(row["prefix_hit_rate"]) < 1.0
    import json

    table = json.loads((tmp_path / "results.json").read_text())["table"]
    assert all(0.0 < row["prefix_hit_rate"] < 1.0 for row in table)
