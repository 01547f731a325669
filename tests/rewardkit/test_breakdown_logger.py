"""Tests of BreakdownLogger: window statistics against NumPy, CSV layout, batches, bounded memory."""

from __future__ import annotations

import csv
import importlib.util
import tracemalloc
import warnings

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.breakdown_logger import STATS, BreakdownLogger

CONFIG = {
    "version": 1,
    "components": {
        "gain": {"type": "linear", "inputs": {"value": "x"}, "weight": 2.0},
        "costs": {
            "type": "group",
            "weight": -1.0,
            "components": {"late": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "inputs": {"latency": "y"}}},
        },
    },
}


def read_rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_scalar_windows_match_numpy(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(0)
    xs, ys = rng.normal(size=7), rng.uniform(0, 3, size=7)
    path = tmp_path / "terms.csv"
    with BreakdownLogger(path, every=3) as logger:
        outs = []
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            out = composer({"x": float(x), "y": float(y)})
            outs.append(out)
            logger.log(out, step=10 * (i + 1))
    rows = read_rows(path)
    assert [r["calls"] for r in rows] == ["3", "3", "1"]  # close() flushed the partial window
    assert [r["step"] for r in rows] == ["30", "60", "70"]
    for row, chunk in zip(rows, (outs[0:3], outs[3:6], outs[6:7]), strict=True):
        for series, values in {
            "gain/raw": [o.terms["gain"].raw for o in chunk],
            "gain/contribution": [o.terms["gain"].contribution for o in chunk],
            "costs/late/raw": [o.terms["costs/late"].raw for o in chunk],
            "costs/contribution": [o.terms["costs"].contribution for o in chunk],
            "total": [o.total for o in chunk],
        }.items():
            v = np.array(values)
            assert float(row[f"{series}/mean"]) == pytest.approx(v.mean(), abs=1e-12)
            assert float(row[f"{series}/std"]) == pytest.approx(v.std(), abs=1e-9)
            assert float(row[f"{series}/min"]) == pytest.approx(v.min(), abs=1e-12)
            assert float(row[f"{series}/max"]) == pytest.approx(v.max(), abs=1e-12)
            assert row[f"{series}/count"] == str(len(chunk))


def test_header_lists_every_term_field_and_stat(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    logger = BreakdownLogger(tmp_path / "h.csv", every=1)
    logger.log(composer({"x": 1.0, "y": 2.0}))
    logger.close()
    header = (tmp_path / "h.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["step", "calls"]
    names = ["gain", "costs", "costs/late"]
    expected = [f"{n}/{field}/{s}" for field in ("raw", "contribution") for n in names for s in STATS]
    expected += [f"total/{s}" for s in STATS]
    assert sorted(header[2:]) == sorted(expected)


def test_batched_outputs_count_each_environment(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(1)
    path = tmp_path / "batch.csv"
    logger = BreakdownLogger(path, every=4)
    totals, raws = [], []
    for _ in range(4):
        out = composer({"x": rng.normal(size=5), "y": rng.uniform(0, 3, size=5)})
        totals.append(out.total)
        raws.append(out.terms["costs/late"].raw)
        logger.log(out)
    assert logger.rows_written == 1
    logger.close()
    (row,) = read_rows(path)
    assert row["total/count"] == "20"
    t, r = np.concatenate(totals), np.concatenate(raws)
    assert float(row["total/mean"]) == pytest.approx(t.mean(), abs=1e-12)
    assert float(row["total/min"]) == pytest.approx(t.min(), abs=1e-12)
    assert float(row["costs/late/raw/max"]) == pytest.approx(r.max(), abs=1e-12)
    assert float(row["costs/late/raw/std"]) == pytest.approx(r.std(), abs=1e-9)


def test_memory_does_not_grow_with_steps_in_a_window(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    out = composer({"x": np.ones(8), "y": np.full(8, 2.0)})
    logger = BreakdownLogger(tmp_path / "m.csv", every=10**9)  # never flushes on its own
    logger.log(out)
    tracemalloc.start()
    for _ in range(200):
        logger.log(out)
    after_200 = tracemalloc.get_traced_memory()[0]
    for _ in range(5000):
        logger.log(out)
    after_5200 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after_5200 - after_200 < 4096  # a growing list would hold thousands of entries
    row = logger.flush()
    assert row is not None and row["total/count"] == 5201 * 8


def test_flush_on_empty_window_writes_nothing(tmp_path):
    logger = BreakdownLogger(tmp_path / "e.csv", every=2)
    assert logger.flush() is None
    logger.close()
    assert not (tmp_path / "e.csv").exists()  # no output was ever logged


def test_changing_terms_is_an_error(tmp_path):
    logger = BreakdownLogger(tmp_path / "c.csv", every=5)
    logger.log(RewardComposer.from_dict(CONFIG)({"x": 1.0, "y": 1.0}))
    other = RewardComposer.from_dict({"version": 1, "components": {"only": {"type": "linear"}}})
    with pytest.raises(ValueError, match="terms changed"):
        logger.log(other({"value": 1.0}))
    logger.close()


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_every_must_be_a_positive_integer(tmp_path, every):
    with pytest.raises(ValueError, match="every"):
        BreakdownLogger(tmp_path / "x.csv", every=every)


class RecordingWriter:
    """Stands in for a TensorBoard SummaryWriter."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.flushes = 0
        self.closed = False

    def add_scalar(self, tag, value, step=None):
        self.scalars.append((tag, value, step))

    def flush(self):
        self.flushes += 1

    def close(self):
        self.closed = True


def test_writer_receives_the_window_means(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    writer = RecordingWriter()
    logger = BreakdownLogger(tmp_path / "w.csv", every=2, writer=writer)
    logger.log(composer({"x": 1.0, "y": 0.0}), step=1)
    logger.log(composer({"x": 3.0, "y": 0.0}), step=2)
    logger.close()
    scalars = {tag: (value, step) for tag, value, step in writer.scalars}
    assert scalars["reward/gain/raw"] == (2.0, 2)
    assert scalars["reward/gain/contribution"] == (4.0, 2)
    assert scalars["reward/total"] == (4.0, 2)
    assert writer.flushes == 1 and writer.closed


def test_tensorboard_is_optional(tmp_path):
    composer = RewardComposer.from_dict(CONFIG)
    available = importlib.util.find_spec("tensorboard") is not None and importlib.util.find_spec("torch") is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logger = BreakdownLogger(tmp_path / "tb.csv", every=1, tensorboard_dir=tmp_path / "tb")
    logger.log(composer({"x": 1.0, "y": 0.0}))
    logger.close()
    assert len(read_rows(tmp_path / "tb.csv")) == 1  # CSV is written either way
    if available:
        assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    else:
        assert any("TensorBoard is not available" in str(w.message) for w in caught)
        assert logger.writer is None
