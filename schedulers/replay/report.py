"""What a replay found: the calibration error, each router's figures with paired intervals, JSON and a plot.

Each router's figure is its mean over seeds; its interval is the paired bootstrap interval of its
ratio to the logged router (:func:`~schedulers.evaluate.evaluation_results.paired_ratio_interval`,
90%, seeds resampled in pairs). The calibration error is the logged router's simulated figure over
its logged one, less 1 (+0.10: the simulator says 10% slower than what happened).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..evaluate.evaluation_results import paired_ratio_interval
from .logged import LoggedRun
from .runner import EpisodeResult

#: (key, label, what it is of a sample of requests)
METRICS = (("ttft_p50", "TTFT p50 (s)"), ("ttft_p99", "TTFT p99 (s)"), ("e2e_mean", "e2e mean (s)"),
           ("e2e_p99", "e2e p99 (s)"))


def figures(ttft: np.ndarray, e2e: np.ndarray) -> dict[str, float]:
    """TTFT p50/p99 and e2e mean/p99 of the completed requests (NaN when none)."""
    t, e = ttft[np.isfinite(ttft)], e2e[np.isfinite(e2e)]
    if not t.size or not e.size:
        return {k: math.nan for k, _ in METRICS}
    return {"ttft_p50": float(np.percentile(t, 50)), "ttft_p99": float(np.percentile(t, 99)),
            "e2e_mean": float(np.mean(e)), "e2e_p99": float(np.percentile(e, 99))}


def logged_figures(run: LoggedRun) -> dict[str, float]:
    """The logged requests' own figures."""
    return figures(np.array([r.ttft_s for r in run.requests]), np.array([r.e2e_s for r in run.requests]))


def episode_figures(result: EpisodeResult, overhead_s: float) -> dict[str, float]:
    """One episode's figures, the fitted per-request overhead added, and its cache hit rate."""
    out = figures(result.ttft + overhead_s, result.e2e + overhead_s)
    out["prefix_hit_rate"] = result.prefix_hit_rate
    return out


def summarize(run: LoggedRun, results: dict[str, list[EpisodeResult]], overhead_s: float, reference: str,
              *, speeds: Sequence[float], fit_gaps: Sequence[float], calibrated_by: str) -> dict[str, Any]:
    """The replay's findings as plain data (what ``--json`` prints; see the module doc)."""
    per_seed = {name: [episode_figures(r, overhead_s) for r in rs] for name, rs in results.items()}
    seeds = [r.seed for r in results[reference]]
    keys = [k for k, _ in METRICS] + ["prefix_hit_rate"]
    routers: dict[str, Any] = {}
    for name, rows in per_seed.items():
        entry: dict[str, Any] = {k: _mean([row[k] for row in rows]) for k in keys}
        entry["per_seed"] = {k: [row[k] for row in rows] for k in keys}
        entry["vs_logged"] = {}
        for k, _ in METRICS:
            mine, theirs = entry["per_seed"][k], [row[k] for row in per_seed[reference]]
            ratio = _mean(mine) / _mean(theirs) if _mean(theirs) else math.nan
            low, high = paired_ratio_interval(mine, theirs) if all(map(math.isfinite, mine + theirs)) else (math.nan, math.nan)
            entry["vs_logged"][k] = {"ratio": ratio, "interval_90": [low, high]}
        routers[name] = entry
    logged = logged_figures(run)
    simulated = {k: routers[reference][k] for k, _ in METRICS}
    calibration = {k: {"simulated": simulated[k], "logged": logged[k],
                       "error": simulated[k] / logged[k] - 1.0 if logged[k] else math.nan} for k, _ in METRICS}
    candidates = [n for n in routers if n != reference] or list(routers)
    best = {k: min(candidates, key=lambda n: (routers[n][k], n)) for k in ("ttft_p50", "ttft_p99")}
    return {
        "logs": list(run.sources), "requests": len(run.requests), "not_answered": run.dropped,
        "logged_router": run.router, "calibrated_router": reference, "calibrated_by": calibrated_by,
        "replicas": list(run.replicas), "fitted_speeds": list(speeds), "overhead_s": overhead_s,
        "kv_tokens": list(run.kv_tokens or [None] * len(run.replicas)),
        "speed_fit_gaps": list(fit_gaps), "seeds": seeds, "prompt_blocks": any(r.prompt_blocks for r in run.requests),
        "calibration": calibration, "routers": routers, "best": best,
    }


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def format_report(summary: dict[str, Any]) -> str:
    """The calibration lines, then one row per router (figures, ratio to the logged router and interval)."""
    lines = [f"replay of {', '.join(Path(s).name for s in summary['logs'])}: {summary['requests']} requests, "
             f"logged router {summary['logged_router'] or '?'}, seeds {len(summary['seeds'])}",
             "fitted speeds: " + ", ".join(f"{r} {s:.3g}" for r, s in zip(summary["replicas"], summary["fitted_speeds"],
                                                                           strict=True))
             + f"; per-request overhead {summary['overhead_s'] * 1000:.1f} ms",
             "KV cache per replica (the engines' reports): "
             + ", ".join("not logged (the env's)" if t is None else f"{t:,} tokens" for t in summary.get("kv_tokens") or [])
             if any(t is not None for t in summary.get("kv_tokens") or []) else
             "KV cache per replica: not in the log (the env's kv_blocks; a gateway that scrapes its engines logs it)",
             f"calibration ({summary['calibrated_router']} replayed, {summary['calibrated_by']}): simulated vs logged"]
    for key, label in METRICS:
        c = summary["calibration"][key]
        lines.append(f"  {label:<14} {c['simulated']:8.3f} vs {c['logged']:8.3f}  error {c['error']:+.1%}")
    lines.append("")
    head = f"{'router':<40} {'TTFT p50':>9} {'TTFT p99':>9} {'e2e mean':>9} {'hit rate':>8}  TTFT p99 vs logged [90%]"
    lines += [head, "-" * len(head)]
    for name, r in summary["routers"].items():
        v = r["vs_logged"]["ttft_p99"]
        lo, hi = v["interval_90"]
        lines.append(f"{name:<40} {r['ttft_p50']:9.3f} {r['ttft_p99']:9.3f} {r['e2e_mean']:9.3f} "
                     f"{r['prefix_hit_rate']:8.1%}  {v['ratio']:.2f}x [{lo:.2f}, {hi:.2f}]")
    lines.append(f"best TTFT p50: {summary['best']['ttft_p50']}; best TTFT p99: {summary['best']['ttft_p99']}")
    return "\n".join(lines)


def to_json(summary: dict[str, Any]) -> str:
    """One JSON object (NaN written as null)."""
    return json.dumps(_finite(summary), indent=2)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def plot_ttft(results: dict[str, list[EpisodeResult]], overhead_s: float, logged: np.ndarray, path: str | Path) -> Path:
    """Each router's TTFT distribution (a CDF pooled over seeds) beside the logged one, saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, rs in results.items():
        t = np.sort(np.concatenate([r.ttft for r in rs]) + overhead_s)
        t = t[np.isfinite(t)]
        ax.plot(t, np.arange(1, t.size + 1) / t.size, label=name)
    t = np.sort(logged)
    ax.plot(t, np.arange(1, t.size + 1) / t.size, "k--", label="logged (what happened)")
    ax.set_xscale("log")
    ax.set_xlabel("time to first token (s)")
    ax.set_ylabel("share of requests")
    ax.set_title("replayed TTFT per router")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
