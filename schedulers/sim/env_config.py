"""``EnvConfig``: the simulated cluster, workload and observation settings of the routing env.

Loaded from ``configs/envs/*.yaml`` with ``yaml.safe_load``; every key is checked and a bad one
raises :class:`rewardkit.errors.ConfigError` naming the file, the key path and what was expected,
e.g. ``configs/envs/x.yaml: observation.token_scale: expected a positive number, got -1``.
Relative paths (``trace_file``, ``reward_config``, ``profiles_dir``, ``cache_dir``) follow the
project's one rule (:func:`schedulers.paths.resolve_path`).
:func:`schedulers.sim.simulation_config.to_simulation_config` turns an ``EnvConfig`` into Vidur's
``SimulationConfig``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe

from ..routing.observation import ObservationConfig
from .slowdowns import SlowdownConfig, SlowdownEvent

REPLICA_SCHEDULERS = ("sarathi", "vllm", "orca")


@dataclass(frozen=True)
class PredictorConfig:
    """Grid and table sizes of Vidur's random-forest execution-time predictor."""

    num_estimators: tuple[int, ...] = (250,)
    max_depth: tuple[int, ...] = (16, 32)
    min_samples_split: tuple[int, ...] = (2,)
    k_fold_cv_splits: int = 5
    prediction_max_tokens_per_request: int = 4096
    prediction_max_prefill_chunk_size: int = 4096
    prediction_max_batch_size: int = 128


@dataclass(frozen=True)
class ReplicaGroup:
    """``count`` replicas whose batches take Vidur's predicted time divided by ``speed``."""

    count: int
    speed: float = 1.0
    #: optional label (e.g. the GPU type), for people reading the config.
    name: str | None = None


@dataclass(frozen=True)
class EnvConfig:
    """Cluster, workload and observation settings of :class:`schedulers.env.VidurRoutingEnv`."""

    model: str = "codellama/CodeLlama-34b-Instruct-hf"
    device: str = "a100"
    network_device: str = "a100_dgx"
    tensor_parallel_size: int = 2
    num_pipeline_stages: int = 1
    num_replicas: int = 4
    #: replica groups with relative speeds; empty: ``num_replicas`` replicas at speed 1.
    replicas: tuple[ReplicaGroup, ...] = ()
    #: unannounced slowdowns (a seeded process per episode); ``None``: none.
    slowdowns: SlowdownConfig | None = None
    replica_scheduler: str = "sarathi"
    chunk_size: int = 512
    batch_size_cap: int = 128
    #: requests longer than this (prompt + output) are shortened, as Vidur's trace generator does.
    max_tokens: int = 4096
    profiles_dir: str | None = None
    compute_profile: str | None = None
    network_profile: str | None = None
    cache_dir: str | None = None
    trace_file: str = "../shared/vidur/traces/splitwise_conv.csv"
    #: Poisson arrival rate (requests per simulated second).
    qps: float = 12.5
    requests_per_episode: int = 1000
    reward_config: str = "configs/rewards/vidur_hybrid.yaml"
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    #: file the config was read from (for messages); not a YAML key.
    source: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """Stem of the source file, or ``"env"``."""
        return Path(self.source).stem if self.source else "env"

    @property
    def replica_speeds(self) -> tuple[float, ...]:
        """Declared speed of every replica, in replica order (groups in the order the YAML lists them)."""
        if not self.replicas:
            return (1.0,) * self.num_replicas
        return tuple(g.speed for g in self.replicas for _ in range(g.count))

    @property
    def heterogeneous(self) -> bool:
        """Whether replicas differ in declared speed or may slow down."""
        return self.slowdowns is not None or any(v != 1.0 for v in self.replica_speeds)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form that :func:`env_config_from_dict` reads back."""
        out = _lists(dataclasses.asdict(self))
        out.pop("source")
        if not self.replicas:
            out.pop("replicas")
        if self.slowdowns is None:
            out.pop("slowdowns")
        return out


def _lists(value: Any) -> Any:
    """Tuples turned into lists, recursively (YAML and JSON friendly)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


# ---- validation -----------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive_int(v: Any) -> int:
    if not _is_int(v) or v <= 0:
        raise ValueError("a positive integer")
    return v


# rewardkit's parameter checks, with the same "expected ..." wording as reward configs
_positive_number = Param.positive().check
_string = Param.string().check


def _optional_string(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise ValueError("a non-empty string or null")
    return v


def _dataset_id(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or v.count("/") != 1 or not all(v.split("/")):
        raise ValueError("a dataset id '<org>/<name>' or null")
    return v


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError("one of " + ", ".join(repr(o) for o in options))
        return v

    return check


def _int_list(v: Any) -> tuple[int, ...]:
    if _is_int(v) and v > 0:
        return (v,)
    if not isinstance(v, list) or not v or not all(_is_int(x) and x > 0 for x in v):
        raise ValueError("a positive integer or a non-empty list of them")
    return tuple(v)


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise ValueError("a finite number")
    return float(v)


def _non_negative(v: Any) -> float:
    if _number(v) < 0:
        raise ValueError("a non-negative number")
    return float(v)


def _speed_factor(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise ValueError("a number in (0, 1]")
    return float(v)


def _range(item: Callable[[Any], float], what: str) -> Callable[[Any], tuple[float, float]]:
    def check(v: Any) -> tuple[float, float]:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = [v, v]
        try:
            ok = isinstance(v, list) and len(v) == 2 and item(v[0]) <= item(v[1])
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{what} or a list [low, high] of them with low <= high")
        return (float(v[0]), float(v[1]))

    return check


def _optional_positive(v: Any) -> float | None:
    return None if v is None else _positive_number(v)


_OBSERVATION_FIELDS: dict[str, Callable[[Any], Any]] = {
    "speed_tau_s": _positive_number,
    "recent_window_s": _positive_number,
    "count_scale": _positive_number,
    "token_scale": _positive_number,
}
_PREDICTOR_FIELDS: dict[str, Callable[[Any], Any]] = {
    "num_estimators": _int_list,
    "max_depth": _int_list,
    "min_samples_split": _int_list,
    "k_fold_cv_splits": _positive_int,
    "prediction_max_tokens_per_request": _positive_int,
    "prediction_max_prefill_chunk_size": _positive_int,
    "prediction_max_batch_size": _positive_int,
}
_FIELDS: dict[str, Callable[[Any], Any]] = {
    "model": _string,
    "device": _string,
    "network_device": _string,
    "tensor_parallel_size": _positive_int,
    "num_pipeline_stages": _positive_int,
    "num_replicas": _positive_int,
    "replica_scheduler": _choice(REPLICA_SCHEDULERS),
    "chunk_size": _positive_int,
    "batch_size_cap": _positive_int,
    "max_tokens": _positive_int,
    "profiles_dir": _optional_string,
    "compute_profile": _dataset_id,
    "network_profile": _dataset_id,
    "cache_dir": _optional_string,
    "trace_file": _string,
    "qps": _positive_number,
    "requests_per_episode": _positive_int,
    "reward_config": _string,
}
_GROUP_FIELDS: dict[str, Callable[[Any], Any]] = {
    "count": _positive_int,
    "speed": _positive_number,
    "name": _optional_string,
}
_EVENT_FIELDS: dict[str, Callable[[Any], Any]] = {
    "replica": lambda v: _non_negative_int(v),
    "start_s": _non_negative,
    "duration_s": _positive_number,
    "factor": _speed_factor,
}
_SLOWDOWN_FIELDS: dict[str, Callable[[Any], Any]] = {
    "mean_interval_s": _optional_positive,
    "duration_s": _range(_positive_number, "a positive number"),
    "factor": _range(_speed_factor, "a number in (0, 1]"),
    "start_s": _non_negative,
}


def _non_negative_int(v: Any) -> int:
    if not _is_int(v) or v < 0:
        raise ValueError("a non-negative integer")
    return v


def _check_fields(fields_: Mapping[str, Callable[[Any], Any]], given: Any, source: str | None, path: str) -> dict[str, Any]:
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping, got {describe(given)}", source=source, path=path)
    values = {}
    for key, value in given.items():
        if key not in fields_:
            raise _unknown_key(key, fields_, source, f"{path}.{key}")
        values[key] = _check(fields_[key], value, source, f"{path}.{key}")
    return values


def _check_groups(given: Any, source: str | None) -> tuple[ReplicaGroup, ...]:
    if not isinstance(given, list) or not given:
        raise ConfigError(
            f"expected a non-empty list of replica groups {{count: N, speed: S}}, got {describe(given)}", source=source, path="replicas"
        )
    groups = []
    for i, item in enumerate(given):
        values = _check_fields(_GROUP_FIELDS, item, source, f"replicas[{i}]")
        if "count" not in values:
            raise ConfigError("expected a key 'count' (replicas in the group)", source=source, path=f"replicas[{i}]")
        groups.append(ReplicaGroup(**values))
    return tuple(groups)


def _check_slowdowns(given: Any, source: str | None) -> SlowdownConfig | None:
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping or null, got {describe(given)}", source=source, path="slowdowns")
    rest = {k: v for k, v in given.items() if k != "events"}
    values = _check_fields(_SLOWDOWN_FIELDS, rest, source, "slowdowns")
    events = given.get("events") or []
    if not isinstance(events, list):
        raise ConfigError(f"expected a list of slowdown events, got {describe(events)}", source=source, path="slowdowns.events")
    checked = []
    for i, item in enumerate(events):
        ev = _check_fields(_EVENT_FIELDS, item, source, f"slowdowns.events[{i}]")
        missing = sorted(set(_EVENT_FIELDS) - set(ev))
        if missing:
            raise ConfigError(f"expected keys {', '.join(_EVENT_FIELDS)}, missing {', '.join(missing)}", source=source, path=f"slowdowns.events[{i}]")
        checked.append(SlowdownEvent(**ev))
    if values.get("mean_interval_s") is None and not checked:
        raise ConfigError("expected mean_interval_s (a random process) or events (explicit slowdowns), got neither",
                          source=source, path="slowdowns")
    return SlowdownConfig(**values, events=tuple(checked))


_SECTIONS = {"observation": (_OBSERVATION_FIELDS, ObservationConfig), "predictor": (_PREDICTOR_FIELDS, PredictorConfig)}


def _unknown_key(key: Any, known: Any, source: str | None, path: str) -> ConfigError:
    names = sorted(known)
    close = difflib.get_close_matches(str(key), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key{hint}; expected one of: {', '.join(names)}", source=source, path=path)


def _check(checker: Callable[[Any], Any], value: Any, source: str | None, path: str) -> Any:
    try:
        return checker(value)
    except ValueError as exc:
        raise ConfigError(f"expected {exc}, got {describe(value)}", source=source, path=path) from None


def _check_section(name: str, given: Any, source: str | None, base: Any) -> Any:
    fields_, cls = _SECTIONS[name]
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping, got {describe(given)}", source=source, path=name)
    values = {}
    for key, value in given.items():
        if key not in fields_:
            raise _unknown_key(key, fields_, source, f"{name}.{key}")
        values[key] = _check(fields_[key], value, source, f"{name}.{key}")
    return dataclasses.replace(base if base is not None else cls(), **values)


def _cross_checks(cfg: EnvConfig, source: str | None) -> None:
    if cfg.slowdowns is not None:
        for i, ev in enumerate(cfg.slowdowns.events):
            if ev.replica >= cfg.num_replicas:
                raise ConfigError(f"expected a replica index below {cfg.num_replicas}, got {ev.replica}",
                                  source=source, path=f"slowdowns.events[{i}].replica")
    p = cfg.predictor
    if cfg.max_tokens > p.prediction_max_tokens_per_request:
        raise ConfigError(
            f"expected at most predictor.prediction_max_tokens_per_request ({p.prediction_max_tokens_per_request}), "
            f"got {cfg.max_tokens}",
            source=source,
            path="max_tokens",
        )
    if cfg.batch_size_cap > p.prediction_max_batch_size:
        raise ConfigError(
            f"expected at most predictor.prediction_max_batch_size ({p.prediction_max_batch_size}), got {cfg.batch_size_cap}",
            source=source,
            path="batch_size_cap",
        )
    if cfg.chunk_size > p.prediction_max_prefill_chunk_size:
        raise ConfigError(
            f"expected at most predictor.prediction_max_prefill_chunk_size ({p.prediction_max_prefill_chunk_size}), "
            f"got {cfg.chunk_size}",
            source=source,
            path="chunk_size",
        )


def env_config_from_dict(data: Any, *, source: str | None = None, base: EnvConfig | None = None) -> EnvConfig:
    """Validate a mapping (as read from YAML) into an :class:`EnvConfig`; ``base`` gives defaults."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of env settings, got {describe(data)}", source=source)
    base = base or EnvConfig()
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            values[key] = _check_section(key, value, source, getattr(base, key))
        elif key in _FIELDS:
            values[key] = _check(_FIELDS[key], value, source, str(key))
        elif key == "replicas":
            values[key] = _check_groups(value, source)
        elif key == "slowdowns":
            values[key] = _check_slowdowns(value, source)
        else:
            raise _unknown_key(key, list(_FIELDS) + list(_SECTIONS) + ["replicas", "slowdowns"], source, str(key))
    _derive_replica_count(values, base, source)
    cfg = dataclasses.replace(base, source=source if source is not None else base.source, **values)
    _cross_checks(cfg, source)
    return cfg


def _derive_replica_count(values: dict[str, Any], base: EnvConfig, source: str | None) -> None:
    """``num_replicas`` from the groups; a ``num_replicas`` override of grouped replicas scales every group."""
    if "replicas" in values:
        total = sum(g.count for g in values["replicas"])
        if "num_replicas" in values and values["num_replicas"] != total:
            raise ConfigError(
                f"expected {total} (the sum of the replica groups' counts) or no num_replicas key, got {values['num_replicas']}",
                source=source, path="num_replicas",
            )
        values["num_replicas"] = total
    elif "num_replicas" in values and base.replicas:
        total = sum(g.count for g in base.replicas)
        n = values["num_replicas"]
        if n % total:
            raise ConfigError(
                f"expected a multiple of {total} (the replica groups are scaled alike), got {n}", source=source, path="num_replicas"
            )
        values["replicas"] = tuple(dataclasses.replace(g, count=g.count * n // total) for g in base.replicas)


def load_env_config(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> EnvConfig:
    """Read and validate ``configs/envs/<name>.yaml``; then apply ``overrides`` (dotted keys)."""
    file = Path(path)
    label = str(path)
    if not file.is_file():
        raise ConfigError(f"env config file not found (expected a YAML file, resolved to {file.resolve()})", source=label)
    try:
        data = yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"expected valid YAML, got a parse error: {exc}", source=label) from None
    cfg = env_config_from_dict({} if data is None else data, source=label)
    return with_overrides(cfg, overrides) if overrides else cfg


def with_overrides(cfg: EnvConfig, overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> EnvConfig:
    """A copy of ``cfg`` with keys replaced (``qps=10``, ``{"observation.token_scale": 2048}``).

    Values are validated like YAML values; ``None`` values are ignored so that unset command-line
    options can be passed straight through. Errors name the key with source ``override``.
    """
    merged = {**(overrides or {}), **kwargs}
    nested: dict[str, Any] = {}
    for key, value in merged.items():
        if value is None:
            continue
        head, _, rest = key.partition(".")
        if rest:
            if head not in _SECTIONS:
                raise _unknown_key(head, _SECTIONS, "override", key)
            nested.setdefault(head, {})[rest] = value
        else:
            nested[head] = value
    if not nested:
        return cfg
    out = env_config_from_dict(nested, source="override", base=cfg)
    return dataclasses.replace(out, source=cfg.source)


# ---- replica speeds for Vidur's own CLI --------------------------------------------------------------
def replica_setup_spec(cfg: EnvConfig) -> str:
    """JSON of the config's ``replicas`` and ``slowdowns`` sections ("" when homogeneous and never slowed).

    It is what the registered Vidur schedulers' ``cluster`` option takes (see :func:`replica_setup_from_spec`).
    """
    if not cfg.heterogeneous:
        return ""
    data = cfg.to_dict()
    return json.dumps({k: data[k] for k in ("replicas", "slowdowns") if k in data})


def replica_setup_from_spec(spec: str, num_replicas: int) -> tuple[tuple[float, ...], SlowdownConfig | None]:
    """Declared speeds and slowdowns from a ``cluster`` option: an env YAML path or the JSON of :func:`replica_setup_spec`.

    ``""`` means every replica at speed 1, never slowed. Raises ConfigError when the replica count
    does not match ``num_replicas`` (Vidur's ``--cluster_config_num_replicas``).
    """
    if not spec:
        return (1.0,) * num_replicas, None
    if spec.lstrip().startswith("{"):
        try:
            data = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"expected JSON or an env YAML path, got a JSON error: {exc}", source="cluster") from None
        cfg = env_config_from_dict(data, source="cluster")
    else:
        cfg = load_env_config(spec)
    speeds = cfg.replica_speeds if cfg.replicas else (1.0,) * num_replicas
    if len(speeds) != num_replicas:
        raise ConfigError(f"expected replica groups totalling {num_replicas} replicas (Vidur's num_replicas), got {len(speeds)}",
                          source=cfg.source, path="replicas")
    return speeds, cfg.slowdowns
