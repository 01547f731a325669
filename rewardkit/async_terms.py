"""Running a call's asynchronous terms (components with ``asynchronous = True``, e.g. remote scorers).

The composer starts every asynchronous term of a call at once (:func:`gather_terms`), computes the
cheap terms while they are in flight, then waits for them (``start(...)`` returns a
``concurrent.futures.Future``). Synchronous calls run the coroutines on an :class:`EventLoopThread`:
a private event loop in a background thread owned by the composer, so ``composer(ctx)`` works
from plain code and from inside a running event loop alike. ``await composer.acall(ctx)`` runs
them on the caller's loop instead (see ``RewardComposer.acall``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Sequence

#: ``start(coroutines) -> Future`` of their results, in order (how a call launches its async terms).
Starter = Callable[[Sequence[Awaitable[Any]]], "concurrent.futures.Future[list[Any]]"]


async def gather_terms(coroutines: Sequence[Awaitable[Any]]) -> list[Any]:
    """Await ``coroutines`` concurrently and return their results in order. When some fail, the
    error raised is that of the first failing term in config order (not the first to fail in
    time), so the same failure reads the same on every run; the others finish first (each term
    bounds its own time)."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except BaseException:  # this call was cancelled (composer.close(), a cancelled acall)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # let the cancelled ones clean up
        raise
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


def on_loop(loop: asyncio.AbstractEventLoop) -> Starter:
    """A starter that runs the coroutines on ``loop`` (running in another thread than the caller)."""

    def start(coroutines: Sequence[Awaitable[Any]]) -> "concurrent.futures.Future[list[Any]]":
        return asyncio.run_coroutine_threadsafe(gather_terms(coroutines), loop)

    return start


class EventLoopThread:
    """A private event loop in a daemon thread, created at the first :meth:`start`, ended by :meth:`close`.

    Holds no reference to the composer, so a finalizer can close it when the composer goes away.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, coroutines: Sequence[Awaitable[Any]]) -> "concurrent.futures.Future[list[Any]]":
        """Run ``coroutines`` concurrently on the background loop; a future of their results."""
        return asyncio.run_coroutine_threadsafe(gather_terms(coroutines), self._running_loop())

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="rewardkit-async-terms", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    @property
    def started(self) -> bool:
        """Whether the background loop is running (it is created lazily)."""
        return self._loop is not None

    def close(self) -> None:
        """Stop the loop (pending work is cancelled) and join its thread; a later start makes a new one."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return

        async def shutdown() -> None:
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await loop.shutdown_asyncgens()

        if thread is not threading.current_thread():
            try:
                asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
