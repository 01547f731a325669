"""Reading a training log into the monitor's records (TRL's log keys, one record per step).

Two formats:

- TRL's ``trainer_state.json``: its ``log_history`` entries that hold ``reward`` (the training
  logs; evaluation and the final summary entry are skipped), as they are.
- rewardkit's breakdown CSV (:class:`rewardkit.breakdown_logger.BreakdownLogger`): each row
  becomes ``step``, ``reward`` (``total/mean``), ``rewards/<term>/mean`` and ``/std`` (the term's
  raw value) for top-level terms. It has no completion lengths or GRPO groups, so the detectors
  reading those are not applicable to it.

A NaN or infinite value is read as missing (TRL writes NaN for a diverged ``grad_norm`` and for a
term no sample applied to; the callback reads it so too) and counted; a ``reward`` that is not a
number is an error; records out of step order are sorted (and the audit says so).

Every problem is a :class:`LogError` naming the file (and the entry or line) and what was expected.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

from ..errors import RewardKitError
from .history import TOTAL, term_mean, term_std

MAX_LOG_BYTES = 256 * 1024 * 1024  # a trainer_state.json of a long run is tens of megabytes


class LogError(RewardKitError):
    """A training log is missing, unreadable, malformed, or lacks the terms the config names."""


@dataclass
class LogRead:
    """A log's records in step order, and what reading them changed: the values read as missing
    (``key -> count``: NaN or infinite, as TRL writes for a diverged ``grad_norm`` or a term no
    sample applied to) and whether the steps had to be sorted."""

    records: list[dict[str, float]]
    missing: Counter = field(default_factory=Counter)
    reordered: bool = False

    def notes(self) -> list[str]:
        """One line per change, for the audit's output."""
        out = []
        if self.missing:
            listed = ", ".join(f"{k} ({n})" for k, n in sorted(self.missing.items()))
            out.append(f"read {sum(self.missing.values())} non-finite values as missing: {listed}")
        if self.reordered:
            out.append("the log's steps were out of order; they were sorted by step")
        return out


def read_log(path: str | Path) -> list[dict[str, float]]:
    """The per-step records of a ``trainer_state.json`` (or any JSON with ``log_history``) or a
    rewardkit breakdown CSV (by extension ``.csv``), in step order (see :func:`read_log_report`)."""
    return read_log_report(path).records


def read_log_report(path: str | Path) -> LogRead:
    """:func:`read_log` with what reading changed. A NaN or infinite value is read as missing (and
    counted); a ``reward`` that is not a number (a string, null) is an error, since dropping it
    would hide the steps a hack shows in; records out of step order are sorted; two records of
    the same step are an error."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise LogError(f"{path}: expected an existing log file (trainer_state.json or a breakdown CSV), "
                       "got a missing path") from None
    except OSError as exc:
        raise LogError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if size > MAX_LOG_BYTES:
        raise LogError(f"{path}: expected a log of at most {MAX_LOG_BYTES} bytes, got {size}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LogError(f"{path}: expected a readable UTF-8 file: {exc}") from None
    read = LogRead([])
    located = _from_csv(path, text, read) if path.suffix.lower() == ".csv" else _from_json(path, text, read)
    if not located:
        raise LogError(f"{path}: expected training logs with a reward, found none")
    steps = [record["step"] for _, record in located]
    if any(b < a for a, b in zip(steps, steps[1:], strict=False)):
        located.sort(key=lambda item: item[1]["step"])  # stable: equal steps keep their order
        read.reordered = True
    for (where_a, a), (where_b, b) in zip(located, located[1:], strict=False):
        if a["step"] == b["step"]:
            raise LogError(f"{path}: {where_a} and {where_b} both log step {a['step']:g}: expected one "
                           "training record per step (two runs' logs joined?)")
    read.records = [record for _, record in located]
    return read


def _from_json(path: Path, text: str, read: LogRead) -> list[tuple[str, dict[str, float]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogError(f"{path}: expected valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (RecursionError, ValueError) as exc:
        raise LogError(f"{path}: expected valid JSON: {exc}") from None
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise LogError(f"{path}: expected TRL's trainer_state.json (an object with a 'log_history' list)")
    records = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise LogError(f"{path}: log_history[{i}]: expected an object of metrics, got {type(entry).__name__}")
        if TOTAL not in entry:
            continue
        reward = entry[TOTAL]
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise LogError(f"{path}: log_history[{i}].{TOTAL}: expected a number (the step's mean reward), got "
                           f"{json.dumps(reward)[:60]}")
        record: dict[str, float] = {}
        for key, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):
                read.missing[key] += 1  # as the callback reads it: this step has no value for the key
                continue
            record[key] = float(value)
        if "step" not in record:
            raise LogError(f"{path}: log_history[{i}]: expected a finite number 'step' beside 'reward', got "
                           f"{json.dumps(entry.get('step'))}")
        records.append((f"log_history[{i}]", record))
    return records


def _from_csv(path: Path, text: str, read: LogRead) -> list[tuple[str, dict[str, float]]]:
    rows = list(csv.reader(text.splitlines()))
    if not rows or "step" not in rows[0] or "total/mean" not in rows[0]:
        raise LogError(f"{path}: expected a rewardkit breakdown CSV (columns step, calls, <term>/raw/mean, ..., "
                       "total/mean)")
    header = rows[0]
    records = []
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise LogError(f"{path}: line {n}: expected {len(header)} columns, got {len(row)}")
        cells = dict(zip(header, row, strict=True))
        record = {"step": _number(cells["step"], path, n, "step")}
        total = _number(cells["total/mean"], path, n, "total/mean", missing=True)
        if math.isfinite(total):
            record[TOTAL] = total
        else:
            read.missing[TOTAL] += 1
        for column, cell in cells.items():
            for stat, key in (("/raw/mean", term_mean), ("/raw/std", term_std)):
                term = column[:-len(stat)] if column.endswith(stat) else None
                if term and "/" not in term and cell != "":
                    value = _number(cell, path, n, column, missing=True)
                    if math.isfinite(value):
                        record[key(term)] = value
                    else:
                        read.missing[key(term)] += 1
        records.append((f"line {n}", record))
    return records


def _number(cell: str, path: Path, line: int, column: str, missing: bool = False) -> float:
    """The cell's number; ``nan``/``inf`` are returned as they are when ``missing`` allows them."""
    try:
        value = float(cell)
    except ValueError:
        raise LogError(f"{path}: line {line}, column {column}: expected a number, got {cell!r}") from None
    if not math.isfinite(value) and not missing:
        raise LogError(f"{path}: line {line}, column {column}: expected a finite number, got {cell!r}")
    return value


def check_terms(records: list[dict[str, Any]], terms: Collection[str], path: str | Path, config: str) -> None:
    """Every top-level term of the config must appear in the log (``rewards/<term>/mean``): a log
    lacking one was written with another reward, or its functions were not named after terms."""
    logged = sorted({key[len("rewards/"):-len("/mean")] for r in records for key in r
                     if key.startswith("rewards/") and key.endswith("/mean")})
    missing = [t for t in terms if not any(term_mean(t) in r for r in records)]
    if missing:
        raise LogError(f"{path}: no values for term{'s' if len(missing) > 1 else ''} "
                       f"{', '.join(repr(t) for t in missing)} of {config} (the log has rewards for: "
                       f"{', '.join(logged) or 'none'}); was it written with another reward config?")
