"""Bounds on one run of the objective: a time limit, and how user code may stop it.

``time_limit(seconds)`` raises :class:`TrialTimeout` in the running objective when it has run for
``seconds`` (a ``SIGALRM`` timer, repeated every second in case the objective swallows it). It is
a ``BaseException``, so that an objective's own ``except Exception`` does not hide it. It works in
the main thread of any process, which is where every trial runs: in the command, in each
``--workers`` process and in each process of the evaluation pool. A hang inside a C call that
never returns to Python is stopped when that call returns.

An objective that swallows the stop (a bare ``except:`` in a retry loop) gains nothing: a run
that returns after its timeout fired is failed all the same (:meth:`TimeLimit.check`), and one
that keeps ignoring the stop for :func:`grace_period` more seconds is abandoned: ``on_ignored``
runs (it records the failure) and the process exits with :data:`EXIT_IGNORED_TIMEOUT`.

:func:`objective_failure` turns what user code raised into the one-line text a failed trial keeps.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import ConfigError, RewardKitError


class TrialTimeout(BaseException):
    """The objective ran longer than the trial timeout."""


class EvaluationError(RewardKitError):
    """An evaluation outside the search (noise, validation, report) failed: the objective raised,
    returned something that is not a number, or ran out of time."""


#: exit code of a worker process stopped by Ctrl-C (its running trial or evaluation is retried)
EXIT_INTERRUPTED = 130
#: the longest trial timeout (seconds, about 115 days): the OS timer takes no more
MAX_TRIAL_TIMEOUT = 1e7
#: exit code of a process whose objective kept ignoring the trial timeout (see :func:`time_limit`)
EXIT_IGNORED_TIMEOUT = 124
#: the longest an objective may go on ignoring a fired timeout before its process is abandoned
MAX_GRACE = 10.0


def check_timeout(seconds: float | None, name: str = "--trial-timeout") -> float | None:
    """``seconds`` when it is None or a positive number up to :data:`MAX_TRIAL_TIMEOUT`; a located
    ``ConfigError`` otherwise."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or not 0 < seconds <= MAX_TRIAL_TIMEOUT:
        raise ConfigError(f"expected a number of seconds above 0 and at most {MAX_TRIAL_TIMEOUT:.0e}, got "
                          f"{seconds!r}", path=name)
    return float(seconds)


def grace_period(seconds: float) -> float:
    """How long an objective may ignore a fired timeout: as long again as the timeout, at most
    :data:`MAX_GRACE` seconds, at least one."""
    return min(MAX_GRACE, max(1.0, seconds))


class TimeLimit:
    """What :func:`time_limit` yields: whether the timeout fired while the block ran."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired_at: float | None = None

    @property
    def message(self) -> str:
        return f"the objective ran longer than the trial timeout of {self.seconds:g} s and was stopped"

    def check(self) -> None:
        """Raise :class:`TrialTimeout` when the timeout fired: an objective that caught the stop and
        returned late is failed all the same (its value came after its time)."""
        if self.fired_at is not None:
            raise TrialTimeout(self.message + " (it caught the stop and returned late; its value is discarded)")


@contextmanager
def time_limit(seconds: float | None, on_ignored: Callable[[str], None] | None = None) -> Iterator[TimeLimit]:
    """Raise :class:`TrialTimeout` in this (main) thread after ``seconds``, again every second; no
    limit when None. When the objective has ignored it for :func:`grace_period` seconds,
    ``on_ignored(message)`` runs and the process exits with :data:`EXIT_IGNORED_TIMEOUT`."""
    limit = TimeLimit(seconds)
    if seconds is None:
        yield limit
        return
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("a trial timeout needs the trials to run in the main thread of their process",
                          path="--trial-timeout")
    grace = grace_period(seconds)

    def expire(signum: int, frame: object) -> None:
        now = time.monotonic()
        if limit.fired_at is None:
            limit.fired_at = now
        elif now - limit.fired_at >= grace:
            signal.setitimer(signal.ITIMER_REAL, 0)
            text = (f"the objective ran longer than the trial timeout of {seconds:g} s and ignored the stop for "
                    f"{now - limit.fired_at:.0f} s more (a bare 'except:'?); its process was ended")
            try:
                if on_ignored is not None:
                    on_ignored(text)
            finally:
                sys.stderr.flush()
                os._exit(EXIT_IGNORED_TIMEOUT)
        raise TrialTimeout(limit.message)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def objective_failure(exc: BaseException) -> str:
    """What a failed trial records: the exception's type and message (SystemExit named as such)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the objective called sys.exit"
    if isinstance(exc, TrialTimeout):
        return f"TrialTimeout: {exc}"
    return f"{type(exc).__name__}: {exc}"[:2000]
