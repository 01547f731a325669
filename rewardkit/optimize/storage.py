"""Where a study lives: an RDB URL (SQLite, PostgreSQL, ...) or a journal file.

The rule of ``rewardkit optimize --storage``: a value with a URL scheme (``sqlite:///s.db``,
``postgresql://user@host/db``) is an Optuna ``RDBStorage``, with heartbeats so that a trial whose
worker died is failed and retried (``RetryHeartbeatStaleTrialCallback``); anything else is the
path of a journal file (created when absent), Optuna's storage for several processes on one
machine. The default is ``<study>.journal`` in the working directory. Journal storages have no
heartbeats in Optuna; :mod:`rewardkit.optimize.recovery` handles killed workers there.
"""

from __future__ import annotations

import random
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage

from ..errors import ConfigError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

HEARTBEAT_INTERVAL = 10
"""Seconds between heartbeats of a running trial (RDB storages and rewardkit's journal ones)."""
GRACE_PERIOD = 60
"""Seconds without a heartbeat after which a running trial counts as dead (other machines)."""


@dataclass(frozen=True)
class StorageSpec:
    """A parsed ``--storage`` value: an RDB URL or a journal path, and where trial files go."""

    url: str | None
    journal: Path | None

    @property
    def is_rdb(self) -> bool:
        return self.url is not None

    def describe(self) -> str:
        return self.url if self.url is not None else str(self.journal)

    def artifacts_root(self) -> Path:
        """Folder next to the study: the journal's or SQLite file's folder, else the working one."""
        if self.journal is not None:
            return self.journal.parent
        assert self.url is not None
        if self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
            return Path(self.url[len("sqlite:///"):]).parent
        return Path(".")


def parse_storage(value: str | None, study_name: str) -> StorageSpec:
    """Apply the storage rule to ``value`` (None: ``<study_name>.journal`` here)."""
    if "\x00" in study_name:  # it names the journal file and the trial folders
        raise ConfigError(f"expected a study name without NUL bytes, got {study_name!r}", path="--study")
    if value is None or value == "":
        return StorageSpec(None, Path(f"{study_name}.journal"))
    if "\x00" in value:
        raise ConfigError(f"expected a journal file path or a URL without NUL bytes, got {value!r}", path="--storage")
    if _SCHEME.match(value):
        if value.startswith("sqlite:///:memory:") or value == "sqlite://":
            raise ConfigError("expected a storage shared between runs, got an in-memory SQLite URL",
                              path="--storage")
        return StorageSpec(value, None)
    path = Path(value)
    if path.is_dir():
        raise ConfigError(f"expected a journal file path or a URL with a scheme, got the folder {value}",
                          path="--storage")
    return StorageSpec(None, path)


def open_storage(spec: StorageSpec) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``spec``; RDB storages get heartbeats and retry stale trials."""
    if spec.url is not None:
        engine_kwargs = {}
        if spec.url.startswith("sqlite"):
            # several processes write one SQLite file: wait for the lock instead of failing
            engine_kwargs = {"connect_args": {"timeout": 60}}
        else:
            engine_kwargs = {"pool_pre_ping": True}
        return _open_rdb(spec.url, engine_kwargs)
    assert spec.journal is not None
    spec.journal.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(spec.journal)))


def _open_rdb(url: str, engine_kwargs: dict) -> RDBStorage:
    """RDBStorage with heartbeats. Workers starting together on an empty database race to create
    its tables; the losers see a duplicate-object error and simply open it again."""
    import sqlalchemy.exc

    for attempt in range(8):
        try:
            with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=HEARTBEAT_INTERVAL,
                                  grace_period=GRACE_PERIOD,
                                  heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback())
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == 7:
                raise
            time.sleep(0.2 + random.random() * 0.5 * (attempt + 1))
    raise AssertionError("unreachable")
