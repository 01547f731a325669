"""Real stub HTTP scorers on 127.0.0.1 for the remote terms' tests: one server of each kind per session.

Each test gets the session's server back in its default state (fast, healthy, counters cleared).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread
from schedulers.engines.stub_scorer import StubJudge, StubScorer


def _serve(stub: Any) -> Iterator[tuple[Any, str]]:
    server = ServerThread(stub.app(), free_port()).start()
    try:
        yield stub, server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _scorer_server() -> Iterator[tuple[StubScorer, str]]:
    yield from _serve(StubScorer())


@pytest.fixture(scope="session")
def _judge_server() -> Iterator[tuple[StubJudge, str]]:
    yield from _serve(StubJudge())


@pytest.fixture
def scorer(_scorer_server: tuple[StubScorer, str]) -> tuple[StubScorer, str]:
    """The stub scorer (fresh state) and its ``/score`` URL."""
    stub, url = _scorer_server
    stub.delay_s, stub.mode, stub.fail_first = 0.0, "ok", 0
    stub.reset()
    return stub, url + "/score"


@pytest.fixture
def judge_server(_judge_server: tuple[StubJudge, str]) -> tuple[StubJudge, str]:
    """The stub judge (fresh state) and its base URL."""
    stub, url = _judge_server
    stub.delay_s, stub.logprobs = 0.0, True
    stub.reset()
    return stub, url


@pytest.fixture
def refused_url() -> str:
    """A URL on which nothing listens (the port was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}/score"
