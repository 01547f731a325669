"""``dynamo_kv``: NVIDIA Dynamo's KV router, the worker of lowest cost in KV blocks.

Follows ai-dynamo/dynamo's ``lib/kv-router`` (``src/scheduling/selector/default.rs`` for the cost,
``selector/mod.rs`` for its inputs, ``src/scheduling/config.rs`` for the defaults; read at commit
07a6c9ce of 2026, the router of Dynamo 1.x). Per replica, with ``bs`` the KV block size in tokens::

    raw_prefill   = (active_prefill_tokens + prompt_tokens) / bs
    credit        = overlap_score_credit * decay * device_overlap_blocks + host_cache_hit_weight * host_overlap_blocks
    decode_blocks = active KV blocks + the prompt's blocks the replica does not already hold
    cost          = prefill_load_scale * max(0, raw_prefill - credit) + decode_blocks
                    + decode_active_request_weight * active_requests

Defaults are Dynamo's: ``prefill_load_scale`` 1, ``overlap_score_credit`` 1, host blocks credited at
``host_cache_hit_weight`` 0.75, ``decode_active_request_weight`` 0, ``overlap_score_credit_decay`` 0
(``decay`` = 1 / (1 + overlap_score_credit_decay * the replica's prefill tokens above the least
loaded one's, in blocks, per block of the prompt): no decay), ``router_temperature`` 0. At
temperature 0 the lowest cost wins, ties at random (Dynamo samples ties uniformly too); above 0 a
replica is drawn with probability proportional to ``exp(-(cost - min) / ((max - min) * T))``, as
Dynamo's softmax over costs normalized by their range (all equal: uniform).

What the snapshot gives for each input:

- ``active_prefill_tokens``: ``prefill_tokens``. Dynamo's router adds each request's uncached prompt
  tokens until its prefill completes; in the simulator ``prefill_tokens`` are the prompt tokens not yet
  computed, already cut to the uncached part; the gateway and the Ray router count a request's whole
  prompt until its first token.
- device overlap: ``prefix_match`` times the prompt, in whole blocks of ``bs``: the router's own
  block mirror (Dynamo listens to the engines' KV events by default, or approximates from its routing
  decisions with ``--no-kv-events``, which is what the mirror does). Zero where nothing tracks
  prefixes.
- host overlap: none. No engine here offloads KV to host memory (nor to disk, Dynamo's 0.25 tier),
  so ``host_cache_hit_weight`` is kept for the formula but has nothing to credit.
- active KV blocks: ``kv_blocks``, in the world's own blocks (16 tokens in the simulator, as ``bs``;
  the gateway's view counts 32-token blocks, so live the decode term weighs half what Dynamo's
  16-token blocks would). The prompt's new blocks are its full blocks minus the full blocks the
  mirror says the replica holds: Dynamo subtracts blocks shared with *active* requests, which the
  mirror cannot tell from blocks cached by finished ones.
- ``active_requests``: waiting plus running requests.

Dynamo's router queue (requests held back while every worker is busy), worker taints and pinned
workers, and its disaggregated prefill/decode branch are not modelled.

Parameters are set wherever a router is named: ``dynamo_kv:decode_active_request_weight=1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..policy import HeuristicPolicy, register_policy
from ..snapshot import ReplicaSnapshot
from ..ties import argmin_random
from .prefix import check_range


@dataclass(frozen=True)
class DynamoKvParams:
    """Dynamo KV router settings (its defaults)."""

    #: weight of the prefill term after the overlap credit (``prefill_load_scale``).
    prefill_load_scale: float = 1.0
    #: blocks of prefill credited per block the replica holds on device (``overlap_score_credit``, 0-1).
    overlap_score_credit: float = 1.0
    #: fades the device credit as a replica's prefill backlog exceeds the least loaded one's (0: off).
    overlap_score_credit_decay: float = 0.0
    #: blocks of prefill credited per block held in host memory (``host_cache_hit_weight``, 0-1).
    host_cache_hit_weight: float = 0.75
    #: blocks charged per active request (``decode_active_request_weight``).
    decode_active_request_weight: float = 0.0
    #: softmax temperature over the costs (``router_temperature``); 0: the lowest cost.
    router_temperature: float = 0.0
    #: tokens per KV block (``--kv-cache-block-size``; vLLM's default and the simulator's).
    block_size: float = 16.0

    def __post_init__(self) -> None:
        for name in ("prefill_load_scale", "overlap_score_credit_decay", "decode_active_request_weight",
                     "router_temperature"):
            check_range(name, getattr(self, name), 0.0, float("inf"))
        check_range("overlap_score_credit", self.overlap_score_credit, 0.0, 1.0)
        check_range("host_cache_hit_weight", self.host_cache_hit_weight, 0.0, 1.0)
        check_range("block_size", self.block_size, 1.0, float("inf"))


def dynamo_cost(active_prefill_tokens: float, prompt_tokens: float, device_blocks: float, decode_blocks: float,
                active_requests: float, params: DynamoKvParams = DynamoKvParams(), *, host_blocks: float = 0.0,
                decay: float = 1.0) -> float:
    """One replica's cost in blocks (see the module doc; ``decay`` is the device credit's factor, 1 without decay)."""
    p = params
    raw_prefill = (active_prefill_tokens + prompt_tokens) / p.block_size
    credit = p.overlap_score_credit * decay * device_blocks + p.host_cache_hit_weight * host_blocks
    return p.prefill_load_scale * max(0.0, raw_prefill - credit) + decode_blocks \
        + p.decode_active_request_weight * active_requests


def dynamo_costs(snapshot: ReplicaSnapshot, prompt_tokens: float, params: DynamoKvParams = DynamoKvParams()) -> list[float]:
    """Every replica's cost for a request of ``prompt_tokens`` (each snapshot field read once)."""
    p, prompt = params, float(prompt_tokens)
    bs = p.block_size
    prefill = snapshot.floats("prefill_tokens")
    match = snapshot.floats("prefix_match")
    kv = snapshot.floats("kv_blocks")
    active = [w + r for w, r in zip(snapshot.floats("waiting"), snapshot.floats("running"), strict=True)]
    prompt_blocks = math.floor(prompt / bs)
    request_blocks = max(math.ceil(prompt / bs), 1)
    least_prefill = min(prefill)
    costs = []
    for tokens, share, blocks, requests in zip(prefill, match, kv, active, strict=True):
        held = math.floor(round(min(max(share, 0.0), 1.0) * prompt) / bs)  # whole blocks of the prompt held
        decay = 1.0
        if p.overlap_score_credit_decay > 0:
            excess = max(tokens - least_prefill, 0.0) / bs / request_blocks
            decay = 1.0 / (1.0 + p.overlap_score_credit_decay * excess)
        costs.append(dynamo_cost(tokens, prompt, held, blocks + max(prompt_blocks - held, 0), requests, p, decay=decay))
    return costs


def softmax_pick(costs: list[float], temperature: float, rng: np.random.Generator) -> int:
    """A replica drawn with probability proportional to ``exp(-(cost - min) / ((max - min) * temperature))``."""
    low, high = min(costs), max(costs)
    if high == low:
        return int(rng.integers(len(costs)))
    weights = [math.exp(-(c - low) / ((high - low) * temperature)) for c in costs]
    draw, total = float(rng.random()) * sum(weights), 0.0
    for i, w in enumerate(weights):
        total += w
        if draw < total:
            return i
    return len(costs) - 1


@register_policy("dynamo_kv")
class DynamoKv(HeuristicPolicy):
    """Dynamo's KV router: uncached prefill blocks plus decode blocks, the lowest cost (or a softmax draw)."""

    Params = DynamoKvParams

    def __init__(self, params: DynamoKvParams | None = None) -> None:
        super().__init__(params or DynamoKvParams())

    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        costs = dynamo_costs(snapshot, prompt_tokens, self.params)
        if self.params.router_temperature > 0:
            return softmax_pick(costs, self.params.router_temperature, self.rng)
        return argmin_random(costs, self.rng)
