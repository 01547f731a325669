"""Training logs: per-update metrics to CSV (and TensorBoard), stderr progress lines, learning-curve plots."""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path
from typing import Any


class MetricsLog:
    """Per-update metrics to a CSV (header grows when new keys appear) and, optionally, TensorBoard."""

    def __init__(self, path: Path, tensorboard_dir: Path | None, resume_after: int | None, purge_step: int | None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []
        if resume_after is not None and path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                self.columns = list(reader.fieldnames or [])
                self.rows = [
                    {k: _parse_number(v) for k, v in r.items()}
                    for r in reader
                    if r.get("update") and int(float(r["update"])) <= resume_after
                ]
        self._rewrite()
        self.writer = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except Exception:  # tensorboard is optional; torch raises ImportError without it
                SummaryWriter = None
            if SummaryWriter is not None:
                self.writer = SummaryWriter(str(tensorboard_dir), purge_step=purge_step)

    def _rewrite(self) -> None:
        _replace_csv(self.path, self.columns, self.rows)

    def log(self, row: dict[str, Any], step: int) -> None:
        """Append one row; rewrite the file only when it brings new columns."""
        self.rows.append(row)
        new = [k for k in row if k not in self.columns]
        if new:
            self.columns += new
            self._rewrite()
        else:
            with open(self.path, "a", newline="", encoding="utf-8") as fh:
                csv.DictWriter(fh, fieldnames=self.columns, restval="").writerow(row)
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _parse_number(text: Any) -> Any:
    """A CSV cell back to int/float where it is one (rows reloaded on resume)."""
    if text in ("", None):
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _replace_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` under ``columns`` to a temporary file, then ``os.replace`` it onto ``path``."""
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` (columns: every key, first-seen order) atomically; nothing when there are none."""
    if not rows:
        return
    _replace_csv(path, list(dict.fromkeys(k for r in rows for k in r)), rows)


def progress(text: str, enabled: bool) -> None:
    """Print one progress line to stderr when ``enabled``."""
    if enabled:
        print(text, file=sys.stderr, flush=True)


def format_return(value: float) -> str:
    """Mean episode return for the progress line; '-' when no episode ended during the update."""
    return "-" if value != value else f"{value:.4g}"


def format_duration(seconds: float) -> str:
    """``1h05m`` or ``4m07s`` for the progress line's ETA; '?' when unknown."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def _series_label(key: str) -> str:
    """Legend label of a metrics column: the term name for reward terms (``absolute/latency``)."""
    if key.startswith("reward_terms/"):
        name = key[len("reward_terms/"):]
        return name.rsplit("/", 1)[0] if name.endswith("/contribution") else name
    return key.split("/")[-1] if "/" in key else key


def _reward_term_keys(columns: Any) -> list[str]:
    """Reward-term columns worth plotting: contributions and the total when rewardkit names them so."""
    terms = sorted(k for k in columns if k.startswith("reward_terms/"))
    main = [k for k in terms if k.endswith("/contribution") or k == "reward_terms/total"]
    return main or terms


def plot_learning_curves(csv_path: str | os.PathLike, png_path: str | os.PathLike) -> Path | None:
    """Save a grid of learning curves from a ``metrics.csv``; returns the PNG path (None if no rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return None

    def series(key: str) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for r in rows:
            v = r.get(key, "")
            if v not in ("", None) and math.isfinite(float(v)):
                xs.append(float(r["global_step"]))
                ys.append(float(v))
        return xs, ys

    cols = rows[0].keys() | {k for r in rows for k in r}
    panels: list[tuple[str, list[str]]] = [
        ("episode return", ["episode_return_mean"]),
        ("entropy / log N", ["entropy_norm"]),
        ("approx KL, clip fraction", ["approx_kl", "clip_fraction"]),
        ("explained variance", ["explained_variance"]),
        ("losses", ["policy_loss", "value_loss"]),
        ("action share", sorted(k for k in cols if k.startswith("action_share/"))),
        ("reward terms (per-step mean)", _reward_term_keys(cols)),
        ("coefficients (log scale)", ["learning_rate", "ent_coef", "kl_coef"]),
        ("temperature, entropy multiplier", ["temperature", "entropy_scale"]),
        ("env steps / s", ["env_steps_per_s"]),
        ("wall-time share", ["time_share_policy", "time_share_env", "time_share_update"]),
        ("KL to the warm-start policy; argmax agreement", ["kl_warm_start", "kl_ref", "agree_warm_start"]),
    ]
    fig, axes = plt.subplots(3, 4, figsize=(18, 11), constrained_layout=True)
    for ax, (title, keys) in zip(axes.flat, panels, strict=False):
        for key in keys:
            xs, ys = series(key)
            if title.startswith("coefficients"):
                xs, ys = [x for x, y in zip(xs, ys, strict=True) if y > 0], [y for y in ys if y > 0]
            if xs:
                ax.plot(xs, ys, label=_series_label(key))
        if title.startswith("coefficients") and ax.lines:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("env steps")
        if len(keys) > 1 and ax.lines:
            ax.legend(fontsize=7)
    out = Path(png_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out

