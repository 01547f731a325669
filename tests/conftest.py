"""Markers for the whole suite: ``pytest -m "not vidur"`` runs everything that needs no Vidur simulator.

Hypothesis draws the same examples on every run (profile ``repeatable``: a CI rerun gives the same
verdict, a failure reproduces locally); ``HYPOTHESIS_PROFILE=explore`` draws fresh ones.
"""

from __future__ import annotations

import os

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
