"""The one reader of request-length traces: Vidur's CSV columns ``num_prefill_tokens``,
``num_decode_tokens`` and, optionally, ``arrived_at`` (seconds). Standard library only.

Every problem is a :class:`TraceError` naming the file and, for a bad value, its line:
``trace.csv: line 3: expected whole token counts from 0 to 2^53 ... got ['0', '0']``. The
simulator locates it in the env YAML too (``env.yaml: trace_file: trace.csv: ...``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LENGTH_COLUMNS = ("num_prefill_tokens", "num_decode_tokens")
TIME_COLUMN = "arrived_at"
#: the largest token count a float holds exactly.
MAX_TRACE_TOKENS = 2**53


class TraceError(ValueError):
    """A trace file that is not a text CSV of request lengths; the message names the file (and line)."""


@dataclass(frozen=True)
class Trace:
    """A trace's columns in file order: prompt and output lengths, and arrival times when it has them."""

    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray
    arrived_at: np.ndarray | None
    source: str

    def __len__(self) -> int:
        return len(self.prefill_tokens)


def _cannot_read(path: str, reason: str) -> TraceError:
    return TraceError(f"{path}: expected a UTF-8 CSV text file of request lengths, got one that cannot be read as "
                      f"CSV ({reason})")


@lru_cache(maxsize=8)
def read_trace(path: str) -> Trace:
    """The trace at ``path`` (cached: a trace is read once per process)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _cannot_read(path, f"bytes that are not UTF-8: {exc.reason}") from None
    except csv.Error as exc:
        raise _cannot_read(path, str(exc)[:200]) from None
    if not rows or not rows[0]:
        raise _cannot_read(path, "no header")
    header = [c.strip() for c in rows[0]]
    for col in LENGTH_COLUMNS:
        if col not in header:
            raise TraceError(f"{path}: expected a column {col!r}, got columns {[c[:40] for c in header[:10]]}")
    if len(rows) < 2:
        raise TraceError(f"{path}: expected a CSV with a header and at least one request, got none")
    p, d = header.index(LENGTH_COLUMNS[0]), header.index(LENGTH_COLUMNS[1])
    t = header.index(TIME_COLUMN) if TIME_COLUMN in header else None
    prefill = np.empty(len(rows) - 1, dtype=np.int64)
    decode = np.empty(len(rows) - 1, dtype=np.int64)
    times = np.empty(len(rows) - 1) if t is not None else None
    for i, row in enumerate(rows[1:]):
        line = i + 2
        lengths = _whole_counts(row, (p, d))
        if lengths is None:
            got = [str(row[k])[:40] if k < len(row) else "" for k in (p, d)]
            raise TraceError(f"{path}: line {line}: expected whole token counts from 0 to 2^53 in num_prefill_tokens "
                             f"and num_decode_tokens, not both 0, got {got}")
        prefill[i], decode[i] = lengths
        if times is not None:
            try:
                value = float(row[t])
            except (IndexError, ValueError):
                value = math.nan
            if not (math.isfinite(value) and value >= 0):
                raise TraceError(f"{path}: line {line}: arrived_at: expected a non-negative number of seconds, got "
                                 f"{row[t][:40] if t < len(row) else ''!r}")
            times[i] = value
    if times is not None and np.any(np.diff(times) < 0):
        raise TraceError(f"{path}: arrived_at: expected non-decreasing times")
    return Trace(prefill, decode, times, path)


def _whole_counts(row: list[str], columns: tuple[int, int]) -> tuple[int, int] | None:
    """The two lengths of a row, or None when either is not a whole number in [0, 2^53] or both are 0."""
    out = []
    for k in columns:
        try:
            value = float(row[k])
        except (IndexError, ValueError):
            return None
        if not (math.isfinite(value) and 0 <= value <= MAX_TRACE_TOKENS and value == int(value)):
            return None
        out.append(int(value))
    return None if out[0] + out[1] <= 0 else (out[0], out[1])
