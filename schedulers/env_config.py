"""``EnvConfig``: the simulated cluster, workload and observation settings of the routing env.

Loaded from ``configs/envs/*.yaml`` with ``yaml.safe_load``; every key is checked and a bad one
raises :class:`rewardkit.errors.ConfigError` naming the file, the key path and what was expected,
e.g. ``configs/envs/x.yaml: observation.token_scale: expected a positive number, got -1``.
Relative paths (``trace_file``, ``reward_config``, ``profiles_dir``, ``cache_dir``) are resolved
against the project root (the folder holding ``configs/``), or against the working directory when
they exist only there (see :func:`schedulers.vidur_profiles.resolve_path`).

:func:`to_simulation_config` turns an ``EnvConfig`` into Vidur's ``SimulationConfig`` (no plots,
no Chrome trace, offline profiling data), usable by Vidur's own ``Simulator`` too.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe

REPLICA_SCHEDULERS = ("sarathi", "vllm", "orca")


@dataclass(frozen=True)
class ObservationConfig:
    """How replica and request features are normalized (see ``schedulers.env``)."""

    #: window (simulated seconds) for "recent completions" and the recent throughput/latency.
    recent_window_s: float = 10.0
    #: request counts are divided by this.
    count_scale: float = 16.0
    #: token counts are divided by this.
    token_scale: float = 4096.0


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
class EnvConfig:
    """Cluster, workload and observation settings of :class:`schedulers.env.VidurRoutingEnv`."""

    model: str = "codellama/CodeLlama-34b-Instruct-hf"
    device: str = "a100"
    network_device: str = "a100_dgx"
    tensor_parallel_size: int = 2
    num_pipeline_stages: int = 1
    num_replicas: int = 4
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

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form that :func:`env_config_from_dict` reads back."""
        out = dataclasses.asdict(self)
        out.pop("source")
        for section in ("predictor",):
            out[section] = {k: list(v) if isinstance(v, tuple) else v for k, v in out[section].items()}
        return out


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


_OBSERVATION_FIELDS: dict[str, Callable[[Any], Any]] = {
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
        else:
            raise _unknown_key(key, list(_FIELDS) + list(_SECTIONS), source, str(key))
    cfg = dataclasses.replace(base, source=source if source is not None else base.source, **values)
    _cross_checks(cfg, source)
    return cfg


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


# ---- Vidur's SimulationConfig ------------------------------------------------------------------
def resolved_trace_file(cfg: EnvConfig) -> Path:
    """Absolute path of the trace; raises ConfigError naming the config key if it does not exist."""
    from .vidur_profiles import resolve_path

    path = resolve_path(cfg.trace_file)
    if not path.is_file():
        raise ConfigError(
            f"expected an existing CSV file with columns num_prefill_tokens,num_decode_tokens, got {cfg.trace_file!r} "
            f"(resolved to {path})",
            source=cfg.source,
            path="trace_file",
        )
    return path


def to_simulation_config(
    cfg: EnvConfig,
    *,
    global_scheduler: str = "round_robin",
    global_scheduler_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    write_metrics: bool = False,
    output_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """Vidur ``SimulationConfig`` for ``cfg``: Poisson arrivals at ``qps`` with trace lengths.

    ``global_scheduler`` is a Vidur name (``round_robin``, ``random``, ``lor``) or one registered by
    :mod:`schedulers.vidur_registration` (``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``,
    ``power_of_two``, ``ppo``); ``global_scheduler_options`` go to its config (``checkpoint`` for
    ``ppo``). ``seed`` seeds the arrivals, the length shuffle and Vidur's
    global seed. Plots, Chrome traces and JSON traces are off; with ``write_metrics=False`` (the
    default) nothing is written beyond the ``config.json`` that Vidur always writes, which lands in
    a temporary folder that is removed at once unless ``output_dir`` is given.
    """
    from .vidur_profiles import prepare_profiles
    from .vidur_registration import global_scheduler_config

    installed = prepare_profiles(cfg)
    trace = resolved_trace_file(cfg)
    from vidur.config import (
        CacheConfig,
        ClusterConfig,
        MetricsConfig,
        OrcaSchedulerConfig,
        PoissonRequestIntervalGeneratorConfig,
        RandomForrestExecutionTimePredictorConfig,
        ReplicaConfig,
        SarathiSchedulerConfig,
        SimulationConfig,
        SyntheticRequestGeneratorConfig,
        TraceRequestLengthGeneratorConfig,
        VllmSchedulerConfig,
    )

    if cfg.replica_scheduler == "sarathi":
        replica_scheduler = SarathiSchedulerConfig(batch_size_cap=cfg.batch_size_cap, chunk_size=cfg.chunk_size)
    elif cfg.replica_scheduler == "vllm":
        replica_scheduler = VllmSchedulerConfig(batch_size_cap=cfg.batch_size_cap)
    else:
        replica_scheduler = OrcaSchedulerConfig(batch_size_cap=cfg.batch_size_cap)
    try:
        replica = ReplicaConfig(
            model_name=cfg.model,
            device=cfg.device,
            network_device=cfg.network_device,
            tensor_parallel_size=cfg.tensor_parallel_size,
            num_pipeline_stages=cfg.num_pipeline_stages,
        )
    except (AssertionError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"expected a model/device/parallelism Vidur supports ({cfg.model} on {cfg.device}, "
            f"TP {cfg.tensor_parallel_size}, PP {cfg.num_pipeline_stages}), got {type(exc).__name__}: {exc}",
            source=cfg.source,
            path="model",
        ) from None
    cluster = ClusterConfig(
        num_replicas=cfg.num_replicas,
        replica_config=replica,
        cache_config=CacheConfig(),
        global_scheduler_config=global_scheduler_config(global_scheduler, **dict(global_scheduler_options or {})),
        replica_scheduler_config=replica_scheduler,
    )
    requests = SyntheticRequestGeneratorConfig(
        seed=seed,
        num_requests=cfg.requests_per_episode,
        length_generator_config=TraceRequestLengthGeneratorConfig(
            seed=seed, trace_file=str(trace), max_tokens=cfg.max_tokens
        ),
        interval_generator_config=PoissonRequestIntervalGeneratorConfig(seed=seed, qps=cfg.qps),
    )
    p = cfg.predictor
    predictor = RandomForrestExecutionTimePredictorConfig(
        model_profiling_dataset=installed.compute_repo_id,
        network_profiling_dataset=installed.network_repo_id,
        cache_dir=str(installed.cache_dir),
        num_estimators=list(p.num_estimators),
        max_depth=list(p.max_depth),
        min_samples_split=list(p.min_samples_split),
        k_fold_cv_splits=p.k_fold_cv_splits,
        prediction_max_tokens_per_request=p.prediction_max_tokens_per_request,
        prediction_max_prefill_chunk_size=p.prediction_max_prefill_chunk_size,
        prediction_max_batch_size=p.prediction_max_batch_size,
    )
    if write_metrics and output_dir is None:
        raise ValueError("to_simulation_config(write_metrics=True) needs an output_dir for Vidur's metric files")
    scratch = None
    if output_dir is None:
        scratch = tempfile.mkdtemp(prefix="vidur-config-")
        output_dir = scratch
    try:
        metrics = MetricsConfig(
            write_metrics=write_metrics,
            write_json_trace=False,
            enable_chrome_trace=False,
            store_plots=False,
            output_dir=str(output_dir),
        )
        return SimulationConfig(
            seed=seed,
            log_level="warning",
            cluster_config=cluster,
            request_generator_config=requests,
            execution_time_predictor_config=predictor,
            metrics_config=metrics,
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
