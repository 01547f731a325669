"""How long one proxied request may take: connect, first byte, whole request, and the gateway's drain.

Three deadlines, because one per-read timeout both cut slow-but-healthy answers and let a trickling
backend run forever (issue 31): ``connect_s`` bounds opening a connection (a backend that cannot
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
        self._scopes: set[asyncio.Timeout] = set()

    @property
    def begun(self) -> bool:
        return self.at < math.inf

    def begin(self, seconds: float) -> None:
        """Requests get ``seconds`` more (call on the event loop's thread)."""
        self.at, self.seconds = min(self.at, time.monotonic() + seconds), seconds
        at = loop_time(self.at)
        for scope in list(self._scopes):
            when = scope.when()
            if when is None or when > at:
                scope.reschedule(at)


class RequestClock:
    """One request's deadlines, counted from its arrival (:meth:`bound` runs a step under one)."""

    def __init__(self, deadlines: Deadlines, drain: Drain) -> None:
        self.deadlines, self.drain = deadlines, drain
        self.start = time.monotonic()
        self.total_at = self.start + deadlines.total_s
        self.first_byte_at = self.total_at

    def attempt_started(self) -> None:
        """An attempt was sent: its first byte is due within ``first_byte_s`` (and the whole deadline)."""
        if self.deadlines.first_byte_s is not None:
            self.first_byte_at = min(self.total_at, time.monotonic() + self.deadlines.first_byte_s)

    def bound(self, phase: str) -> "_Bound":
        """``async with clock.bound(phase):`` runs the body under the ``first_byte`` or ``total`` deadline
        (and the drain's end); :class:`DeadlineExceeded` names the one that passed."""
        return _Bound(self, phase)

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


class _Bound:
    """One step under a deadline: an ``asyncio.Timeout`` the drain can pull in (a class, not a generator:
    three of these run per request)."""

    __slots__ = ("clock", "phase", "scope")

    def __init__(self, clock: RequestClock, phase: str) -> None:
        self.clock, self.phase = clock, phase
        self.scope: asyncio.Timeout | None = None

    async def __aenter__(self) -> None:
        clock = self.clock
        at = clock.first_byte_at if self.phase == "first_byte" else clock.total_at
        self.scope = asyncio.timeout_at(loop_time(min(at, clock.drain.at)))
        await self.scope.__aenter__()
        clock.drain._scopes.add(self.scope)

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.clock.drain._scopes.discard(self.scope)
        try:
            await self.scope.__aexit__(kind, exc, tb)
        except TimeoutError:
            raise self.clock.exceeded(self.phase) from None


def loop_time(monotonic_at: float) -> float | None:
    """A ``time.monotonic`` instant on the running event loop's clock (uvloop's has its own origin);
    None for never."""
    if math.isinf(monotonic_at):
        return None
    return asyncio.get_running_loop().time() + (monotonic_at - time.monotonic())
