"""``score_items``: one call's items scored in batches sent concurrently, within a wall-time budget.

Items found in the cache, and repeats of an item already in the call, are not sent (when the
cache is on): the same prompt and completion are scored once. The remaining distinct items go
out in batches of ``batch_size``, all started at once (the client keeps at most N in flight);
batches still running when ``max_call_s`` passes are cancelled and their items count as failed.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Hashable, NamedTuple, Sequence

from .cache import ScoreCache
from .http import RequestFailed
from .stats import CallStats


class Unscored(NamedTuple):
    """An item the scorer answered for but without a usable score (a judge's answer with no label)."""

    reason: str


#: scores one batch of item keys, in order: a float per item, or :class:`Unscored`.
ScoreBatch = Callable[[list[Hashable]], Awaitable[Sequence["float | Unscored"]]]


class Outcome(NamedTuple):
    """Per item, its score or ``None`` (not scored); and why the first unscored item was not."""

    values: list[float | None]
    reason: str | None


async def score_items(keys: Sequence[Hashable], score_batch: ScoreBatch, *, cache: ScoreCache, batch_size: int,
                      max_call_s: float | None, stats: CallStats) -> Outcome:
    """Score every key (see the module doc); new scores go into the cache.

    A batch that fails (:class:`~rewardkit.remote.http.RequestFailed`) leaves its items ``None``;
    any other exception propagates. Cancelling the call cancels the batches in flight.
    """
    values: list[float | None] = [None] * len(keys)
    todo: dict[Hashable, list[int]] = {}
    distinct: list[tuple[Hashable, list[int]]] = []
    for i, key in enumerate(keys):
        if not cache.enabled:
            distinct.append((key, [i]))
            continue
        hit = cache.get(key)
        if hit is not None:
            values[i] = hit
            stats.cache_hits += 1
        elif key in todo:
            todo[key].append(i)
            stats.cache_hits += 1
        else:
            todo[key] = [i]
            distinct.append((key, todo[key]))
    batches = [distinct[j:j + batch_size] for j in range(0, len(distinct), batch_size)]
    tasks = [asyncio.ensure_future(score_batch([key for key, _ in batch])) for batch in batches]
    try:
        if tasks:
            await asyncio.wait(tasks, timeout=max_call_s)
    finally:
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    reason: str | None = None
    for batch, task in zip(batches, tasks, strict=True):
        if task.cancelled():
            reason = reason or f"wall-time budget spent (max_call_s={max_call_s:g} s per call)"
            continue
        exc = task.exception()
        if isinstance(exc, RequestFailed):
            reason = reason or exc.reason
            continue
        if exc is not None:
            raise exc
        scores = task.result()
        for (key, positions), score in zip(batch, scores, strict=True):
            if isinstance(score, Unscored):
                stats.failures += 1
                reason = reason or score.reason
                continue
            cache.put(key, score)
            for i in positions:
                values[i] = score
    return Outcome(values, reason)
