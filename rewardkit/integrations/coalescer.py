"""``Coalescer``: concurrent requests scored by one composer call.

OpenRLHF 0.11 posts one query per request, many at once, and veRL's reward loop scores the samples
of a chunk as concurrent coroutines. While a composer call runs, the requests that arrive wait in
a queue; the next call takes every waiting request evaluated at the same step (up to
``max_batch`` completions) as one batch. No timer: a request alone is scored at once, and under
load the batch grows by itself. A merged batch refused for its inputs (one request's bad
column) is scored request by request, so only the bad request fails; a failing call changes
nothing in the composer, so the retry is exact.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import InvalidInputError, MissingInputError, NonFiniteInputError
from .text_scoring import ScoredBatch, TextScorer

INPUT_ERRORS = (InvalidInputError, MissingInputError, NonFiniteInputError)


@dataclass
class Scored:
    """One request's part of a composer call: samples ``start:stop`` of ``batch``, evaluated at ``step``."""

    batch: ScoredBatch
    start: int
    stop: int
    step: int


@dataclass
class _Job:
    ctx: dict[str, Any]
    n: int
    step: int | None
    future: asyncio.Future

    @property
    def group(self) -> tuple[int | None, frozenset[str]]:
        return self.step, frozenset(self.ctx)


class Coalescer:
    """Scores contexts through ``scorer``, merging those that wait at the same time into one call.

    ``on_batch(completions, requests, seconds)`` is told about every composer call."""

    def __init__(self, scorer: TextScorer, max_batch: int,
                 on_batch: Callable[[int, int, float], None] | None = None) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch: expected an integer >= 1, got {max_batch}")
        self.scorer = scorer
        self.max_batch = max_batch
        self.on_batch = on_batch
        self._queue: deque[_Job] = deque()
        self._worker: asyncio.Task | None = None
        self._cancelled: BaseException | None = None

    async def score(self, ctx: dict[str, Any], n: int, step: int | None) -> Scored:
        """This context's rewards, from the next composer call that can take it."""
        if self._cancelled is not None:
            raise self._cancelled
        job = _Job(ctx, n, step, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await job.future

    async def cancel(self, error: BaseException) -> None:
        """Cancel the composer call in progress (a cancelled call changes nothing in the composer)
        and fail its requests, the queued ones and any later one with ``error``; returns once the
        call has let go of the composer."""
        self._cancelled = error
        worker = self._worker
        if worker is not None and not worker.done():
            worker.cancel()
            await asyncio.wait([worker])
        while self._queue:
            _fail(self._queue.popleft(), error)

    @property
    def waiting(self) -> int:
        """Requests queued for the next call."""
        return len(self._queue)

    async def _drain(self) -> None:
        while self._queue:
            await self._run(self._take())

    def _take(self) -> list[_Job]:
        """The head of the queue and the jobs right behind it that share its step and keys, up to max_batch."""
        first = self._queue.popleft()
        jobs, size = [first], first.n
        while self._queue and self._queue[0].group == first.group and size + self._queue[0].n <= self.max_batch:
            job = self._queue.popleft()
            jobs.append(job)
            size += job.n
        return jobs

    async def _run(self, jobs: list[_Job]) -> None:
        try:
            await self._settle(jobs)
        except asyncio.CancelledError:  # cancel(): the requests get its error; the loop ending: they are cancelled
            for job in jobs:
                if self._cancelled is not None:
                    _fail(job, self._cancelled)
                else:
                    job.future.cancel()
            raise

    async def _settle(self, jobs: list[_Job]) -> None:
        jobs = [job for job in jobs if not job.future.done()]  # a client that left takes no part
        if not jobs:
            return
        try:
            batch, step = await self._call(jobs)
        except INPUT_ERRORS as exc:
            if len(jobs) == 1:
                _fail(jobs[0], exc)
                return
            for job in jobs:  # find the request at fault: each alone (a failed call changed nothing)
                await self._settle([job])
            return
        except Exception as exc:  # noqa: BLE001 - every waiting request gets the call's error
            for job in jobs:
                _fail(job, exc)
            return
        start = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(Scored(batch, start, start + job.n, step))
            start += job.n

    async def _call(self, jobs: list[_Job]) -> tuple[ScoredBatch, int]:
        n = sum(job.n for job in jobs)
        ctx = jobs[0].ctx if len(jobs) == 1 else merge([job.ctx for job in jobs])
        step = jobs[0].step if jobs[0].step is not None else self.scorer.composer.step
        began = time.perf_counter()
        batch = await self.scorer.ascore(ctx, n, jobs[0].step)
        if self.on_batch is not None:
            self.on_batch(n, len(jobs), time.perf_counter() - began)
        return batch, step


def merge(contexts: list[dict[str, Any]]) -> dict[str, Any]:
    """Contexts with the same keys, one after another: arrays concatenated, lists joined."""
    out: dict[str, Any] = {}
    for key in contexts[0]:
        parts = [ctx[key] for ctx in contexts]
        if all(isinstance(p, np.ndarray) for p in parts):
            out[key] = np.concatenate(parts)
        else:
            out[key] = [v for p in parts for v in (p.tolist() if isinstance(p, np.ndarray) else p)]
    return out


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(exc)
