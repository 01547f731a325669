"""An attempt (schedulers/serve/attempt.py) against its ledger (schedulers/serve/ledger.py) alone, with no
gateway: opening counts it routed and in flight, closing returns the load, observes its latency, scores
it and records its decision once; a retried attempt's time is not a request's latency."""

from __future__ import annotations

import asyncio

from schedulers.live.decision_log import Decision
from schedulers.live.view import LiveClusterView
from schedulers.serve.attempt import Attempt
from schedulers.serve.deadlines import Deadlines, Drain, RequestClock
from schedulers.serve.ledger import Ledger


class Count:
    """Stands in for a Prometheus child: what was counted and observed."""

    def __init__(self) -> None:
        self.value, self.observed = 0, []

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def observe(self, x: float) -> None:
        self.observed.append(x)


def ledger(n: int = 2) -> tuple[Ledger, list[Decision]]:
    recorded: list[Decision] = []
    book = Ledger(LiveClusterView(n), routed=[Count() for _ in range(n)], in_flight=[Count() for _ in range(n)],
                  ttft=[Count() for _ in range(n)], e2e=[Count() for _ in range(n)],
                  reward=lambda ttft, e2e, prompt, output: (float(output), {"tokens": float(output)}),
                  record=recorded.append)
    return book, recorded


def clock() -> RequestClock:
    return RequestClock(Deadlines(2.0, None, 30.0), Drain())


def test_an_attempt_opens_and_closes_against_its_ledger_alone():
    book, recorded = ledger()
    key = book.view.sent(1, prompt_tokens=40)
    decision = Decision("r1", "jsq", 1, [], 40)
    attempt = Attempt(book, 1, decision, key, clock())
    assert book.routed[1].value == 1 and book.in_flight[1].value == 1 and book.open_attempts == {attempt}
    assert book.view.snapshot().waiting.tolist() == [0, 1]
    asyncio.run(attempt.end("ok", 7))
    asyncio.run(attempt.end("error", 0, "closed twice"))  # a second close changes nothing
    assert book.in_flight[1].value == 0 and not book.open_attempts and not book.view.inflight
    assert len(book.e2e[1].observed) == 1
    assert recorded == [decision] and (decision.status, decision.output_tokens, decision.reward) == ("ok", 7, 7.0)


def test_a_retried_attempt_returns_its_load_without_a_latency_or_a_reward():
    book, recorded = ledger()
    attempt = Attempt(book, 0, Decision("r2", "jsq", 0, [], 10), book.view.sent(0, prompt_tokens=10), clock())
    asyncio.run(attempt.end("retried", 0, "backend 0 is unreachable"))
    assert book.in_flight[0].value == 0 and book.e2e[0].observed == [] and not book.view.inflight
    assert recorded[0].status == "retried" and recorded[0].reward is None and recorded[0].e2e_s is None
