"""Bounds on one run of the objective: a time limit, and how user code may stop it.

``time_limit(seconds)`` raises :class:`TrialTimeout` in the running objective when it has run for
``seconds`` (a ``SIGALRM`` timer, repeated every second in case the objective swallows it). It is
a ``BaseException``, so that an objective's own ``except Exception`` does not hide it. It works in
the main thread of any process, which is where every trial runs: in the command, in each
``--workers`` process and in each process of the evaluation pool. A hang inside a C call that
never returns to Python is stopped when that call returns.

:func:`objective_failure` turns what user code raised into the one-line text a failed trial keeps.
"""

from __future__ import annotations

import math
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

from ..errors import ConfigError, RewardKitError


class TrialTimeout(BaseException):
    """The objective ran longer than the trial timeout."""


class EvaluationError(RewardKitError):
    """An evaluation outside the search (noise, validation, report) failed: the objective raised,
    returned something that is not a number, or ran out of time."""


def check_timeout(seconds: float | None, name: str = "--trial-timeout") -> float | None:
    """``seconds`` when it is None or a positive finite number; a located ``ConfigError`` otherwise."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise ConfigError(f"expected a positive number of seconds, got {seconds!r}", path=name)
    return float(seconds)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TrialTimeout` in this (main) thread after ``seconds``; no limit when None."""
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("a trial timeout needs the trials to run in the main thread of their process",
                          path="--trial-timeout")

    def expire(signum: int, frame: object) -> None:
        raise TrialTimeout(f"the objective ran longer than the trial timeout of {seconds:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def objective_failure(exc: BaseException) -> str:
    """What a failed trial records: the exception's type and message (SystemExit named as such)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the objective called sys.exit; the trial is failed, the study goes on"
    if isinstance(exc, TrialTimeout):
        return f"TrialTimeout: {exc}"
    return f"{type(exc).__name__}: {exc}"[:2000]
