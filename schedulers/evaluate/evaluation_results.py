"""``EvaluationResults``: per-episode summaries of routers on paired seeds, their ratios and paired wins.

For each router, the mean over seeds of request end-to-end latency mean/p50/p99, time to first
token p50/p99, scheduling delay mean and throughput; the ratio of each to the baseline
(``round_robin``) and to the best heuristic on that metric; and paired wins (seeds on which the
router strictly beat the reference on that metric).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .plots import plot_results
from .tables import METRICS, WIN_METRICS, format_results


def paired_ratio_interval(
    mine: Sequence[float], theirs: Sequence[float], level: float = 0.9, resamples: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``mean(mine) / mean(theirs)``, resampling seeds in pairs.

    Both routers ran on the same seeds, so a resample draws seeds (with replacement) and keeps
    each seed's two values together. With a handful of seeds the interval is rough, but it tells
    a 1% difference that the seeds cannot resolve from one they can. Seeded: the same input gives
    the same interval.
    """
    a, b = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"expected two equally long non-empty sequences, got shapes {a.shape} and {b.shape}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    idx = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    ratios = a[idx].mean(axis=1) / b[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


@dataclass
class EvaluationResults:
    """Per-episode summaries and pooled latency samples of an evaluation."""

    env_name: str
    seeds: list[int]
    routers: list[str]
    heuristics: list[str]
    baseline: str
    #: one row per (router, seed): the env's EpisodeMetrics.summary() plus wall time.
    episodes: list[dict[str, Any]] = field(default_factory=list)
    #: router -> {"e2e": array, "ttft": array} pooled over seeds (for CDFs).
    samples: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def values(self, router: str, metric: str) -> np.ndarray:
        """The metric of ``router`` per seed, in ``self.seeds`` order."""
        by_seed = {row["seed"]: row[metric] for row in self.episodes if row["router"] == router}
        return np.array([by_seed[s] for s in self.seeds], dtype=np.float64)

    def best_heuristic(self, metric: str) -> str | None:
        """Heuristic with the best mean of ``metric`` over seeds (None without heuristics)."""
        direction = dict((k, d) for k, _, d in METRICS)[metric]
        best = None
        for name in self.heuristics:
            value = float(np.mean(self.values(name, metric)))
            if best is None or _better(value, best[1], direction):
                best = (name, value)
        return best[0] if best else None

    def table(self) -> list[dict[str, Any]]:
        """One row per router: metric means, ratios to the baseline and best heuristic, paired wins."""
        rows = []
        for router in self.routers:
            row: dict[str, Any] = {"router": router, "episodes": len(self.seeds)}
            for key, _, _ in METRICS:
                mean = float(np.mean(self.values(router, key)))
                row[key] = mean
                base = float(np.mean(self.values(self.baseline, key)))
                row[f"{key}_vs_{self.baseline}"] = mean / base if base else math.nan
                best = self.best_heuristic(key)
                if best is not None:
                    best_value = float(np.mean(self.values(best, key)))
                    row[f"{key}_vs_best_heuristic"] = mean / best_value if best_value else math.nan
                    row[f"{key}_best_heuristic"] = best
            for key in WIN_METRICS:
                direction = dict((k, d) for k, _, d in METRICS)[key]
                mine = self.values(router, key)
                for label, ref in (("baseline", self.baseline), ("best_heuristic", self.best_heuristic(key))):
                    if ref is None:
                        continue
                    theirs = self.values(ref, key)
                    row[f"{key}_wins_vs_{label}"] = int(sum(_better(a, b, direction) for a, b in zip(mine, theirs, strict=True)))
            rows.append(row)
        return rows

    def format_table(self) -> str:
        """Plain-text tables for the terminal: the metrics, then ratios and paired wins."""
        return format_results(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env_name,
            "seeds": self.seeds,
            "routers": self.routers,
            "heuristics": self.heuristics,
            "baseline": self.baseline,
            "table": self.table(),
            "episodes": self.episodes,
        }

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``summary.csv``, ``episodes.csv``, ``results.json`` and ``latency.png``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "summary_csv": out / "summary.csv",
            "episodes_csv": out / "episodes.csv",
            "json": out / "results.json",
            "plot": out / "latency.png",
        }
        _write_csv(paths["summary_csv"], self.table())
        _write_csv(paths["episodes_csv"], self.episodes)
        paths["json"].write_text(json.dumps(_plain(self.to_dict()), indent=2))
        self.plot(paths["plot"])
        return paths

    def plot(self, path: str | Path) -> None:
        """Latency CDFs (e2e, TTFT) and bars of key metrics relative to the baseline, saved as PNG."""
        plot_results(self, path)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _plain(v) for k, v in row.items()})
