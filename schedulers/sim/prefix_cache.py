"""Prefix caching in the simulator: each replica keeps the prompt blocks it computed, and reuses them.

Vidur models no prefix cache: every request prefills its whole prompt. With an env YAML's
``shared_prefix`` (:class:`~schedulers.shared.requests.SharedPrefix`) each request gets a
prompt of token ids, built exactly as ``rewardkit loadgen --env`` builds it for the same seed
(:func:`schedulers.shared.requests.shared_prefix_requests`: one of ``groups`` system prompts, then the conversation's earlier
turns, then its own part), and :class:`SimulatedPrefixCache` follows two things per replica:

``engine``
    what the replica's prefix cache holds, as vLLM's does: full blocks of ``block_size`` tokens
    named by a hash chained over the blocks before them, least recently used evicted first, at
    most the replica's KV-cache blocks (its replica group's ``kv_blocks``, else ``kv_blocks`` in the env
    YAML, else Vidur's memory plan).
    A prompt's blocks enter the cache when its prefill completes (vLLM caches computed blocks);
    a hit refreshes them.
``router``
    what a router can know without asking the engines (SGLang's cache-aware tree, llm-d's
    approximate prefix scorer, the gateway's :class:`~schedulers.routing.prefix_index.PrefixIndex`):
    the prompts it sent to each replica, remembered when sent. ``ReplicaSnapshot.prefix_match`` is
    read from this mirror, so a router sees in the simulator what it sees live.

When a request is routed to a replica, the leading blocks that replica's cache holds are taken as
computed: the request's ``num_prefill_tokens`` becomes the uncached rest before Vidur schedules it
(at least one token is always computed, as vLLM recomputes the last token of a fully cached
prompt), so its prefill, its KV-cache blocks and every load figure routers read shrink by the hit.
Latencies stay honest: TTFT is still measured from arrival to the end of that (shorter) prefill.
Not modelled: the attention over the cached context that a partial prefill still reads (Vidur
prices a prefill chunk by its own tokens), and the pinning of blocks that running requests use.
:attr:`SimulatedPrefixCache.prompt_tokens` and :attr:`~SimulatedPrefixCache.cached_tokens` count the
whole prompts and their cached parts for ``prefix_hit_rate`` (cached prompt tokens over all prompt tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..routing.prefix_index import PrefixIndex
from ..shared.arrivals import Arrivals
from ..shared.requests import shared_prefix_requests
from .env_config import EnvConfig


@dataclass(frozen=True)
class PromptedArrivals:
    """One episode's arrivals with prompts: times, lengths, and each prompt's chained block hashes."""

    arrivals: Arrivals
    block_hashes: tuple[tuple[int, ...], ...]
    #: leading tokens each prompt shares with an earlier request's prompt (system prompt + history).
    shared_tokens: np.ndarray


def shared_prefix_workload(cfg: EnvConfig, arrivals: Arrivals, seed: int, block_size: int) -> PromptedArrivals:
    """``arrivals`` with the prompts of ``cfg.shared_prefix`` for ``seed``
    (:func:`schedulers.shared.requests.shared_prefix_requests`, which ``rewardkit loadgen --env`` sends too)."""
    specs = shared_prefix_requests(cfg, seed)
    index = PrefixIndex(1, block_size)
    prompted = Arrivals(
        arrivals.arrived_at,
        np.array([s.prompt_tokens for s in specs], dtype=np.int64),
        np.array([s.output_tokens for s in specs], dtype=np.int64),
    )
    return PromptedArrivals(prompted, tuple(tuple(index.block_hashes(s.prompt_ids)) for s in specs),
                            np.array([s.shared_tokens for s in specs], dtype=np.int64))


class SimulatedPrefixCache:
    """Per-replica prefix caches of a simulated cluster and the router's mirror of them (see the module doc)."""

    def __init__(self, num_replicas: int, capacity_blocks: int | Sequence[int], block_size: int) -> None:
        self.block_size = int(block_size)
        self.engine = PrefixIndex(num_replicas, block_size, capacity_blocks)
        self.router = PrefixIndex(num_replicas, block_size, capacity_blocks)
        self._hashes: dict[int, Sequence[int]] = {}
        self._prompt_len: dict[int, int] = {}
        self._placed: dict[int, int] = {}
        #: whole prompt tokens and cached prompt tokens of the requests routed so far.
        self.prompt_tokens = 0
        self.cached_tokens = 0
        #: request id -> cached prompt tokens at routing.
        self.cached_by_request: dict[int, int] = {}

    def add_request(self, request: Any, block_hashes: Sequence[int]) -> None:
        """Know ``request``'s prompt blocks (before it is routed)."""
        self._hashes[request.id] = block_hashes
        self._prompt_len[request.id] = int(request.num_prefill_tokens)

    def match(self, request: Any) -> np.ndarray:
        """Per replica, the share of ``request``'s prompt the router's mirror says it holds."""
        hashes = self._hashes.get(request.id)
        if not hashes:
            return np.zeros(self.router.num_replicas)
        prompt = self._prompt_len[request.id]
        return np.minimum(self.router.matched_blocks(hashes) * self.block_size / prompt, 1.0)

    def router_blocks(self) -> np.ndarray:
        """Per replica, the blocks the router's mirror holds (SGLang's tree size)."""
        return np.array([self.router.size(i) for i in range(self.router.num_replicas)], dtype=np.float64)

    def route(self, request: Any, replica: int) -> int:
        """``request`` goes to ``replica``: its cached blocks there are not prefilled again; returns the cached tokens."""
        hashes = self._hashes.get(request.id, ())
        prompt = self._prompt_len.get(request.id, int(request.num_prefill_tokens))
        hit_blocks = int(self.engine.matched_blocks(hashes)[replica]) if hashes else 0
        cached = min(hit_blocks, (prompt - 1) // self.block_size) * self.block_size
        if cached:
            request._num_prefill_tokens = prompt - cached
        if hashes:
            self.router.insert(replica, (), hashes)
        self._placed[request.id] = replica
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.cached_by_request[request.id] = cached
        return cached

    def prefill_done(self, request: Any) -> None:
        """``request``'s prefill completed: its prompt blocks enter (or refresh) its replica's cache."""
        replica = self._placed.get(request.id)
        hashes = self._hashes.get(request.id)
        if replica is not None and hashes:
            self.engine.insert(replica, (), hashes)

    @property
    def hit_rate(self) -> float:
        """Cached prompt tokens over all prompt tokens routed so far (0 before any)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
