"""A local Ray cluster with Serve's HTTP proxy, started once for the module's live tests (small: 2 CPUs, no dashboard)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def ray_serve():
    """The base URL of Ray Serve's HTTP proxy on a local Ray cluster of its own (its own temp dir, so other
    Ray clusters on the machine are not joined; workers import this checkout)."""
    ray = pytest.importorskip("ray", reason="needs Ray Serve: pip install 'ray[serve]==2.60.0' (the ray extra)")
    from ray import serve

    from schedulers.engines.replicas import free_port

    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir="/tmp/ray_tests_serve",
             runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
