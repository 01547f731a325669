"""Builds the routing env a training config names (its ``env``, ``env_overrides`` and ``reward`` keys).

The env YAML is simulated (Vidur) or live (a ``live`` section naming real engines); see
:mod:`schedulers.environments`. A live env runs in real time, so it is trained with one env
(``ppo.n_envs: 1``): envs stepped one after another would send each other's requests late.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rewardkit.errors import ConfigError

from ..paths import resolve_path
from ..environments import load_any_env_config, make_env
from ..live.config import LiveEnvConfig
from .config import EnvFactory


def existing_file(value: str, source: str, key: str) -> Path:
    """``value`` resolved by :func:`schedulers.paths.resolve_path`; a ConfigError at ``key`` if it does not exist."""
    path = resolve_path(value, source)
    if not path.exists():
        raise ConfigError(f"expected an existing file, got {value!r} (resolved to {path})", source=source, path=key)
    return path


def routing_env_factory(cfg: Mapping[str, Any], source: str = "<config dict>") -> EnvFactory:
    """Factory building the routing env (Vidur or live) of the config's ``env`` and ``reward``.

    The env YAML is read with :func:`schedulers.environments.load_any_env_config` (``env_overrides``
    as dotted env-config keys); ``reward`` (when set) is the rewardkit YAML handed to the env,
    replacing the env config's own ``reward_config``.
    """
    if cfg.get("env") is None:
        raise ConfigError("expected the path of an env YAML (or pass env_factory to train())", source=source, path="env")
    env_path = existing_file(cfg["env"], source, "env")
    reward_path = existing_file(cfg["reward"], source, "reward") if cfg.get("reward") is not None else None
    overrides = dict(cfg.get("env_overrides") or {})

    try:
        env_config = load_any_env_config(env_path, overrides)
    except ConfigError as exc:
        if exc.source != "override":
            raise  # an error inside the env YAML already names that file and key
        raise ConfigError(exc.detail, source=source, path=f"env_overrides.{exc.path}") from None

    n_envs = (cfg.get("ppo") or {}).get("n_envs", 1)
    if isinstance(env_config, LiveEnvConfig) and n_envs != 1:
        raise ConfigError(f"expected 1 with a live env ({env_path}): its requests go out in real time, and envs "
                          f"stepped one after another would send each other's late; got {n_envs}",
                          source=source, path="ppo.n_envs")

    def make() -> Any:
        return make_env(env_config, reward_composer=str(reward_path) if reward_path else None)

    return make
