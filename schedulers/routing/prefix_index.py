"""``PrefixIndex``: a router's mirror of what each replica's prefix cache likely holds.

Like SGLang's cache-aware router and llm-d's prefix scorer in their approximate mode, the router
does not ask the engines: it remembers which prompts it sent where. A prompt is cut into blocks of
``block_size`` items (token ids, or characters of a text prompt) and each full block is identified
by a hash chained over all blocks before it, so a block hash stands for the whole prefix up to it,
as in vLLM's own prefix cache. Each replica keeps the hashes it was sent, least recently used first,
bounded by ``capacity_blocks`` (an engine evicts too). :meth:`PrefixIndex.match` gives, per replica,
the share of a new prompt covered by its longest remembered prefix (``ReplicaSnapshot.prefix_match``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Sequence

import numpy as np


class PrefixIndex:
    """Per-replica LRU sets of chained prompt-block hashes."""

    def __init__(self, num_replicas: int, block_size: int = 32, capacity_blocks: int | Sequence[int] = 4096) -> None:
        """``capacity_blocks``: one bound for every replica, or one per replica (replicas of different sizes)."""
        per_replica = [capacity_blocks] * num_replicas if isinstance(capacity_blocks, int) else list(capacity_blocks)
        if num_replicas < 1 or block_size < 1 or len(per_replica) != num_replicas or min(per_replica) < 1:
            raise ValueError(f"expected num_replicas, block_size and capacity_blocks >= 1 (one capacity, or one per "
                             f"replica), got {num_replicas}, {block_size}, {capacity_blocks}")
        self.block_size = int(block_size)
        #: each replica's bound, in blocks
        self.capacities = [int(c) for c in per_replica]
        self.capacity_blocks = min(self.capacities)
        self._blocks: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(num_replicas)]

    @property
    def num_replicas(self) -> int:
        return len(self._blocks)

    def block_hashes(self, prompt: Sequence[Hashable]) -> list[int]:
        """Chained hashes of the prompt's full blocks (a partial last block is not cached by engines either)."""
        out: list[int] = []
        prev = 0
        size = self.block_size
        items = prompt if isinstance(prompt, tuple) else tuple(prompt)  # a tuple's slices are tuples: one copy per block
        for start in range(0, len(items) - size + 1, size):
            prev = hash((prev, items[start:start + size]))
            out.append(prev)
        return out

    def matched_blocks(self, hashes: Sequence[int]) -> np.ndarray:
        """Per replica, how many leading blocks of ``hashes`` it holds."""
        return np.array(self._matched_counts(hashes), dtype=np.float64)

    def _matched_counts(self, hashes: Sequence[int]) -> list[int]:
        counts = []
        for blocks in self._blocks:
            n = 0
            for h in hashes:
                if h not in blocks:
                    break
                n += 1
            counts.append(n)
        return counts

    def match(self, prompt: Sequence[Hashable], hashes: Sequence[int] | None = None) -> np.ndarray:
        """Per replica, the share (0-1) of ``prompt`` its longest remembered prefix covers."""
        return np.array(self.shares(prompt, hashes), dtype=np.float64)

    def shares(self, prompt: Sequence[Hashable], hashes: Sequence[int] | None = None) -> list[float]:
        """:meth:`match` as a list of Python floats (what a router's decision reads)."""
        if len(prompt) == 0:
            return [0.0] * self.num_replicas
        hashes = self.block_hashes(prompt) if hashes is None else hashes
        size, length = self.block_size, len(prompt)
        return [min(float(n) * size / length, 1.0) for n in self._matched_counts(hashes)]

    def insert(self, replica: int, prompt: Sequence[Hashable], hashes: Sequence[int] | None = None) -> None:
        """Remember that ``prompt`` was sent to ``replica`` (its blocks become most recently used)."""
        blocks = self._blocks[replica]
        for h in self.block_hashes(prompt) if hashes is None else hashes:
            blocks[h] = None
            blocks.move_to_end(h)
        bound = self.capacities[replica]
        while len(blocks) > bound:
            blocks.popitem(last=False)

    def forget(self, replica: int) -> None:
        """Drop everything remembered for ``replica`` (it restarted: its cache is empty)."""
        self._blocks[replica].clear()

    def size(self, replica: int) -> int:
        """Blocks remembered for ``replica``."""
        return len(self._blocks[replica])
