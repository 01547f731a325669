"""How long one proxied request may take: connect, first byte, whole request, and the gateway's drain.

Three deadlines, because one per-read timeout both cut slow-but-healthy answers and let a trickling
backend run forever: ``connect_s`` bounds opening a connection (a backend that cannot
be reached is dead: it is marked unhealthy and the request moves); ``first_byte_s`` bounds the wait
for an attempt's response headers (nothing reached the client yet, so the request may move once);
``total_s`` bounds the whole request from its arrival, retries and streaming included (then the
client gets a 504 or an error event; a slow answer does not make a backend unhealthy, health checks
decide that). At SIGTERM, :class:`Drain` pulls every running deadline in to the drain's end, so that
requests outlasting ``--drain`` end with an answer from the gateway instead of being killed.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deadlines:
    """Seconds allowed to connect, to get an attempt's first byte, and for the whole request."""

    connect_s: float = 2.0
    #: None: as long as the whole request (a plain response's headers come with its last token)
    first_byte_s: float | None = None
    total_s: float = 300.0


class DeadlineExceeded(Exception):
    """A deadline passed; ``which`` is ``first_byte``, ``total`` or ``drain``."""

    def __init__(self, which: str, seconds: float) -> None:
        super().__init__(f"the {which.replace('_', '-')} deadline ({seconds:g} s) passed")
        self.which, self.seconds = which, seconds


class Drain:
    """The gateway's shutdown: once begun, no running or later deadline lies past its end."""

    def __init__(self) -> None:
        self.at = math.inf
        self.seconds = math.inf
        #: the clocks of requests in flight with a timer set (each leaves at its :meth:`RequestClock.close`)
        self.clocks: set[RequestClock] = set()

    @property
    def begun(self) -> bool:
        return self.at < math.inf

    def begin(self, seconds: float) -> None:
        """Requests get ``seconds`` more (call on the event loop's thread)."""
        self.at, self.seconds = min(self.at, time.monotonic() + seconds), seconds
        for clock in list(self.clocks):
            clock.pull_in(self.at)


class RequestClock:
    """One request's deadlines, counted from its arrival, on one timer per request (a timeout scope per
    step cost more than the rest of the hardening): ``async with clock.bound(phase):`` runs a step under
    the ``first_byte`` or ``total`` deadline and the drain's end, and :class:`DeadlineExceeded` names the
    one that passed. Steps run one at a time in the request's task; :meth:`close` at the request's end."""

    __slots__ = ("deadlines", "drain", "start", "total_at", "first_byte_at", "_loop", "_task", "_timer",
                 "_timer_at", "_phase", "_next", "_fired", "_cancelling")

    def __init__(self, deadlines: Deadlines, drain: Drain) -> None:
        self.deadlines, self.drain = deadlines, drain
        self.start = time.monotonic()
        self.total_at = self.start + deadlines.total_s
        self.first_byte_at = self.total_at
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf  # the ``time.monotonic`` instant the timer is set for
        self._phase: str | None = None  # the step running under a deadline
        self._next = "total"
        self._fired = False  # the timer cancelled the task in this step
        self._cancelling = 0

    def attempt_started(self) -> None:
        """An attempt was sent: its first byte is due within ``first_byte_s`` (and the whole deadline)."""
        if self.deadlines.first_byte_s is not None:
            self.first_byte_at = min(self.total_at, time.monotonic() + self.deadlines.first_byte_s)

    def bound(self, phase: str) -> "RequestClock":
        """``async with clock.bound(phase):`` runs the body under the ``first_byte`` or ``total`` deadline
        (and the drain's end); :class:`DeadlineExceeded` names the one that passed."""
        self._next = phase
        return self

    async def __aenter__(self) -> None:
        if self._phase is not None:
            raise RuntimeError("a request's deadline steps run one at a time")
        phase = self._next
        at = min(self.first_byte_at if phase == "first_byte" else self.total_at, self.drain.at)
        if time.monotonic() >= at:
            raise self.exceeded(phase)
        if self._timer is None or at != self._timer_at:
            self._arm(at)
        task = self._task = asyncio.current_task()
        self._cancelling = task.cancelling()
        self._phase = phase

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        phase, self._phase = self._phase, None
        if self._fired:
            self._fired = False
            if self._task.uncancel() <= self._cancelling and kind is not None \
                    and issubclass(kind, asyncio.CancelledError):
                raise self.exceeded(phase) from None

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        elif self._loop is None:
            self._loop = asyncio.get_running_loop()
        self.drain.clocks.add(self)
        self._timer_at = at
        # uvloop's clock has its own origin: the instant is moved onto it
        self._timer = self._loop.call_at(self._loop.time() + (at - time.monotonic()), self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self._phase is not None and not self._fired:
            self._fired = True
            self._task.cancel()

    def pull_in(self, at: float) -> None:
        """The drain began: the running timer rings by ``at`` (later steps take the drain's end on their own)."""
        if self._timer is not None and at < self._timer_at:
            self._arm(at)

    def close(self) -> None:
        """The request is over: its timer goes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.drain.clocks.discard(self)

    def exceeded(self, phase: str) -> DeadlineExceeded:
        """The deadline that has passed for a step in ``phase``."""
        if time.monotonic() >= self.drain.at - 1e-3:
            return DeadlineExceeded("drain", self.drain.seconds)
        if phase == "first_byte" and self.first_byte_at < self.total_at:
            return DeadlineExceeded("first_byte", float(self.deadlines.first_byte_s or 0.0))
        return DeadlineExceeded("total", self.deadlines.total_s)

    def remaining(self) -> float:
        """Seconds left of the whole request (or the drain)."""
        return min(self.total_at, self.drain.at) - time.monotonic()
