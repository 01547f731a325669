"""Fixtures of the routing tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schedulers.routing import policy


@pytest.fixture(autouse=True)
def _policy_registry_restored() -> Iterator[None]:
    """A test that registers a policy (or a plug-in through the entry point) leaves the registry as it
    found it: other tests compare the registry with what Vidur's registration built at import."""
    registry, broken, loaded = dict(policy._REGISTRY), dict(policy._BROKEN), dict(policy._loaded)
    loaded_from = dict(policy._LOADED_FROM)
    yield
    policy._LOADED_FROM.clear()
    policy._LOADED_FROM.update(loaded_from)
    policy._REGISTRY.clear()
    policy._REGISTRY.update(registry)
    policy._BROKEN.clear()
    policy._BROKEN.update(broken)
    policy._loaded.clear()
    policy._loaded.update(loaded)
