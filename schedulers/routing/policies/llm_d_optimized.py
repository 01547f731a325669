"""``llm_d_optimized``: llm-d's recommended setup as it ships, its prefix-cache affinity filter then its token-load scorer.

Follows llm-d-router v0.10.0 (``pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity/plugin.go``
and its README, ``pkg/epp/framework/plugins/scheduling/scorer/tokenload/token_load.go``, the
``inflight-load-producer`` that feeds both) and the optimized-baseline guide of llm-d/llm-d
(``guides/optimized-baseline/router/optimized-baseline.values.yaml``): one profile of
``prefix-cache-affinity-filter`` and ``token-load-scorer``, every plugin at its built-in defaults, and
the ``max-score-picker`` the loader adds to a profile that names no picker. The rule:

1. **The filter.** A replica is *sticky* when the share of the prompt its prefix cache holds is at
   least ``affinity_threshold`` (0.80). The filter keeps the sticky replicas, except that it keeps
   every replica when: a draw falls under ``exploration_probability`` (0: never); none is sticky; or
   the best sticky replica's estimated TTFT exceeds the best non-sticky one's by more than
   ``max_ttft_penalty_ms`` (18,000 ms; 0: always stick). The TTFT estimate is the filter's default
   ``prefillThroughput`` source: prompt tokens in flight / ``peak_prefill_tokens_per_s`` (15,928
   tokens/s, llm-d's figure for Qwen3-32B on two H100s) x 1000.
2. **The scorer.** Each replica kept scores ``1 - min(1, load / queue_threshold_tokens)`` with
   ``load`` = prompt tokens in flight + the arriving prompt's tokens the replica has not cached, and
   ``queue_threshold_tokens`` 4,194,304 (4 Mi: 128 requests of 32K). The max-score picker shuffles
   and takes the highest: the least load (capped at the threshold), ties at random.

The code is :mod:`schedulers.routing.policies.prefix`'s (``affinity_filter``, ``token_load``); only
the defaults differ from ``affinity_token_load``, which keeps the values of the filter's README
example (exploration 0.01, penalty 5,000 ms: the filter's code defaults until its TTFT gate was
based on the prefill throughput, commits afdf6bcf5, 4931d26a6 and ff37a5592, first released in
llm-d-router v0.9.0) because every earlier result here was measured with them.

Where it differs from llm-d, and why:

- *Prompt tokens in flight* are the snapshot's ``prefill_tokens``. llm-d's in-flight-load producer
  adds each dispatched request's *uncached* prompt tokens and releases them at its first streamed
  token. In the simulator ``prefill_tokens`` are the prompt tokens not yet computed, already cut to
  the uncached part, so the two agree; the gateway and the Ray router count a request's whole prompt
  until its first token (the snapshot does not say how much of a queued prompt a replica had cached).
- The scorer's share of the arriving prompt a replica lacks is ``1 - prefix_match`` (the router's
  own block mirror, as llm-d's approximate prefix producer); where nothing tracks prefixes
  (a simulator run without shared prefixes) the match is 0 everywhere, no replica is sticky, and the
  rule is least prompt tokens in flight plus the prompt.
- ``peak_prefill_tokens_per_s`` keeps llm-d's H100 figure, so on the small engines here the TTFT gate
  rarely opens (set it to the replicas' own rate: ``llm_d_optimized:peak_prefill_tokens_per_s=2000``).
- The exploration draw comes from the policy's seeded generator (one per decision with more than one
  replica), not Go's global one; the filter's ``latencyPredictor`` TTFT source is not modelled.

Parameters are set wherever a router is named: ``llm_d_optimized:affinity_threshold=0.65``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..policy import HeuristicPolicy, register_policy
from .prefix import AffinityTokenLoad, AffinityTokenLoadParams


@dataclass(frozen=True)
class LlmDOptimizedParams(AffinityTokenLoadParams):
    """The affinity filter's and token-load scorer's built-in defaults in llm-d-router v0.10.0."""

    #: the chance of keeping every replica for exploration (``explorationProbability``, 0 since v0.9.0).
    exploration_probability: float = 0.0
    #: stickiness is dropped when the best sticky replica's estimated TTFT is this many ms worse than the
    #: best other one's (``maxTTFTPenaltyMs``, 18,000 since v0.9.0); 0: always stick.
    max_ttft_penalty_ms: float = 18000.0


@register_policy("llm_d_optimized")
class LlmDOptimized(AffinityTokenLoad):
    """llm-d's optimized baseline: prefix-cache affinity filter, then the least token load (current defaults)."""

    Params = LlmDOptimizedParams

    def __init__(self, params: LlmDOptimizedParams | None = None) -> None:
        HeuristicPolicy.__init__(self, params or LlmDOptimizedParams())
