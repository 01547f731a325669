"""Vidur's ``SimulationConfig`` for an :class:`~schedulers.sim.env_config.EnvConfig` (usable by Vidur's own ``Simulator`` too)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Mapping

from rewardkit.errors import ConfigError

from ..shared.arrivals import resolved_trace_file
from .env_config import VIDUR_BLOCK_TOKENS, EnvConfig, replica_setup_spec
from .profiles import prepare_profiles
from .registration import REGISTERED, global_scheduler_config


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

    ``global_scheduler`` is a Vidur name (``round_robin``, ``random``, ``lor``) or the name of any
    routing policy, each of which :mod:`schedulers.sim.registration` registers with Vidur
    (``global_scheduler_names()`` lists them); ``global_scheduler_options`` go to its config (``checkpoint`` for
    ``ppo``). ``seed`` seeds the arrivals, the length shuffle and Vidur's
    global seed. Plots, Chrome traces and JSON traces are off; with ``write_metrics=False`` (the
    default) nothing is written beyond the ``config.json`` that Vidur always writes, which lands in
    a temporary folder that is removed at once unless ``output_dir`` is given.
    """
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
    options = dict(global_scheduler_options or {})
    if global_scheduler in REGISTERED:
        options.setdefault("cluster", replica_setup_spec(cfg))
    cluster = ClusterConfig(
        num_replicas=cfg.num_replicas,
        replica_config=replica,
        cache_config=CacheConfig(block_size=VIDUR_BLOCK_TOKENS, num_blocks=cfg.kv_blocks),
        global_scheduler_config=global_scheduler_config(global_scheduler, **options),
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
