"""``BreakdownLogger``: per-term reward statistics over windows of steps, written as CSV rows.

Each :meth:`BreakdownLogger.log` folds one ``RewardOutput`` (scalar or batched) into running sums,
minima and maxima, so a step costs the same however long the window is (no lists grow). Every
``every`` calls the window is flushed: one CSV row with, for each term's ``raw`` and
``contribution`` and for the ``total``, the mean, std, min, max and count of the values seen
(a batched output contributes one value per environment). Optionally the means also go to
TensorBoard, when ``tensorboard_dir`` is given and ``torch.utils.tensorboard`` and the
``tensorboard`` package are importable; otherwise the logger warns once and writes CSV only.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import warnings
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from .composer import RewardOutput

STATS = ("mean", "std", "min", "max", "count")
FIELDS = ("raw", "contribution")


class ScalarWriter(Protocol):
    """What the logger needs of a TensorBoard ``SummaryWriter``."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None) -> Any: ...

    def flush(self) -> Any: ...

    def close(self) -> Any: ...


def tensorboard_writer(log_dir: str | Path) -> ScalarWriter | None:
    """A ``torch.utils.tensorboard.SummaryWriter`` for ``log_dir``, or None if unavailable.

    Looks for the ``tensorboard`` package before importing torch, so a missing TensorBoard costs
    nothing.
    """
    if importlib.util.find_spec("tensorboard") is None or importlib.util.find_spec("torch") is None:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # noqa: BLE001 - any import failure means "no TensorBoard"
        return None
    return SummaryWriter(log_dir=str(log_dir))


class _Accumulator:
    """Running count, sum, sum of squares, min and max of a fixed number of series."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.clear()

    def clear(self) -> None:
        self.count = np.zeros(self.n)
        self.total = np.zeros(self.n)
        self.squares = np.zeros(self.n)
        self.low = np.full(self.n, math.inf)
        self.high = np.full(self.n, -math.inf)

    def add_scalars(self, values: np.ndarray) -> None:
        self.count += 1.0
        self.total += values
        self.squares += values * values
        np.minimum(self.low, values, out=self.low)
        np.maximum(self.high, values, out=self.high)

    def add_batch(self, values: np.ndarray) -> None:
        """``values`` has shape (n_series, n_envs)."""
        self.count += values.shape[1]
        self.total += values.sum(axis=1)
        self.squares += (values * values).sum(axis=1)
        np.minimum(self.low, values.min(axis=1), out=self.low)
        np.maximum(self.high, values.max(axis=1), out=self.high)

    def stats(self) -> dict[str, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = self.total / self.count
            var = np.maximum(self.squares / self.count - mean * mean, 0.0)
        return {"mean": mean, "std": np.sqrt(var), "min": self.low, "max": self.high, "count": self.count}


class BreakdownLogger:
    """Accumulate per-term statistics and write a CSV row every ``every`` calls to :meth:`log`.

    Columns: ``step`` (the step of the last logged output), ``calls``, then
    ``<series>/<stat>`` for series ``<term>/raw``, ``<term>/contribution``, ``total`` and
    ``<term>/info/<key>`` (what a term reports about its calls, ``TermOutput.info``) and stats
    mean, std, min, max, count. The term names are fixed by the first output logged.
    Use as a context manager, or call :meth:`close` to flush the last partial window.
    """

    def __init__(self, path: str | Path, every: int = 100, *, tensorboard_dir: str | Path | None = None,
                 writer: ScalarWriter | None = None) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every: expected a positive integer, got {every!r}")
        self.path = Path(path)
        self.every = every
        self.writer = writer
        if writer is None and tensorboard_dir is not None:
            self.writer = tensorboard_writer(tensorboard_dir)
            if self.writer is None:
                warnings.warn("TensorBoard is not available (needs torch and the tensorboard package); "
                              f"writing {self.path} only", RuntimeWarning, stacklevel=2)
        self.series: list[str] | None = None
        self._names: tuple[str, ...] = ()
        self._info_keys: list[tuple[str, str]] = []
        self._acc: _Accumulator | None = None
        self._calls = 0
        self._last_step = 0
        self._file: TextIO | None = None
        self._csv: Any = None
        self.rows_written = 0

    # ---- logging ------------------------------------------------------------------------------
    def log(self, out: RewardOutput, step: int | None = None) -> None:
        """Fold ``out`` into the current window; flush when the window holds ``every`` calls."""
        terms = out.terms
        if self._acc is None:
            self._start(tuple(terms), terms)
        elif tuple(terms) != self._names:
            raise ValueError(f"the reward's terms changed from {list(self._names)} to {list(terms)}; "
                             "use one BreakdownLogger per composer")
        values = [t.raw for t in terms.values()] + [t.contribution for t in terms.values()] + [out.total]
        values += [terms[name].info.get(key, math.nan) for name, key in self._info_keys]
        assert self._acc is not None
        if isinstance(out.total, np.ndarray):
            n = out.total.shape[0]
            self._acc.add_batch(np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in values]))
        else:
            self._acc.add_scalars(np.array(values, dtype=np.float64))
        self._calls += 1
        self._last_step = self._last_step + 1 if step is None else int(step)
        if self._calls >= self.every:
            self.flush()

    def _start(self, names: tuple[str, ...], terms: dict[str, Any]) -> None:
        self._names = names
        # a term's extra numbers (``TermOutput.info``: a remote term's latency, failures...) as
        # series of their own, named by the first call's keys
        self._info_keys = [(n, key) for n in names for key in terms[n].info]
        self.series = [f"{n}/raw" for n in names] + [f"{n}/contribution" for n in names] + ["total"]
        self.series += [f"{n}/info/{key}" for n, key in self._info_keys]
        self._acc = _Accumulator(len(self.series))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        self._csv.writerow(self.header())

    def header(self) -> list[str]:
        """The CSV column names (available after the first :meth:`log`)."""
        if self.series is None:
            raise RuntimeError("the header is known after the first log() call")
        return ["step", "calls"] + [f"{s}/{stat}" for s in self.series for stat in STATS]

    def flush(self) -> dict[str, float] | None:
        """Write the current window as a row (if it holds anything) and start a new one.

        Returns the row as a mapping (None for an empty window).
        """
        if self._acc is None or self._calls == 0:
            return None
        stats = self._acc.stats()
        row: dict[str, float] = {"step": self._last_step, "calls": self._calls}
        for i, series in enumerate(self.series or []):
            for stat in STATS:
                row[f"{series}/{stat}"] = float(stats[stat][i])
        self._csv.writerow([_cell(row[c]) for c in self.header()])
        assert self._file is not None
        self._file.flush()
        if self.writer is not None:
            for i, series in enumerate(self.series or []):
                self.writer.add_scalar(f"reward/{series}", float(stats["mean"][i]), self._last_step)
            self.writer.flush()
        self.rows_written += 1
        self._acc.clear()
        self._calls = 0
        return row

    def close(self) -> None:
        """Flush the last partial window and close the CSV file (and the TensorBoard writer)."""
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def __enter__(self) -> "BreakdownLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _cell(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return repr(float(value))
