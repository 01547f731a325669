"""Vidur request router trained with PPO on rewardkit rewards.

Packages by floor, each importing only from the floors below it (``tests/test_architecture.py``):

- ``shared``: what both halves share (the workload of any env YAML, arrivals, the per-request
  reward, episode metrics, the engine client and its SSE and Prometheus readers); no Vidur, pandas
  or torch.
- ``routing``: replica snapshot, observations and the routing seam (``routing.policy``: ``Policy``,
  ``register_policy``, ``make_policy``), the built-in policies one module per family
  (``routing.policies``); NumPy only.
- side by side: the simulator half, ``sim`` (everything that touches Vidur) and ``rl`` (policy
  network, PPO, the PPO checkpoint as a policy); the serving half, ``live`` (the live cluster view,
  the live env, the decision log) and ``loadgen`` (``rewardkit loadgen``).
- ``serve`` (``rewardkit gateway``, on the live view alone) and ``environments`` (one env from any
  env YAML, :func:`~schedulers.environments.policy_action`).
- ``train`` (trainer, checkpoints, logs, learning from decision logs), ``evaluate`` (paired
  comparison) <- ``tune`` (reward optimization) <- ``cli`` and ``engines`` (test and benchmark
  rigs) <- ``demo``.

``import schedulers`` is light: the Vidur env, its configs and routers load on first use
(``schedulers.VidurRoutingEnv``, ``schedulers.EnvConfig``, ...), so that importing the package does
not import Vidur, Gymnasium or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "VidurRoutingEnv": "schedulers.sim.env",
    "EpisodeMetrics": "schedulers.shared.episode_metrics",
    "FEATURE_NAMES": "schedulers.routing.observation",
    "build_observation": "schedulers.routing.observation",
    "ObservationConfig": "schedulers.shared.observation_config",
    "EnvConfig": "schedulers.sim.env_config",
    "load_env_config": "schedulers.sim.env_config",
    "with_overrides": "schedulers.sim.env_config",
    "to_simulation_config": "schedulers.sim.simulation_config",
    "ReplicaSnapshot": "schedulers.routing.snapshot",
    "Policy": "schedulers.routing.policy",
    "HeuristicPolicy": "schedulers.routing.policy",
    "make_policy": "schedulers.routing.policy",
    "register_policy": "schedulers.routing.policy",
    "policy_names": "schedulers.routing.policy",
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
