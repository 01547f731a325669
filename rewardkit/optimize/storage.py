"""Where a study lives: an RDB URL (SQLite, PostgreSQL, ...) or a journal file.

The rule of ``rewardkit optimize --storage``: a value with a URL scheme (``sqlite:///s.db``,
``postgresql://user@host/db``) is an Optuna ``RDBStorage``, with heartbeats so that a trial whose
worker died is failed and retried (``RetryHeartbeatStaleTrialCallback``); anything else is the
path of a journal file (created when absent), Optuna's storage for several processes on one
machine. The default is ``<study>.journal`` in the working directory. Journal storages have no
heartbeats in Optuna; :mod:`rewardkit.optimize.recovery` handles killed workers there.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage

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
    #: an Optuna storage object given to the API (e.g. ``InMemoryStorage`` in tests): one process only
    instance: optuna.storages.BaseStorage | None = None

    @property
    def shareable(self) -> bool:
        """Whether worker processes can share the study through it (not an in-process storage object)."""
        return self.instance is None

    def describe(self) -> str:
        if self.instance is not None:
            return f"{type(self.instance).__name__} (this process only)"
        return self.url if self.url is not None else str(self.journal)

    def artifacts_root(self) -> Path:
        """Folder next to the study: the journal's or SQLite file's folder, else the working one."""
        if self.instance is not None:
            return Path(".")
        if self.journal is not None:
            return self.journal.parent
        assert self.url is not None
        if self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
            return Path(self.url[len("sqlite:///"):]).parent
        return Path(".")


def check_study_name(study_name: str) -> None:
    """A study name names the journal file and the trial folder: no path separators, no ``.``/``..``."""
    if not isinstance(study_name, str) or not study_name:
        raise ConfigError(f"expected a non-empty study name, got {study_name!r}", path="--study")
    bad = [c for c in ("/", "\\", "\x00") if c in study_name]
    if bad or study_name in (".", "..") or study_name != study_name.strip() or len(study_name) > 200:
        raise ConfigError(f"expected a study name of at most 200 characters without '/', '\\', NUL, surrounding "
                          f"spaces, and other than '.' or '..' (it names a folder next to the study), got "
                          f"{study_name!r}", path="--study")


def parse_storage(value: str | None, study_name: str) -> StorageSpec:
    """Apply the storage rule to ``value`` (None: ``<study_name>.journal`` here)."""
    check_study_name(study_name)
    if value is None or value == "":
        return StorageSpec(None, Path(f"{study_name}.journal"))
    if "\x00" in value:
        raise ConfigError(f"expected a journal file path or a URL without NUL bytes, got {value!r}", path="--storage")
    if _SCHEME.match(value):
        if value.startswith("sqlite:///:memory:") or value == "sqlite://":
            raise ConfigError("expected a storage shared between runs, got an in-memory SQLite URL",
                              path="--storage")
        return StorageSpec(value, None)
    if "://" in value or value.startswith("sqlite:"):
        raise ConfigError(f"expected a URL such as sqlite:///study.db or postgresql://user@host/db (a scheme of "
                          f"letters, digits, '+', '-' or '.'), or a journal file path, got {value!r}",
                          path="--storage")
    path = Path(value)
    if path.is_dir() or value.endswith(("/", os.sep)):
        raise ConfigError(f"expected a journal file path or a URL with a scheme, got the folder {value}",
                          path="--storage")
    return StorageSpec(None, path)


def open_storage(spec: StorageSpec) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``spec``; RDB storages get heartbeats and retry stale trials."""
    if spec.instance is not None:
        return spec.instance
    if spec.url is not None:
        engine_kwargs = {}
        if spec.url.startswith("sqlite"):
            # several processes write one SQLite file: wait for the lock instead of failing
            engine_kwargs = {"connect_args": {"timeout": 60}}
        else:
            engine_kwargs = {"pool_pre_ping": True}
        return _open_rdb(spec.url, engine_kwargs)
    assert spec.journal is not None
    return JournalStorage(JournalFileBackend(str(prepare_journal(spec.journal))))


def prepare_journal(path: Path) -> Path:
    """Check that ``path`` can hold a journal, and repair a record torn by a killed write.

    Creates the folder and the file when absent. An existing file must be a journal (its first
    line an Optuna record) and writable, else a located ``ConfigError``. Under the journal's lock, a
    last record cut off by a killed writer (no newline, or not JSON) is removed, and a torn record
    that later writes were appended to is split off them; the removed bytes are kept in
    ``<journal>.torn`` and a warning names them on stderr. So a study loses at most the torn record.
    """
    where = f"journal file {path}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.touch()
        if not path.is_file():
            raise ConfigError(f"expected a regular file for the {where}, got a device, pipe or socket",
                              path="--storage")
        with path.open("rb") as f:
            head = f.read(len(_RECORD_START))
    except OSError as exc:
        raise ConfigError(f"cannot create or read the {where}: {exc.strerror or exc}", path="--storage") from None
    if head and not head.startswith(_RECORD_START[:len(head)]):
        raise ConfigError(f"{path} exists and is not an Optuna journal file (its first line is not a journal "
                          "record); name a new file or an existing journal", path="--storage")
    if not os.access(path, os.W_OK):
        raise ConfigError(f"the {where} is not writable", path="--storage")
    if head:
        lock = JournalFileSymlinkLock(str(path))
        try:
            lock.acquire()
        except OSError as exc:
            raise ConfigError(f"cannot lock the {where}: {exc.strerror or exc}", path="--storage") from None
        try:
            for message in _repair(path):
                print(f"warning: {path}: {message}", file=sys.stderr)
        finally:
            lock.release()
    return path


_RECORD_START = b'{"op_code":'


def _is_record(line: bytes) -> bool:
    if not line.startswith(_RECORD_START):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _repair(path: Path) -> list[str]:
    """Remove torn records (see :func:`prepare_journal`); return what was done, one line each."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline: a record cut off before its newline
    if all(_is_record(line) for line in lines) and not tail:
        return []
    messages, torn, kept, rewrite = [], [], [], False
    for number, line in enumerate(lines, start=1):
        if _is_record(line):
            kept.append(line)
            continue
        start = line.rfind(_RECORD_START)
        if start > 0 and _is_record(line[start:]):  # a torn record, then a whole one appended after it
            torn.append(line[:start])
            kept.append(line[start:])
            rewrite = True
            messages.append(f"line {number}: removed a torn record ({start} bytes) that the next write was "
                            "appended to")
        elif number == len(lines) and not tail:
            torn.append(line)
            rewrite = True
            messages.append(f"line {number}: removed the last record, torn by a killed write ({len(line)} bytes)")
        else:
            raise ConfigError(f"line {number} of the journal file {path} is not a journal record and cannot be "
                              "repaired; restore the file from a copy or start a new study", path="--storage")
    if tail:
        torn.append(tail)
        messages.append(f"removed the last record, torn by a killed write ({len(tail)} bytes, no newline)")
    backup = path.with_name(path.name + ".torn")
    with backup.open("ab") as f:
        f.write(b"\n".join(torn) + b"\n")
    if not rewrite:
        with path.open("r+b") as f:  # only the tail goes: truncate in place, offsets stay valid
            f.truncate(len(data) - len(tail))
    else:
        tmp = path.with_name(path.name + ".repairing")
        tmp.write_bytes(b"".join(line + b"\n" for line in kept))
        os.replace(tmp, path)
    messages.append(f"the study lost only that record; its bytes are in {backup}")
    return messages


def _open_rdb(url: str, engine_kwargs: dict) -> RDBStorage:
    """RDBStorage with heartbeats. Workers starting together on an empty database race to create
    its tables; the losers see a duplicate-object error and simply open it again."""
    import sqlalchemy.exc

    shown = re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)  # never print a password
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
        except sqlalchemy.exc.NoSuchModuleError:
            scheme = url.split("://", 1)[0]
            raise ConfigError(f"unknown database scheme {scheme!r} in {shown}: expected a SQLAlchemy URL such as "
                              "sqlite:///study.db or postgresql://user@host/db, or a journal file path",
                              path="--storage") from None
        except ImportError as exc:
            raise ConfigError(f"the database driver for {shown} is not installed ({exc}); install it, e.g. "
                              "pip install 'psycopg[binary]' for PostgreSQL", path="--storage") from None
        except (sqlalchemy.exc.SQLAlchemyError, OSError, ValueError) as exc:
            first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
            raise ConfigError(f"cannot open the database {shown}: {first}", path="--storage") from None
    raise AssertionError("unreachable")
