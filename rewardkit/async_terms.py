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


class CallCancelled(Exception):
    """Raised in the worker evaluating a cancelled ``acall``, so that its transaction puts state back."""


class AsyncCall:
    """One ``acall``: its terms run on the caller's ``loop``; the call's worker thread computes
    the rest and, before keeping any state change, asks the loop (:meth:`commit`), which keeps
    it only if the call was not cancelled. Everything the loop side does runs on the loop's own
    thread, so a cancellation either comes before the commit (nothing changes) or not at all.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready: asyncio.Future[Any] = loop.create_future()  # (output, step) once computed
        self.decision: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._started: list[concurrent.futures.Future[list[Any]]] = []
        self.cancelled = False

    def start(self, coroutines: Sequence[Awaitable[Any]]) -> "concurrent.futures.Future[list[Any]]":
        """Start the call's asynchronous terms on the caller's loop (a :data:`Starter`)."""
        with self._lock:
            if self.cancelled:
                for coroutine in coroutines:
                    getattr(coroutine, "close", lambda: None)()
                raise CallCancelled("acall cancelled")
            future = asyncio.run_coroutine_threadsafe(gather_terms(coroutines), self.loop)
            self._started.append(future)
            return future

    def commit(self, result: Any) -> None:
        """In the worker, state computed but not kept: hand ``result`` to the loop and wait for its
        decision; :class:`CallCancelled` when the call was cancelled meanwhile."""
        try:
            self.loop.call_soon_threadsafe(self._deliver, result)
        except RuntimeError:  # the loop is closed: nobody is waiting for this call
            raise CallCancelled("acall's event loop closed") from None
        while True:
            try:
                if self.decision.result(timeout=1.0):
                    return
                raise CallCancelled("acall cancelled")
            except concurrent.futures.TimeoutError:
                if self.loop.is_closed() or not self.loop.is_running():
                    raise CallCancelled("acall's event loop stopped") from None

    def _deliver(self, result: Any) -> None:
        if not self.ready.done():
            self.ready.set_result(result)

    def keep(self) -> None:
        """On the loop: the call returns its result; the worker keeps the state changes."""
        self.decision.set_result(True)

    def cancel(self) -> None:
        """On the loop (the call was cancelled or failed): stop its terms, drop its state changes."""
        with self._lock:
            self.cancelled = True
            started = list(self._started)
        for future in started:
            future.cancel()
        if not self.decision.done():
            self.decision.set_result(False)


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
