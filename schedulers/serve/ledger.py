"""``Ledger``: what one attempt reads and writes, and nothing else of the gateway.

An :class:`~schedulers.serve.attempt.Attempt` opens on a replica, hears its tokens and closes
once; the ledger is the narrow collaborator it does that against: the live view (in-flight load,
tokens), the per-replica Prometheus children (routed, in flight, TTFT, e2e), the open attempts
(a forced stop closes what is left), and the two functions that turn an outcome into a record
(the request's reward, the decision log). The gateway builds one and hands it to every attempt;
the attempt never sees the gateway.
"""

from __future__ import annotations

from typing import Any, Callable

from ..live.decision_log import Decision
from ..live.view import LiveClusterView

#: (ttft_s, e2e_s, prompt_tokens, output_tokens) -> (reward or None, its terms)
RewardFn = Callable[[float | None, float | None, int, int], "tuple[float | None, dict[str, float]]"]


class Ledger:
    """The live view, the per-replica metrics and the open attempts, with the few operations an attempt needs.

    ``routed``, ``in_flight``, ``ttft`` and ``e2e`` are each replica's labelled Prometheus children
    (looked up once: a label lookup per request is measurable); ``reward`` scores a finished
    request, ``record`` writes its decision.
    """

    __slots__ = ("view", "routed", "in_flight", "ttft", "e2e", "reward", "record", "open_attempts")

    def __init__(self, view: LiveClusterView, *, routed: list[Any], in_flight: list[Any], ttft: list[Any],
                 e2e: list[Any], reward: RewardFn, record: Callable[[Decision], None]) -> None:
        self.view = view
        self.routed, self.in_flight, self.ttft, self.e2e = routed, in_flight, ttft, e2e
        self.reward, self.record = reward, record
        #: attempts not yet closed (each closes itself; a forced stop closes any left as cancelled)
        self.open_attempts: set[Any] = set()

    def opened(self, attempt: Any, replica: int) -> None:
        """An attempt was sent to ``replica``."""
        self.routed[replica].inc()
        self.in_flight[replica].inc()
        self.open_attempts.add(attempt)

    def first_token(self, replica: int, seconds: float) -> None:
        """A streamed attempt's first token came ``seconds`` after it was sent."""
        self.ttft[replica].observe(seconds)

    def tokens(self, key: int, count: int) -> None:
        """``count`` more output tokens of the request the view knows as ``key``."""
        self.view.token(key, count)

    def closed(self, attempt: Any, replica: int, key: int, completed: bool, e2e_s: float | None) -> None:
        """An attempt ended: the view lets its load go, the replica's in-flight count returns, and its
        latency is observed (``e2e_s`` None: a retried attempt, whose time is not a request's)."""
        self.open_attempts.discard(attempt)
        self.view.finished(key, completed=completed)
        self.in_flight[replica].dec()
        if e2e_s is not None:
            self.e2e[replica].observe(e2e_s)
