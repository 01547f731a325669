"""Shared fixtures of the rewardkit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewardkit import register, registry


@pytest.fixture(autouse=True, scope="module")
def _test_components_registered(request: pytest.FixtureRequest) -> Iterator[None]:
    """Register a module's ``TEST_COMPONENTS`` only while its tests run (other tests list the registry)."""
    components = getattr(request.module, "TEST_COMPONENTS", {})
    for name, cls in components.items():
        register(name, replace=True)(cls)
    yield
    for name in components:
        registry._REGISTRY.pop(name, None)
