"""``WorkloadMixEnv``: a routing env whose every episode draws one workload of a mix (seeded).

A router that must learn when a cache hit is worth queueing for has to meet several prefix lengths,
sharing patterns and loads. A mix YAML names a base env YAML and the variants (overrides of it)::

    base: configs/envs/prefix_long.yaml
    variants:
      low_load: {qps: 4.5}
      short_prefix: {shared_prefix: {groups: 24, prefix_tokens: 768}}

Every variant must keep the base's replica count (one observation and action space). Episode seed
``s`` plays variant ``s mod len(variants)`` in YAML order, so a seed range covers the variants
evenly and any run is reproducible. Errors name the file and the key (``variants.low_load.qps``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from rewardkit.config import load_yaml
from rewardkit.errors import ConfigError

from ..paths import resolve_path
from .env import VidurRoutingEnv
from .env_config import EnvConfig, load_env_config, with_overrides


@dataclass(frozen=True)
class WorkloadMix:
    """Named env configs sharing one cluster shape."""

    variants: dict[str, EnvConfig]
    source: str | None = None

    def variant_of(self, seed: int) -> str:
        """The variant episode ``seed`` plays."""
        names = list(self.variants)
        return names[int(seed) % len(names)]


def load_workload_mix(path: str | os.PathLike[str]) -> WorkloadMix:
    """Read a mix YAML (see the module doc); every problem is a ConfigError located in it."""
    source = str(path)
    data = load_yaml(path)
    if not isinstance(data, Mapping) or set(data) - {"base", "variants"} or "base" not in data:
        raise ConfigError("expected a mapping with keys base (an env YAML) and variants (name: overrides)", source=source)
    base_path = resolve_path(str(data["base"]), source)
    if not base_path.is_file():
        raise ConfigError(f"expected an existing env YAML, got {data['base']!r}", source=source, path="base")
    base = load_env_config(base_path)
    variants = data.get("variants") or {}
    if not isinstance(variants, Mapping) or not variants:
        raise ConfigError("expected a non-empty mapping of variant names to env overrides", source=source, path="variants")
    out: dict[str, EnvConfig] = {}
    for name, overrides in variants.items():
        if overrides is not None and not isinstance(overrides, Mapping):
            raise ConfigError("expected a mapping of env overrides", source=source, path=f"variants.{name}")
        try:
            cfg = with_overrides(base, overrides or {})
        except ConfigError as exc:
            raise ConfigError(exc.detail, source=source, path=f"variants.{name}.{exc.path}") from None
        if cfg.num_replicas != base.num_replicas:
            raise ConfigError(f"expected the base's {base.num_replicas} replicas, got {cfg.num_replicas}",
                              source=source, path=f"variants.{name}")
        out[str(name)] = cfg
    return WorkloadMix(out, source)


class WorkloadMixEnv(gym.Env):
    """One :class:`~schedulers.sim.env.VidurRoutingEnv` per variant; each episode runs the one its seed picks."""

    metadata = {"render_modes": []}

    def __init__(self, mix: WorkloadMix | str | os.PathLike[str], reward_composer: Any = None, **env_kwargs: Any) -> None:
        super().__init__()
        self.mix = mix if isinstance(mix, WorkloadMix) else load_workload_mix(mix)
        self.envs = {name: VidurRoutingEnv(cfg, reward_composer, **env_kwargs) for name, cfg in self.mix.variants.items()}
        first = next(iter(self.envs.values()))
        lows = np.min([e.observation_space.low for e in self.envs.values()], axis=0)
        highs = np.max([e.observation_space.high for e in self.envs.values()], axis=0)
        self.observation_space = gym.spaces.Box(low=lows, high=highs, dtype=np.float32)
        self.action_space = first.action_space
        self.feature_names = first.feature_names
        self.reward_credit = first.reward_credit
        self.num_replicas = first.num_replicas
        self.env_config = first.env_config
        self.active = first
        self.variant = next(iter(self.envs))

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self.variant = self.mix.variant_of(episode_seed)
        self.active = self.envs[self.variant]
        self.env_config = self.active.env_config
        obs, info = self.active.reset(seed=episode_seed, options=options)
        info["variant"] = self.variant
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.active.step(action)

    def __getattr__(self, name: str) -> Any:
        # snapshot, pending_prompt_tokens, episode_metrics, requests_per_episode ...: the active variant's
        if name.startswith("_") or name in ("envs", "active"):
            raise AttributeError(name)
        return getattr(self.active, name)

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
