"""Live env YAML: an env YAML whose ``live`` section names real engines instead of a simulated cluster.

The rest of the file is the workload every env YAML has (:class:`~schedulers.shared.workload.Workload`,
read by the same checks): its ``trace_file``, ``qps``, ``requests_per_episode`` and ``max_tokens``
give each episode's arrivals and lengths exactly as the simulator draws them for a seed, its
``observation`` section the policy's rows and its ``reward_config`` the per-request reward. The
``live`` section::

    live:
      backends: [http://127.0.0.1:8101, http://127.0.0.1:8102]   # OpenAI-compatible engines
      model: tiny-llama            # the model name the engines serve
      declared_speeds: [1.0, 0.5]  # optional: what an operator knows of each replica's hardware
      length_scale: 0.05           # request lengths times this, then fitted to max_model_len
      max_model_len: 512           # the engines' --max-model-len
      timeout_s: 120               # one request's limit; an episode waits at most this for its last one
      kv_capacity_blocks: 1024     # KV blocks the view assumes per replica (blocks of 32 tokens)
      vocab_size: 2000             # prompts are random token ids below this

The number of replicas is the number of backends (a ``num_replicas`` or ``replicas`` key that
says otherwise is an error).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping

from rewardkit.config import load_yaml
from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe, validate_schema

from ..bounds import MAX_LENGTH_SCALE, MAX_REPLICAS, MAX_SPEED, MIN_LENGTH_SCALE, MIN_SPEED
from ..shared.observation_config import ObservationConfig
from ..shared.workload import Workload, workload_from_dict, workload_with_overrides

LIVE_SECTION = "live"


BACKENDS_EXPECTED = f"a non-empty list of http(s) URLs (at most {MAX_REPLICAS})"
SPEEDS_EXPECTED = f"a list of speeds in [{MIN_SPEED}, {MAX_SPEED}], one per backend, or null"


def _backends(value: Any) -> tuple[str, ...]:
    if (not isinstance(value, (list, tuple)) or not value or len(value) > MAX_REPLICAS
            or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in value)):
        raise ValueError(BACKENDS_EXPECTED)
    return tuple(u.rstrip("/") for u in value)


def _speeds(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(SPEEDS_EXPECTED)
    speeds = tuple(float(v) for v in value if not isinstance(v, bool) and isinstance(v, (int, float)))
    if len(speeds) != len(value) or not all(MIN_SPEED <= s <= MAX_SPEED for s in speeds):
        raise ValueError(SPEEDS_EXPECTED)
    return speeds


_LIVE_CHECKS = {
    "backends": dataclasses.replace(Param.string(doc="engine base URLs"), check=_backends,
                                    expected=BACKENDS_EXPECTED),
    "model": Param.string("tiny-llama", doc="model name the engines serve"),
    "declared_speeds": Param(None, "declared speed per backend", SPEEDS_EXPECTED, _speeds),
    "length_scale": Param.between(MIN_LENGTH_SCALE, MAX_LENGTH_SCALE, 1.0, doc="request lengths are multiplied by this"),
    "max_model_len": Param.integer(4096, doc="", minimum=2, maximum=1_000_000),
    "timeout_s": Param.between(0.1, 86_400.0, 300.0, doc="seconds one request may take"),
    "kv_capacity_blocks": Param.between(1.0, 1e9, 1024.0, doc="KV blocks per replica the view assumes"),
    "vocab_size": Param.integer(2000, doc="", minimum=10, maximum=10_000_000),
}


@dataclass(frozen=True)
class LiveSettings:
    """The ``live`` section: which engines, how requests are shaped for them."""

    backends: tuple[str, ...]
    model: str = "tiny-llama"
    declared_speeds: tuple[float, ...] | None = None
    length_scale: float = 1.0
    max_model_len: int = 4096
    timeout_s: float = 300.0
    kv_capacity_blocks: float = 1024.0
    vocab_size: int = 2000


@dataclass(frozen=True)
class LiveEnvConfig:
    """A live env: the engines (``live``) and the workload, observation and reward (``workload``)."""

    live: LiveSettings
    workload: Workload

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def observation(self) -> ObservationConfig:
        return self.workload.observation

    @property
    def num_replicas(self) -> int:
        return len(self.live.backends)

    @property
    def source(self) -> str | None:
        return self.workload.source


def is_live_env_file(path: str | os.PathLike[str]) -> bool:
    """Whether the env YAML at ``path`` has a ``live`` section (real engines, not Vidur)."""
    try:
        data = load_yaml(path)
    except (ConfigError, OSError):
        return False
    return isinstance(data, Mapping) and LIVE_SECTION in data


def live_env_config_from_dict(data: Any, *, source: str | None = None) -> LiveEnvConfig:
    """Validate a live env mapping (see the module doc); every error names the file and key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of env settings, got {describe(data)}", source=source)
    section = data.get(LIVE_SECTION)
    if not isinstance(section, Mapping):
        raise ConfigError(f"expected a mapping with backends, got {describe(section)}", source=source, path=LIVE_SECTION)
    values = validate_schema(_LIVE_CHECKS, section, source=source, path=LIVE_SECTION)
    live = LiveSettings(**values)
    n = len(live.backends)
    if live.declared_speeds is not None and len(live.declared_speeds) != n:
        raise ConfigError(f"expected {n} speeds (one per backend), got {len(live.declared_speeds)}",
                          source=source, path=f"{LIVE_SECTION}.declared_speeds")
    rest = {k: v for k, v in data.items() if k != LIVE_SECTION}
    if "num_replicas" in rest and rest["num_replicas"] != n:
        raise ConfigError(f"expected {n} (the number of live.backends) or no num_replicas key, got {rest['num_replicas']!r}",
                          source=source, path="num_replicas")
    if "replicas" in rest or "slowdowns" in rest:
        key = "replicas" if "replicas" in rest else "slowdowns"
        raise ConfigError("expected no simulated cluster in a live env (the engines are real; declare their speeds "
                          "in live.declared_speeds)", source=source, path=key)
    workload = workload_from_dict({k: v for k, v in rest.items() if k != "num_replicas"}, source=source,
                                  others=frozenset())
    return LiveEnvConfig(live, workload)


def load_live_env_config(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> LiveEnvConfig:
    """Read and check a live env YAML; ``overrides`` (dotted keys) apply to its workload part."""
    cfg = live_env_config_from_dict(load_yaml(path), source=str(path))
    if overrides and overrides.get("num_replicas") not in (None, cfg.num_replicas):
        raise ConfigError(f"expected no replica count for a live env (it has {cfg.num_replicas} backends), "
                          f"got {overrides['num_replicas']}", source=str(path), path="num_replicas")
    if overrides:
        cfg = dataclasses.replace(cfg, workload=workload_with_overrides(cfg.workload,
                                                                        {k: v for k, v in overrides.items()
                                                                         if k != "num_replicas"}))
    return cfg
