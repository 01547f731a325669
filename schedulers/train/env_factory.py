"""Builds the Vidur routing env a training config names (its ``env``, ``env_overrides`` and ``reward`` keys)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rewardkit.errors import ConfigError

from ..paths import resolve_path
from ..sim.env import VidurRoutingEnv
from ..sim.env_config import load_env_config
from .config import EnvFactory


def existing_file(value: str, source: str, key: str) -> Path:
    """``value`` resolved by :func:`schedulers.paths.resolve_path`; a ConfigError at ``key`` if it does not exist."""
    path = resolve_path(value, source)
    if not path.exists():
        raise ConfigError(f"expected an existing file, got {value!r} (resolved to {path})", source=source, path=key)
    return path


def vidur_env_factory(cfg: Mapping[str, Any], source: str = "<config dict>") -> EnvFactory:
    """Factory building ``schedulers.sim.env.VidurRoutingEnv`` from the config's ``env`` and ``reward``.

    The env YAML is read with ``schedulers.sim.env_config.load_env_config(env, env_overrides)``
    (dotted env-config keys); ``reward`` (when set) is the rewardkit YAML handed to the env,
    replacing the env config's own ``reward_config``.
    """
    if cfg.get("env") is None:
        raise ConfigError("expected the path of an env YAML (or pass env_factory to train())", source=source, path="env")
    env_path = existing_file(cfg["env"], source, "env")
    reward_path = existing_file(cfg["reward"], source, "reward") if cfg.get("reward") is not None else None
    overrides = dict(cfg.get("env_overrides") or {})

    try:
        env_config = load_env_config(env_path, overrides)
    except ConfigError as exc:
        if exc.source != "override":
            raise  # an error inside the env YAML already names that file and key
        raise ConfigError(exc.detail, source=source, path=f"env_overrides.{exc.path}") from None

    def make() -> Any:
        return VidurRoutingEnv(env_config, reward_composer=str(reward_path) if reward_path else None)

    return make
