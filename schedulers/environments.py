"""One way to open a routing env from an env YAML: simulated (Vidur) or live (real engines).

An env YAML with a ``live`` section names real engines (:mod:`schedulers.live.config`) and opens
a :class:`~schedulers.live.env.LiveRoutingEnv`; any other opens a
:class:`~schedulers.sim.env.VidurRoutingEnv`. Both have the same observation, actions, per-request
credit, ``snapshot``, ``pending_prompt_tokens`` and ``episode_metrics``, so training and evaluation
run on either, and any :class:`~schedulers.routing.policy.Policy` routes in either through
:func:`policy_action`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Union

import numpy as np

from .live.config import LiveEnvConfig, is_live_env_file, load_live_env_config
from .routing.policy import Policy

if TYPE_CHECKING:
    from .sim.env_config import EnvConfig

AnyEnvConfig = Union["EnvConfig", LiveEnvConfig]


def load_any_env_config(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> AnyEnvConfig:
    """The env YAML at ``path`` (with ``overrides``): a live config if it has a ``live`` section."""
    if is_live_env_file(path):
        return load_live_env_config(path, overrides)
    from .sim.env_config import load_env_config  # Vidur: only for a simulated env

    return load_env_config(path, overrides)


def make_env(config: AnyEnvConfig | str | os.PathLike[str], reward_composer: Any = None, **kwargs: Any) -> Any:
    """A routing env for ``config`` (``evaluate``, ``compute_reward`` passed on); live envs need the serve extra."""
    cfg = load_any_env_config(config) if isinstance(config, (str, os.PathLike)) else config
    if isinstance(cfg, LiveEnvConfig):
        from .live.env import LiveRoutingEnv  # httpx: the serve extra

        return LiveRoutingEnv(cfg, reward_composer, **kwargs)
    from .sim.env import VidurRoutingEnv  # Vidur

    return VidurRoutingEnv(cfg, reward_composer, **kwargs)


def policy_action(policy: Policy, env: Any, obs: np.ndarray) -> int:
    """The replica ``policy`` picks for the request awaiting routing in ``env`` (whose observation is ``obs``).

    The loop reads the env and hands the policy what it declares it needs: the snapshot and prompt
    length always, the observation rows, and the true speeds only to a policy that reads them
    (``oracle``; a live env has none).
    """
    base = env.unwrapped
    true_speed = None
    if policy.needs_true_speed:
        if not hasattr(base, "true_speeds"):
            raise ValueError(f"router {policy.name!r} reads the replicas' true speeds, which only the simulator knows")
        true_speed = base.true_speeds()
    return int(policy.decide(base.snapshot(), base.pending_prompt_tokens, rows=obs, true_speed=true_speed))
