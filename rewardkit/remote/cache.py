"""``ScoreCache``: scores by content (prompt and completion), least recently used out first."""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable


class ScoreCache:
    """An LRU map from an item's content to its score, holding at most ``size`` entries.

    ``size == 0`` turns caching off: :meth:`get` always misses and :meth:`put` keeps nothing.
    Keys are compared by value (the exact prompt and completion strings), never by hash alone.
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.size = size
        self._entries: OrderedDict[Hashable, float] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.size > 0

    def get(self, key: Hashable) -> float | None:
        """The cached score of ``key`` (marking it recently used), or ``None``."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: float) -> None:
        """Remember ``value`` for ``key``, evicting the least recently used entry when full."""
        if not self.size:
            return
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries
