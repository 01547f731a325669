"""Vidur request router trained with PPO on rewardkit rewards.

Packages, imported one way (each only from those before it): ``routing`` (snapshot, observations,
heuristics, routers; NumPy only) <- ``sim`` (everything that touches Vidur) <- ``rl`` (policy,
PPO), ``train`` (trainer, checkpoints, logs), ``evaluate`` (paired comparison) <- ``tune``
(reward optimization) <- ``cli``, ``demo``.

``import schedulers`` is light: the Vidur env, its configs and routers load on first use
(``schedulers.VidurRoutingEnv``, ``schedulers.EnvConfig``, ...), so that importing the package does
not import Vidur, Gymnasium or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "VidurRoutingEnv": "schedulers.sim.env",
    "EpisodeMetrics": "schedulers.sim.metrics",
    "FEATURE_NAMES": "schedulers.routing.observation",
    "build_observation": "schedulers.routing.observation",
    "ObservationConfig": "schedulers.routing.observation",
    "EnvConfig": "schedulers.sim.env_config",
    "load_env_config": "schedulers.sim.env_config",
    "with_overrides": "schedulers.sim.env_config",
    "to_simulation_config": "schedulers.sim.simulation_config",
    "ReplicaSnapshot": "schedulers.routing.snapshot",
    "HEURISTICS": "schedulers.routing.heuristics",
    "HEURISTIC_NAMES": "schedulers.routing.heuristics",
    "Policy": "schedulers.routing.policy",
    "HeuristicPolicy": "schedulers.routing.policy",
    "make_policy": "schedulers.routing.policy",
    "register_policy": "schedulers.routing.policy",
    "evaluate_policies": "schedulers.evaluate.paired",
    "VidurSetupError": "schedulers.sim.profiles",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'schedulers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
