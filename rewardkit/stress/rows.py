"""Reading ``rewardkit stress``'s rows: JSONL or CSV, one sample per row, its control in ``completion``.

Every problem names the file, the line (JSONL) or row (CSV), and what was expected. A row holds
the columns the config reads (``prompt``, ``reference``, any column a term's ``inputs`` map to)
and ``completion``, a completion that should be paid well: the *control*.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection

from ..errors import RewardKitError
from ..params import describe

#: the largest rows file read (the probes of each row are evaluated, so more rows only cost time)
MAX_ROWS_BYTES = 16 * 1024 * 1024
MAX_ROWS = 10_000
CONTROL = "completion"


class RowsError(RewardKitError):
    """A rows file that cannot be used: missing, malformed, or lacking a column the config reads."""


@dataclass(frozen=True)
class Row:
    """One sample: its index in the file, where it came from, and its columns (the control included)."""

    index: int
    where: str
    columns: dict[str, Any]

    @property
    def control(self) -> str:
        return self.columns[CONTROL]

    @property
    def prompt(self) -> str:
        value = self.columns.get("prompt", self.columns.get("question", ""))
        return value if isinstance(value, str) else ""

    @property
    def reference(self) -> str | None:
        value = self.columns.get("reference")
        if value is None or isinstance(value, bool):
            return None
        return value if isinstance(value, str) else _number_text(value)


def _number_text(value: Any) -> str | None:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def read_rows(path: str, reads: Collection[str], required: Collection[str], text_keys: Collection[str]) -> list[Row]:
    """The rows of ``path`` (``.csv`` as CSV, anything else as JSONL), checked against what the config reads.

    ``required`` keys must be in every row (``prompt`` may come from a ``question`` column, as
    ``examples/monitor/train.py`` writes it); CSV cells of keys the config reads as numbers are
    converted, others stay text.
    """
    file = Path(path)
    try:
        raw = file.read_bytes() if file.stat().st_size <= MAX_ROWS_BYTES else None
    except FileNotFoundError:
        raise RowsError(f"{path}: expected an existing JSONL or CSV file of rows, got a missing path") from None
    except OSError as exc:
        raise RowsError(f"{path}: cannot read the rows: {exc.strerror or exc}") from None
    if raw is None:
        raise RowsError(f"{path}: expected a rows file of at most {MAX_ROWS_BYTES} bytes, got a larger one")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RowsError(f"{path}: expected UTF-8 text: {exc}") from None
    records = _csv(text, path, reads, text_keys) if file.suffix.lower() == ".csv" else _jsonl(text, path)
    if not records:
        raise RowsError(f"{path}: expected at least one row, got none")
    if len(records) > MAX_ROWS:
        raise RowsError(f"{path}: expected at most {MAX_ROWS} rows, got {len(records)}")
    rows = []
    for n, (where, columns) in enumerate(records):
        if "prompt" not in columns and isinstance(columns.get("question"), str):
            columns["prompt"] = columns["question"]
        control = columns.get(CONTROL)
        if not isinstance(control, str):
            raise RowsError(f"{where}: expected a {CONTROL!r} column holding the control (a completion that should "
                            f"be paid well) as text, got {describe(control) if CONTROL in columns else 'no such column'}")
        missing = sorted(k for k in required if k not in columns)
        if missing:
            raise RowsError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(repr(k) for k in missing)} that the config reads; the row has: "
                            f"{', '.join(sorted(columns))}")
        rows.append(Row(n, where, columns))
    return rows


def _jsonl(text: str, path: str) -> list[tuple[str, dict[str, Any]]]:
    records = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise RowsError(f"{where}: expected one JSON object per line: {describe(str(exc))}") from None
        if not isinstance(value, dict):
            raise RowsError(f"{where}: expected a JSON object (a row's columns), got {describe(value)}")
        for key, cell in value.items():
            if isinstance(cell, float) and not math.isfinite(cell):
                raise RowsError(f"{where}: column {key!r}: expected a finite number, got {cell}")
        records.append((where, value))
    return records


def _csv(text: str, path: str, reads: Collection[str], text_keys: Collection[str]) -> list[tuple[str, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise RowsError(f"{path}: expected a header row naming the columns, got an empty file")
    records = []
    try:
        for n, row in enumerate(reader, start=2):
            where = f"{path}:{n}"
            if None in row:
                raise RowsError(f"{where}: expected {len(reader.fieldnames)} cells as in the header, got more")
            columns: dict[str, Any] = {}
            for key, cell in row.items():
                if cell is None:
                    raise RowsError(f"{where}: expected {len(reader.fieldnames)} cells as in the header, got fewer")
                columns[key] = _cell(cell, key, where) if key in reads and key not in text_keys else cell
            records.append((where, columns))
    except csv.Error as exc:
        raise RowsError(f"{path}: expected CSV: {exc}") from None
    return records


def _cell(cell: str, key: str, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise RowsError(f"{where}: column {key!r}: expected a number (the config reads it as one), "
                        f"got {describe(cell)}") from None
    if not math.isfinite(value):
        raise RowsError(f"{where}: column {key!r}: expected a finite number, got {cell}")
    return value
