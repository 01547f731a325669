"""Offline Vidur setup: profiling tables in Vidur's hub-cache layout, and a cached runtime predictor.

Vidur 0.0.26 fetches its GPU profiling tables with ``huggingface_hub.snapshot_download`` from
``{cache_dir}/profiling_data/{compute|network}/``. These machines cannot reach the hub, so this
module copies a local folder laid out ``<org>/<name>/`` (one folder per hub dataset id) into that
cache layout, where the hub client resolves it with ``HF_HUB_OFFLINE=1``::

    CACHE/profiling_data/compute/datasets--<org>--<name>/refs/main          (40 hex digits)
    CACHE/profiling_data/compute/datasets--<org>--<name>/snapshots/<hex>/   (the files)

The snapshot name is the SHA-1 of the files, so a changed source gives a new snapshot; trained
predictors (which Vidur keys by dataset id, not by content) are then discarded.

Vidur reads ``mlp.csv.xz``, ``attention.csv.xz`` (compute) and ``all_reduce.csv.xz``,
``send_recv.csv.xz`` (network) itself, compressed; a source folder may hold either the ``.csv.xz``
files or plain ``.csv`` files, which are compressed on install.

The random-forest predictor is built once per process (:func:`get_predictor`) with a small grid
that trains in under a minute; Vidur caches the trained models and prediction tables under the
cache directory, so later processes load them in seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rewardkit.errors import RewardKitError

from ..paths import project_root, resolve_path
from .env_config import EnvConfig

PROFILES_ENV_VAR = "REWARDKIT_VIDUR_PROFILES"
CACHE_ENV_VAR = "REWARDKIT_VIDUR_CACHE"

COMPUTE_FILES = ("mlp.csv.xz", "attention.csv.xz")
NETWORK_FILES = ("all_reduce.csv.xz", "send_recv.csv.xz")
#: folders under the cache that hold what Vidur trained from the profiling tables.
TRAINED_SUBDIRS = ("predictors", "predictions", "training_predictions")


class VidurSetupError(RewardKitError, RuntimeError):
    """Vidur cannot be set up: profiling data missing or not matching the configured cluster."""


def default_profiles_dir() -> Path:
    """``../shared/vidur/profiles`` next to the project root."""
    return (project_root().parent / "shared" / "vidur" / "profiles").resolve()


def resolve_profiles_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """Profiling-data folder: the config key, else ``$REWARDKIT_VIDUR_PROFILES``, else the default.

    Raises :class:`VidurSetupError` naming the folder and where it came from if it does not exist.
    """
    if configured:
        path, origin = resolve_path(configured), "env config key profiles_dir"
    elif os.environ.get(PROFILES_ENV_VAR):
        path, origin = resolve_path(os.environ[PROFILES_ENV_VAR]), f"${PROFILES_ENV_VAR}"
    else:
        path, origin = default_profiles_dir(), "default location"
    if not path.is_dir():
        raise VidurSetupError(
            f"Vidur profiling-data folder {path} (from {origin}) does not exist; expected a folder "
            f"laid out <org>/<name>/ holding config.json and {', '.join(COMPUTE_FILES)} (compute) or "
            f"{', '.join(NETWORK_FILES)} (network). Set profiles_dir in the env config or ${PROFILES_ENV_VAR}."
        )
    return path


def resolve_cache_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """Cache folder: the config key, else ``$REWARDKIT_VIDUR_CACHE``, else ``<project>/.cache/vidur``."""
    if configured:
        return resolve_path(configured)
    if os.environ.get(CACHE_ENV_VAR):
        return resolve_path(os.environ[CACHE_ENV_VAR])
    return project_root() / ".cache" / "vidur"


def configure_offline_environment() -> None:
    """Make the hub client and wandb work offline and quiet Vidur's INFO chatter."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    vidur_logger = logging.getLogger("vidur")
    if vidur_logger.level < logging.WARNING:
        vidur_logger.setLevel(logging.WARNING)
    predictor_logger = logging.getLogger("vidur.execution_time_predictor.sklearn_execution_time_predictor")
    if not any(isinstance(f, _DropHubPredictionMiss) for f in predictor_logger.filters):
        predictor_logger.addFilter(_DropHubPredictionMiss())


class _DropHubPredictionMiss(logging.Filter):
    """Vidur first tries to download ready predictions from the hub and logs an ERROR when offline."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to load predictions from HF")


# ---- profile discovery ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileDataset:
    """One local dataset folder ``<profiles_dir>/<org>/<name>`` and its ``config.json``."""

    repo_id: str
    path: Path
    config: dict[str, Any]


def _read_dataset_config(folder: Path) -> dict[str, Any]:
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise VidurSetupError(f"{cfg_file}: missing; expected a JSON file describing the profiling dataset")
    try:
        data = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise VidurSetupError(f"{cfg_file}: expected JSON, got a parse error: {exc}") from None
    if not isinstance(data, dict):
        raise VidurSetupError(f"{cfg_file}: expected a JSON object, got {type(data).__name__}")
    return data


def list_datasets(profiles_dir: Path) -> list[ProfileDataset]:
    """Every ``<org>/<name>`` folder with a ``config.json`` under ``profiles_dir``, sorted by id."""
    found = []
    for cfg_file in sorted(profiles_dir.glob("*/*/config.json")):
        folder = cfg_file.parent
        found.append(ProfileDataset(f"{folder.parent.name}/{folder.name}", folder, _read_dataset_config(folder)))
    return found


def _describe(datasets: list[ProfileDataset]) -> str:
    if not datasets:
        return "none (no <org>/<name>/config.json found)"
    return "; ".join(f"{d.repo_id} {json.dumps(d.config, sort_keys=True)}" for d in datasets)


def _check_fields(dataset: ProfileDataset, expected: dict[str, str], what: str) -> None:
    for key, want in expected.items():
        got = dataset.config.get(key)
        if got != want:
            raise VidurSetupError(
                f"{dataset.path / 'config.json'}: {key}: expected {want!r} ({what}), got {got!r}"
            )


def find_dataset(
    profiles_dir: Path, kind: str, expected: dict[str, str], repo_id: str | None = None
) -> ProfileDataset:
    """The compute or network dataset under ``profiles_dir`` whose config matches ``expected``.

    With ``repo_id`` that folder is used and checked; otherwise the folders are searched.
    """
    what = {"compute": "the replica model and device", "network": "the replica network device"}[kind]
    if repo_id:
        folder = profiles_dir / repo_id
        if not folder.is_dir():
            raise VidurSetupError(
                f"{folder}: {kind} profiling dataset {repo_id!r} not found in {profiles_dir}; "
                f"available: {_describe(list_datasets(profiles_dir))}"
            )
        dataset = ProfileDataset(repo_id, folder, _read_dataset_config(folder))
        _check_fields(dataset, expected, what)
        return dataset
    datasets = list_datasets(profiles_dir)
    matches = [d for d in datasets if all(d.config.get(k) == v for k, v in expected.items())]
    if not matches:
        want = ", ".join(f"{k}={v!r}" for k, v in expected.items())
        raise VidurSetupError(
            f"{profiles_dir}: no {kind} profiling dataset with config.json {want} ({what}); "
            f"found: {_describe(datasets)}"
        )
    return matches[0]


def _source_file(folder: Path, name: str, kind: str) -> Path:
    """``name`` (``x.csv.xz``) in ``folder``, or its uncompressed ``x.csv``."""
    for candidate in (folder / name, folder / name[: -len(".xz")]):
        if candidate.is_file():
            return candidate
    raise VidurSetupError(
        f"{folder / name}: missing; the {kind} profiling dataset needs "
        f"{', '.join(COMPUTE_FILES if kind == 'compute' else NETWORK_FILES)} and config.json "
        f"(plain .csv accepted)"
    )


# ---- installing into the hub cache layout --------------------------------------------------------
@dataclass(frozen=True)
class InstalledProfiles:
    """Where Vidur finds the profiling data: its ``cache_dir`` and the two dataset ids."""

    cache_dir: Path
    compute_repo_id: str
    network_repo_id: str
    compute_snapshot: Path
    network_snapshot: Path


def _content_hash(files: dict[str, Path]) -> str:
    digest = hashlib.sha1()
    for name in sorted(files):
        digest.update(name.encode())
        digest.update(b"\0")
        with open(files[name], "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def _install_dataset(dataset: ProfileDataset, kind: str, names: tuple[str, ...], cache_dir: Path) -> tuple[Path, bool]:
    """Copy one dataset into the hub layout; return its snapshot folder and whether it changed."""
    files = {"config.json": dataset.path / "config.json"}
    for name in names:
        files[name] = _source_file(dataset.path, name, kind)
    revision = _content_hash(files)
    org, name = dataset.repo_id.split("/", 1)
    repo_dir = cache_dir / "profiling_data" / kind / f"datasets--{org}--{name}"
    snapshot = repo_dir / "snapshots" / revision
    ref_file = repo_dir / "refs" / "main"
    previous = ref_file.read_text().strip() if ref_file.is_file() else None

    def complete() -> bool:
        return all((snapshot / n).is_file() for n in files)

    if previous == revision and complete():
        return snapshot, False
    if not complete():
        # Build aside and rename: snapshots are content-addressed, so when another process
        # wins the race its snapshot is identical and ours is dropped.
        tmp = repo_dir / "snapshots" / f".tmp-{revision}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for target, source in files.items():
            if target.endswith(".xz") and not source.name.endswith(".xz"):
                with open(source, "rb") as src, lzma.open(tmp / target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(source, tmp / target)
        try:
            tmp.rename(snapshot)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not complete():
                raise VidurSetupError(
                    f"{snapshot}: exists but lacks some of {', '.join(sorted(files))}; delete it and retry"
                ) from None
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    ref_tmp = ref_file.with_name(f".main-{os.getpid()}")
    ref_tmp.write_text(revision)
    ref_tmp.replace(ref_file)
    return snapshot, previous is not None and previous != revision


def install_profiles(
    profiles_dir: Path,
    cache_dir: Path,
    *,
    model: str,
    device: str,
    network_device: str,
    compute_repo_id: str | None = None,
    network_repo_id: str | None = None,
) -> InstalledProfiles:
    """Install the compute and network datasets that match the cluster into ``cache_dir``.

    Idempotent and cheap when nothing changed (hashes about 350 KB). If a dataset's content changed
    since the last install, Vidur's trained predictors in ``cache_dir`` are removed so they are
    retrained from the new tables.
    """
    compute = find_dataset(profiles_dir, "compute", {"model": model, "device_sku": device}, compute_repo_id)
    network = find_dataset(profiles_dir, "network", {"sku": network_device}, network_repo_id)
    compute_snapshot, compute_changed = _install_dataset(compute, "compute", COMPUTE_FILES, cache_dir)
    network_snapshot, network_changed = _install_dataset(network, "network", NETWORK_FILES, cache_dir)
    if compute_changed or network_changed:
        for sub in TRAINED_SUBDIRS:
            shutil.rmtree(cache_dir / sub, ignore_errors=True)
        print(f"[vidur] profiling data changed; discarded trained predictors in {cache_dir}", file=sys.stderr)
    return InstalledProfiles(cache_dir, compute.repo_id, network.repo_id, compute_snapshot, network_snapshot)


def prepare_profiles(env_config: EnvConfig) -> InstalledProfiles:
    """Resolve folders from ``env_config``, set the offline environment and install the profiles."""
    configure_offline_environment()
    profiles_dir = resolve_profiles_dir(env_config.profiles_dir)
    cache_dir = resolve_cache_dir(env_config.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    return install_profiles(
        profiles_dir,
        cache_dir,
        model=env_config.model,
        device=env_config.device,
        network_device=env_config.network_device,
        compute_repo_id=env_config.compute_profile,
        network_repo_id=env_config.network_profile,
    )


# ---- the execution-time predictor ----------------------------------------------------------------
_PREDICTORS: dict[tuple, Any] = {}


def predictor_key(sim_config: Any) -> tuple:
    """What the predictor depends on: predictor settings, replica shape and KV block size."""
    p = sim_config.execution_time_predictor_config
    r = sim_config.cluster_config.replica_config
    return (
        type(p).__name__,
        json.dumps({k: v for k, v in vars(p).items()}, sort_keys=True, default=str),
        r.model_name,
        r.device,
        r.network_device,
        r.tensor_parallel_size,
        r.num_pipeline_stages,
        r.kv_parallel_size,
        sim_config.cluster_config.cache_config.block_size,
    )


def _seeded_random_forest_class() -> type:
    """Vidur's random-forest predictor with seeded forests, so training is reproducible.

    Vidur 0.0.26 builds ``RandomForestRegressor()`` without a seed; with one, a fresh cache on
    another machine reproduces the same execution times (same scikit-learn version).
    """
    from sklearn.ensemble import RandomForestRegressor
    from vidur.execution_time_predictor.random_forrest_execution_time_predictor import (
        RandomForrestExecutionTimePredictor,
    )
    from vidur.types import ExecutionTimePredictorType

    class SeededRandomForrestExecutionTimePredictor(RandomForrestExecutionTimePredictor):
        predictor_type = ExecutionTimePredictorType.RANDOM_FORREST

        def _get_estimator(self) -> Any:
            return RandomForestRegressor(random_state=0)

    return SeededRandomForrestExecutionTimePredictor


def get_predictor(sim_config: Any, log: Callable[[str], None] | None = None) -> Any:
    """The execution-time predictor for ``sim_config``, built once per process.

    The first build on a fresh cache trains the random forests (about a minute on 2 cores) and
    prints how long it took; later builds load Vidur's cached tables.
    """
    key = predictor_key(sim_config)
    if key in _PREDICTORS:
        return _PREDICTORS[key]
    configure_offline_environment()
    from vidur.execution_time_predictor import ExecutionTimePredictorRegistry

    p = sim_config.execution_time_predictor_config
    log = log or (lambda msg: print(msg, file=sys.stderr))
    trained = Path(p.cache_dir, "predictors").is_dir()
    if not trained:
        log(f"[vidur] training the execution-time predictor into {p.cache_dir} (once; about a minute)...")
    start = time.perf_counter()
    try:
        predictor_cls = _seeded_random_forest_class()
        if p.get_type() != predictor_cls.predictor_type:
            predictor_cls = ExecutionTimePredictorRegistry.get_class(p.get_type())
        predictor = predictor_cls(
            predictor_config=p,
            replica_config=sim_config.cluster_config.replica_config,
            cache_config=sim_config.cluster_config.cache_config,
        )
    except Exception as exc:  # Vidur raises bare Exceptions/AssertionErrors with little context
        raise VidurSetupError(
            f"building Vidur's execution-time predictor for {sim_config.cluster_config.replica_config.model_name} "
            f"(TP {sim_config.cluster_config.replica_config.tensor_parallel_size}) from {p.model_profiling_dataset} "
            f"and {p.network_profiling_dataset} in {p.cache_dir} failed: {type(exc).__name__}: {exc}"
        ) from exc
    elapsed = time.perf_counter() - start
    log(f"[vidur] execution-time predictor {'loaded' if trained else 'trained'} in {elapsed:.1f} s")
    _PREDICTORS[key] = predictor
    return predictor
