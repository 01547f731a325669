"""``EnvConfig``: the simulated cluster, workload and observation settings of the routing env.

Loaded from ``configs/envs/*.yaml`` with rewardkit's one YAML loader (safe, no duplicate keys,
bounded) and checked by :func:`rewardkit.params.validate_schema`: every bad key raises (all at
once) a :class:`rewardkit.errors.ConfigError` naming the file, the key path and what was expected,
e.g. ``configs/envs/x.yaml: observation.token_scale: expected a positive number, got -1``.
Relative paths (``trace_file``, ``reward_config``, ``profiles_dir``, ``cache_dir``) follow the
project's one rule (:func:`schedulers.paths.resolve_path`).
:func:`schedulers.sim.simulation_config.to_simulation_config` turns an ``EnvConfig`` into Vidur's
``SimulationConfig``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping


from rewardkit.errors import ConfigError
from rewardkit.config import load_yaml
from rewardkit.params import Param, describe, validate_schema

from ..bounds import (MAX_CV_SPLITS, MAX_FOREST_DEPTH, MAX_FOREST_TREES, MAX_GRID_VALUES, MAX_KV_BLOCKS,
                      MAX_PARALLEL, MAX_PREDICTION_BATCH, MAX_PREDICTION_TOKENS, MAX_REPLICAS, MAX_SPEED,
                      MIN_SLOWDOWN_DURATION_S, MIN_SLOWDOWN_INTERVAL_S,
                      MIN_SPEED)
from ..shared.requests import SharedPrefix
from ..shared.observation_config import OBSERVATION_CHECKS, ObservationConfig
from ..shared.workload import WORKLOAD_CHECKS, Workload, section_schema, shared_prefix_fit_errors
from .slowdowns import SlowdownConfig, SlowdownEvent

REPLICA_SCHEDULERS = ("sarathi", "vllm", "orca")
#: tokens per KV-cache block of every simulated replica (Vidur's ``CacheConfig.block_size``), the unit of ``kv_blocks``.
VIDUR_BLOCK_TOKENS = 16


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
    #: prefix-cache blocks (16 tokens) of each replica of the group; None: the config's ``kv_blocks``
    #: (a replayed log gives each replica the capacity its engine reported)
    kv_blocks: int | None = None


@dataclass(frozen=True)
class EnvConfig:
    """Cluster, workload and observation settings of :class:`schedulers.sim.env.VidurRoutingEnv`."""

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
    #: the trace's prompt and output lengths are multiplied by this (then shortened to
    #: ``max_tokens``): a workload sized for smaller engines, like the live env's ``length_scale``.
    length_scale: float = 1.0
    #: KV-cache blocks (of 16 tokens) per replica; ``None``: what Vidur's memory planner gives the
    #: model and device (a smaller engine's cache can be modelled with a fixed count).
    kv_blocks: int | None = None
    #: a shared-prefix workload (``groups`` system prompts of ``prefix_tokens``, ``sessions``
    #: multi-turn conversations; the load generator's ``--shared-prefix G:T --sessions S``): each
    #: replica then keeps a prefix cache (:mod:`schedulers.sim.prefix_cache`); ``None``: unique prompts.
    shared_prefix: SharedPrefix | None = None
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
    def workload(self) -> Workload:
        """The simulator-free part: arrivals, lengths, observation settings and reward."""
        return Workload(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Workload)})

    @property
    def replica_speeds(self) -> tuple[float, ...]:
        """Declared speed of every replica, in replica order (groups in the order the YAML lists them)."""
        if not self.replicas:
            return (1.0,) * self.num_replicas
        return tuple(g.speed for g in self.replicas for _ in range(g.count))

    @property
    def replica_kv_blocks(self) -> tuple[int | None, ...]:
        """Each replica's own prefix-cache blocks (its group's ``kv_blocks``), None where the group sets none."""
        if not self.replicas:
            return (None,) * self.num_replicas
        return tuple(g.kv_blocks for g in self.replicas for _ in range(g.count))

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
        else:
            out["replicas"] = [{k: v for k, v in g.items() if k != "kv_blocks" or v is not None} for g in out["replicas"]]
        if self.slowdowns is None:
            out.pop("slowdowns")
        if self.shared_prefix is None:
            out.pop("shared_prefix")
        return out


def _lists(value: Any) -> Any:
    """Tuples turned into lists, recursively (YAML and JSON friendly)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


# ---- validation (rewardkit's validate_schema: every error at once, each with its key path) ---------------
def _grid(minimum: int, maximum: int) -> Param:
    """An integer or a non-empty list of at most ``MAX_GRID_VALUES`` of them (a predictor grid key)."""
    expected = f"an integer from {minimum} to {maximum}, or a list of 1 to {MAX_GRID_VALUES} of them"
    one = Param.integer(minimum=minimum, maximum=maximum).check

    def check(v: Any) -> tuple[int, ...]:
        values = v if isinstance(v, list) else [v]
        try:
            if not 1 <= len(values) <= MAX_GRID_VALUES:
                raise ValueError
            return tuple(one(x) for x in values)
        except ValueError:
            raise ValueError(expected) from None

    return Param(None, "", expected, check)


def _dataset_id(v: Any) -> str:
    if not isinstance(v, str) or v.count("/") != 1 or not all(v.split("/")):
        raise ValueError("a dataset id '<org>/<name>'")
    return v


def _range(param: Param) -> Param:
    """``param`` given once (low = high) or as a list ``[low, high]`` with low <= high."""
    what = f"{param.expected} or a list [low, high] of them with low <= high"

    def check(v: Any) -> tuple[float, float]:
        pair = v if isinstance(v, list) else [v, v]
        try:
            ok = len(pair) == 2 and param.check(pair[0]) <= param.check(pair[1])
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(what)
        return (float(pair[0]), float(pair[1]))

    return Param(None, param.doc, what, check)


_SPEED_FACTOR = Param.between(MIN_SPEED, 1.0, doc="speed multiplier during a slowdown")
_GROUP_SCHEMA = {
    "count": Param.integer(doc="replicas in the group", minimum=1, maximum=MAX_REPLICAS),
    "speed": Param.between(MIN_SPEED, MAX_SPEED, 1.0, "execution times of these replicas are Vidur's prediction divided by this"),
    "name": Param.string(doc="a label such as the GPU type").or_null(),
    "kv_blocks": Param.integer(doc="prefix-cache blocks per replica of the group", minimum=1,
                               maximum=MAX_KV_BLOCKS).or_null(),
}
_EVENT_SCHEMA = {
    "replica": Param.integer(doc="replica index", minimum=0, maximum=MAX_REPLICAS - 1),
    "start_s": Param.non_negative(doc="simulated start time (s)"),
    "duration_s": Param.between(MIN_SLOWDOWN_DURATION_S, float("inf"), doc="how long (s)"),
    "factor": _SPEED_FACTOR,
}


def _list_of(schema: dict[str, Any], build: Callable[..., Any], what: str, *, allow_empty: bool) -> Callable[[Any], tuple]:
    """Check a list of mappings against ``schema``; item errors are located ``[i].key``."""

    def check(v: Any) -> tuple:
        if not isinstance(v, list) or (not v and not allow_empty):
            raise ValueError(what)
        items, errors = [], []
        for i, item in enumerate(v):
            try:
                items.append(build(**validate_schema(schema, item, path=f"[{i}]")))
            except ConfigError as exc:
                errors.append(exc)
        if errors:
            raise ConfigError.combine(errors)
        return tuple(items)

    return check


_check_groups = _list_of(_GROUP_SCHEMA, ReplicaGroup, "a non-empty list of replica groups {count: N, speed: S}",
                         allow_empty=False)
_check_events = _list_of(_EVENT_SCHEMA, SlowdownEvent, "a list of slowdown events", allow_empty=True)
_SLOWDOWN_SCHEMA = {
    "mean_interval_s": Param.between(MIN_SLOWDOWN_INTERVAL_S, float("inf"),
                                     doc="mean normal time (s) between two slowdowns of a replica").or_null(),
    "duration_s": _range(Param.between(MIN_SLOWDOWN_DURATION_S, float("inf"))).or_null((30.0, 50.0)),
    "factor": _range(_SPEED_FACTOR).or_null((0.35, 0.45)),
    "start_s": Param.non_negative(0.0, "no random slowdown before this simulated time (s)"),
    "events": Param((), "explicit slowdowns", "a list of slowdown events", _check_events),
}


def _check_slowdowns(v: Any) -> SlowdownConfig | None:
    if v is None:
        return None
    values = validate_schema(_SLOWDOWN_SCHEMA, v)
    if values["mean_interval_s"] is None and not values["events"]:
        raise ValueError("a mapping with mean_interval_s (a random process) or events (explicit slowdowns)")
    return SlowdownConfig(**values)


_PREDICTOR_CHECKS = {
    "num_estimators": _grid(1, MAX_FOREST_TREES),
    "max_depth": _grid(1, MAX_FOREST_DEPTH),
    "min_samples_split": _grid(2, 1_000_000),  # scikit-learn: an integer split size is at least 2
    "k_fold_cv_splits": Param.integer(doc="", minimum=2, maximum=MAX_CV_SPLITS),
    "prediction_max_tokens_per_request": Param.integer(doc="", minimum=1, maximum=MAX_PREDICTION_TOKENS),
    "prediction_max_prefill_chunk_size": Param.integer(doc="", minimum=32, maximum=MAX_PREDICTION_TOKENS),
    "prediction_max_batch_size": Param.integer(doc="", minimum=1, maximum=MAX_PREDICTION_BATCH),
}
_CHECKS = {
    "model": Param.string(doc="model name as Vidur knows it"),
    "device": Param.string(doc="GPU type as Vidur knows it"),
    "network_device": Param.string(doc="network device as Vidur knows it"),
    "tensor_parallel_size": Param.integer(doc="", minimum=1, maximum=MAX_PARALLEL),
    "num_pipeline_stages": Param.integer(doc="", minimum=1, maximum=MAX_PARALLEL),
    "num_replicas": Param.integer(doc="", minimum=1, maximum=MAX_REPLICAS),
    "replicas": Param((), "replica groups with relative speeds", "a non-empty list of replica groups", _check_groups),
    "slowdowns": Param(None, "unannounced slowdowns", "a slowdowns mapping or null", _check_slowdowns),
    "replica_scheduler": Param.choice(REPLICA_SCHEDULERS, doc="Vidur's replica scheduler"),
    "chunk_size": Param.integer(doc="", minimum=1),
    "batch_size_cap": Param.integer(doc="", minimum=1),
    "kv_blocks": Param.integer(doc="KV-cache blocks per replica", minimum=1, maximum=MAX_KV_BLOCKS).or_null(),
    "profiles_dir": Param.string(doc="").or_null(),
    "compute_profile": Param(None, "", "a dataset id '<org>/<name>'", _dataset_id).or_null(),
    "network_profile": Param(None, "", "a dataset id '<org>/<name>'", _dataset_id).or_null(),
    "cache_dir": Param.string(doc="").or_null(),
    **WORKLOAD_CHECKS,
}
_SECTIONS = {"observation": OBSERVATION_CHECKS, "predictor": _PREDICTOR_CHECKS}


def _schema(base: EnvConfig) -> dict[str, Any]:
    """The env YAML schema, with defaults taken from ``base`` (so an override changes only what it names)."""
    schema: dict[str, Any] = section_schema(_CHECKS, base)
    schema["observation"] = section_schema(OBSERVATION_CHECKS, base.observation)
    schema["predictor"] = section_schema(_PREDICTOR_CHECKS, base.predictor)
    return schema


def _cross_check_errors(cfg: EnvConfig, source: str | None) -> list[ConfigError]:
    errors = []
    if cfg.num_replicas > MAX_REPLICAS:
        errors.append(ConfigError(f"expected at most {MAX_REPLICAS} replicas in all (the limit), got {cfg.num_replicas}",
                                  source=source, path="replicas" if cfg.replicas else "num_replicas"))
    if cfg.slowdowns is not None:
        errors += [ConfigError(f"expected a replica index below {cfg.num_replicas}, got {ev.replica}",
                               source=source, path=f"slowdowns.events[{i}].replica")
                   for i, ev in enumerate(cfg.slowdowns.events) if ev.replica >= cfg.num_replicas]
    if cfg.kv_blocks is not None and cfg.kv_blocks * VIDUR_BLOCK_TOKENS < cfg.max_tokens:
        need = -(-cfg.max_tokens // VIDUR_BLOCK_TOKENS)
        errors.append(ConfigError(f"expected at least {need} blocks (one request of max_tokens {cfg.max_tokens} in blocks of "
                                  f"{VIDUR_BLOCK_TOKENS} tokens), got {cfg.kv_blocks}", source=source, path="kv_blocks"))
    errors += shared_prefix_fit_errors(cfg.shared_prefix, cfg.max_tokens, source, cfg.requests_per_episode)
    p = cfg.predictor
    for key, value, limit_key, limit in (
        ("max_tokens", cfg.max_tokens, "prediction_max_tokens_per_request", p.prediction_max_tokens_per_request),
        ("batch_size_cap", cfg.batch_size_cap, "prediction_max_batch_size", p.prediction_max_batch_size),
        ("chunk_size", cfg.chunk_size, "prediction_max_prefill_chunk_size", p.prediction_max_prefill_chunk_size),
    ):
        if value > limit:
            errors.append(ConfigError(f"expected at most predictor.{limit_key} ({limit}), got {value}",
                                      source=source, path=key))
    return errors


def env_config_from_dict(data: Any, *, source: str | None = None, base: EnvConfig | None = None) -> EnvConfig:
    """Validate a mapping (as read from YAML) into an :class:`EnvConfig`; ``base`` gives defaults.

    Every problem is reported at once (``ConfigError.errors``), each located at its key path.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of env settings, got {describe(data)}", source=source)
    base = base or EnvConfig()
    values = validate_schema(_schema(base), data, source=source)
    values["observation"] = ObservationConfig(**values["observation"])
    values["predictor"] = PredictorConfig(**values["predictor"])
    _derive_replica_count(values, data, base, source)
    cfg = dataclasses.replace(base, source=source if source is not None else base.source, **values)
    errors = _cross_check_errors(cfg, source)
    if errors:
        raise ConfigError.combine(errors)
    return cfg


def _derive_replica_count(values: dict[str, Any], given: Mapping[str, Any], base: EnvConfig, source: str | None) -> None:
    """``num_replicas`` from the groups; a ``num_replicas`` override of grouped replicas scales every group."""
    if "replicas" in given:
        total = sum(g.count for g in values["replicas"])
        if "num_replicas" in given and values["num_replicas"] != total:
            raise ConfigError(
                f"expected {total} (the sum of the replica groups' counts) or no num_replicas key, got {values['num_replicas']}",
                source=source, path="num_replicas",
            )
        values["num_replicas"] = total
    elif "num_replicas" in given and base.replicas:
        total = sum(g.count for g in base.replicas)
        n = values["num_replicas"]
        if n % total:
            raise ConfigError(
                f"expected a multiple of {total} (the replica groups are scaled alike), got {n}",
                source=source, path="num_replicas",
            )
        values["replicas"] = tuple(dataclasses.replace(g, count=g.count * n // total) for g in base.replicas)


def load_env_config(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> EnvConfig:
    """Read and validate ``configs/envs/<name>.yaml``; then apply ``overrides`` (dotted keys)."""
    label = str(path)
    data = load_yaml(path)
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
                raise ConfigError(f"unknown section; expected one of: {', '.join(_SECTIONS)}", source="override", path=key)
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
