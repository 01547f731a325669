"""NVIDIA Dynamo's KV router cost (schedulers/routing/policies/dynamo_kv.py): the formula, its inputs from the
snapshot, the softmax temperature, its defaults and its parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedulers.routing.policies.dynamo_kv import DynamoKv, DynamoKvParams, dynamo_cost, dynamo_costs, softmax_pick
from schedulers.routing.policy import make_policy, policy_class, policy_names
from schedulers.routing.snapshot import ReplicaSnapshot


def picks(spec: str, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, seeds=range(30)) -> set[int]:
    """The replicas router ``spec`` picks over ``seeds``."""
    return {make_policy(spec, seed=s).decide(snapshot, prompt_tokens) for s in seeds}


def test_it_is_a_live_router_name_with_dynamos_defaults() -> None:
    assert "dynamo_kv" in policy_names(simulated=False)
    assert policy_class("dynamo_kv") is DynamoKv
    p = make_policy("dynamo_kv").params
    assert p == DynamoKvParams() == DynamoKv().params
    assert (p.prefill_load_scale, p.overlap_score_credit, p.overlap_score_credit_decay, p.host_cache_hit_weight,
            p.decode_active_request_weight, p.router_temperature, p.block_size) == (1.0, 1.0, 0.0, 0.75, 0.0, 0.0, 16.0)


def test_the_cost_is_uncached_prefill_blocks_plus_decode_blocks_plus_requests() -> None:
    # 160 tokens in flight + a 320-token prompt = 30 blocks, 10 of them held on device; 50 decode blocks
    assert dynamo_cost(160, 320, device_blocks=10, decode_blocks=50, active_requests=4) == 70.0
    assert dynamo_cost(160, 320, 10, 50, 4, host_blocks=8) == 64.0  # host blocks credited at 0.75
    assert dynamo_cost(160, 320, 10, 50, 4, DynamoKvParams(decode_active_request_weight=2)) == 78.0
    assert dynamo_cost(160, 320, 10, 50, 4, DynamoKvParams(prefill_load_scale=2)) == 90.0
    assert dynamo_cost(160, 320, 10, 50, 4, DynamoKvParams(overlap_score_credit=0.5)) == 75.0
    assert dynamo_cost(160, 320, 40, 50, 4) == 50.0  # the credit cannot push prefill below 0
    assert dynamo_cost(160, 320, 10, 50, 4, decay=0.5) == 75.0


def test_the_snapshot_gives_in_flight_prefill_the_mirrors_overlap_and_kv_blocks() -> None:
    # replica 0: 160 tokens in flight, holds half of the 320-token prompt (10 blocks), 30 KV blocks in use:
    # 30 - 10 prefill blocks, 30 + 10 new decode blocks; replica 1 idle: 20 prefill blocks, 20 new decode blocks
    s = ReplicaSnapshot.build(prefill_tokens=[160, 0], prefix_match=[0.5, 0.0], kv_blocks=[30, 0], waiting=[1, 0],
                              running=[3, 0])
    assert dynamo_costs(s, 320) == [60.0, 40.0]
    assert picks("dynamo_kv", s, 320) == {1}
    # every active request charged 6 blocks: replica 0 costs 84, still above 40
    assert dynamo_costs(s, 320, DynamoKvParams(decode_active_request_weight=6)) == [84.0, 40.0]
    # the whole prompt held, no backlog: nothing to prefill, nothing new to store
    hit = ReplicaSnapshot.build(prefix_match=[1.0, 0.0], kv_blocks=[10, 0])
    assert dynamo_costs(hit, 320) == [10.0, 40.0]
    assert picks("dynamo_kv", hit, 320) == {0}
    # a partial block of overlap earns no credit: 24 of 40 tokens held is one whole block
    assert dynamo_costs(ReplicaSnapshot.build(prefix_match=[0.6]), 40) == [(40 / 16 - 1) + (2 - 1)]


def test_the_credit_decays_with_the_holders_prefill_backlog() -> None:
    # replica 0 holds the 20-block prompt but has 20 blocks more prefill in flight than replica 1
    s = ReplicaSnapshot.build(prefill_tokens=[320, 0], prefix_match=[1.0, 0.0], kv_blocks=[15, 0])
    assert dynamo_costs(s, 320) == [35.0, 40.0]  # 40 - 20 credit + 15: the holder, without decay
    # decay 1: the credit is halved (20 excess blocks per 20-block request), 40 - 10 + 15 = 45
    assert dynamo_costs(s, 320, DynamoKvParams(overlap_score_credit_decay=1)) == [45.0, 40.0]
    assert picks("dynamo_kv", s, 320) == {0}
    assert picks("dynamo_kv:overlap_score_credit_decay=1", s, 320) == {1}


def test_temperature_0_takes_the_lowest_cost_and_above_0_draws_by_softmax() -> None:
    tie = ReplicaSnapshot.build(prefill_tokens=[0, 0])
    assert picks("dynamo_kv", tie, 320) == {0, 1}  # equal costs: at random
    rng = np.random.default_rng(0)
    draws = [softmax_pick([10.0, 20.0], 1.0, rng) for _ in range(20000)]
    # the costs normalized by their range: exp(-1) / (1 + exp(-1)) for the dearer replica
    assert np.mean(draws) == pytest.approx(math.exp(-1) / (1 + math.exp(-1)), abs=0.015)
    assert np.mean([softmax_pick([10.0, 20.0], 0.1, rng) for _ in range(2000)]) < 0.001
    assert {softmax_pick([5.0, 5.0, 5.0], 1.0, rng) for _ in range(200)} == {0, 1, 2}
    s = ReplicaSnapshot.build(prefill_tokens=[160, 0])  # costs 50 and 40
    assert picks("dynamo_kv", s, 320) == {1}
    warm = make_policy("dynamo_kv:router_temperature=1", seed=0)
    assert 0.2 < np.mean([warm.decide(s, 320) == 0 for _ in range(4000)]) < 0.34


def test_bad_parameters_name_the_key() -> None:
    for spec, message in [
        ("dynamo_kv:overlap_score_credit=1.5", r"overlap_score_credit: expected a number >= 0 and <= 1, got 1.5"),
        ("dynamo_kv:host_cache_hit_weight=-0.1", r"host_cache_hit_weight: expected a number >= 0 and <= 1"),
        ("dynamo_kv:router_temperature=-1", r"router_temperature: expected a number >= 0, got -1"),
        ("dynamo_kv:block_size=0", r"block_size: expected a number >= 1, got 0"),
        ("dynamo_kv:prefill_load_scale=inf:prefill_load_scale=1", r"prefill_load_scale is given twice"),
        ("dynamo_kv:temperature=1", r"expected key=value with a key among prefill_load_scale, overlap_score_credit"),
    ]:
        with pytest.raises(ValueError, match=message):
            make_policy(spec)
