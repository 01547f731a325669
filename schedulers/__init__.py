"""Vidur request router trained with PPO on rewardkit rewards.

``import schedulers`` is light: the Vidur env, its configs and routers load on first use
(``schedulers.VidurRoutingEnv``, ``schedulers.EnvConfig``, ...), so that importing the package does
not import Vidur, Gymnasium or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "VidurRoutingEnv": "schedulers.env",
    "EpisodeMetrics": "schedulers.env",
    "FEATURE_NAMES": "schedulers.env",
    "build_observation": "schedulers.env",
    "EnvConfig": "schedulers.env_config",
    "ObservationConfig": "schedulers.env_config",
    "load_env_config": "schedulers.env_config",
    "with_overrides": "schedulers.env_config",
    "to_simulation_config": "schedulers.env_config",
    "ReplicaSnapshot": "schedulers.heuristics",
    "HEURISTICS": "schedulers.heuristics",
    "POLICY_NAMES": "schedulers.heuristics",
    "Router": "schedulers.routers",
    "HeuristicRouter": "schedulers.routers",
    "make_router": "schedulers.routers",
    "register_router": "schedulers.routers",
    "evaluate_policies": "schedulers.evaluate",
    "VidurSetupError": "schedulers.vidur_profiles",
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
