"""What the demo prints and draws: held-out scores before and after, paired intervals over seeds,
and each term's learning curve."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from .training import RunResult


def paired_interval(differences: Sequence[float], level: float = 0.9) -> tuple[float, float, float]:
    """Mean of per-seed paired differences and its Student-t interval (``nan`` bounds with one seed)."""
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean())
    if len(d) < 2:
        return mean, math.nan, math.nan
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return mean, mean - half, mean + half


def table(before: tuple[float, float], results: list[RunResult], arms: Sequence[str]) -> str:
    """Held-out compliance and correctness per arm (mean over seeds), and composed minus sparse,
    paired by seed with a 90% interval."""
    lines = [f"{'reward':<10} {'seeds':>5} {'compliance':>11} {'correct':>8} {'no-signal groups':>17} {'minutes/run':>12}",
             f"{'(before)':<10} {'':>5} {before[0]:>11.0%} {before[1]:>8.0%} {'':>17} {'':>12}"]
    by_arm = {arm: sorted((r for r in results if r.arm == arm), key=lambda r: r.seed) for arm in arms}
    for arm, runs in by_arm.items():
        if runs:
            # TRL's frac_reward_zero_std: groups whose completions all scored the same (no gradient)
            flat = np.mean([row.get("frac_reward_zero_std", np.nan) for r in runs for row in r.log])
            lines.append(f"{arm:<10} {len(runs):>5} {np.mean([r.compliance for r in runs]):>11.0%} "
                         f"{np.mean([r.correctness for r in runs]):>8.0%} {flat:>17.0%} "
                         f"{np.mean([r.seconds for r in runs]) / 60:>12.1f}")
    first, second = arms
    pairs = [(a, b) for a in by_arm[first] for b in by_arm[second] if a.seed == b.seed]
    if pairs:
        for metric in ("compliance", "correctness"):
            mean, low, high = paired_interval([getattr(b, metric) - getattr(a, metric) for a, b in pairs])
            lines.append(f"{second} - {first}, {metric}: {mean:+.0%} (90% interval {low:+.0%} to {high:+.0%}, "
                         f"{len(pairs)} paired seeds)")
    return "\n".join(lines)


def curve_terms(results: list[RunResult]) -> list[str]:
    """Every term some run logged, in first-seen order."""
    names: list[str] = []
    for r in results:
        for row in r.log:
            for key in row:
                if key.startswith("rewardkit/") and key.endswith("/raw") and key.split("/")[1] not in names:
                    names.append(key.split("/")[1])
    return names


def plot_curves(results: list[RunResult], arms: Sequence[str], path: Path) -> Path:
    """One panel per term: its raw value per GRPO step (mean of the step's completions), each arm's
    seeds averaged, plus the term's weight in the composed reward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    terms = curve_terms(results)
    fig, axes = plt.subplots(1, len(terms), figsize=(3.6 * len(terms), 3.2), squeeze=False)
    for ax, term in zip(axes[0], terms, strict=True):
        for arm in arms:
            runs = [r for r in results if r.arm == arm and r.log and f"rewardkit/{term}/raw" in r.log[0]]
            if not runs:
                continue
            steps = min(len(r.log) for r in runs)
            values = np.mean([[row[f"rewardkit/{term}/raw"] for row in r.log[:steps]] for r in runs], axis=0)
            ax.plot(np.arange(1, steps + 1), values, marker="o", ms=3, label=f"{arm} ({len(runs)} seeds)")
            if arm == arms[-1]:
                weights = [row[f"rewardkit/{term}/weight"] for row in runs[0].log[:steps]]
                ax.plot(np.arange(1, steps + 1), weights, ls="--", color="grey", label="weight")
        ax.set_title(term)
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("raw value (batch mean)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_held_out(before: tuple[float, float], results: list[RunResult], arms: Sequence[str], path: Path) -> Path:
    """Held-out compliance and correctness before training and after, per seed and arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2))
    for ax, metric, start in zip(axes, ("compliance", "correctness"), before, strict=True):
        ax.bar(0, start, color="lightgrey")
        for i, arm in enumerate(arms, start=1):
            values = [getattr(r, metric) for r in results if r.arm == arm]
            ax.bar(i, np.mean(values) if values else 0.0, alpha=0.6)
            ax.scatter([i] * len(values), values, color="black", s=12, zorder=3)
        ax.set_xticks(range(len(arms) + 1), ["before", *arms])
        ax.set_ylim(0, 1)
        ax.set_title(f"held-out {metric}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---- the benchmark's tables and curves (benchmarks/bench_grpo_tasks.py) -------------------------
def _paired(runs: list[RunResult], arms: Sequence[str]) -> list[tuple[RunResult, RunResult]]:
    first, second = arms
    by_seed = {r.seed: r for r in runs if r.arm == first}
    return [(by_seed[r.seed], r) for r in sorted(runs, key=lambda r: r.seed) if r.arm == second and r.seed in by_seed]


def seed_table(runs: list[RunResult], metrics: Sequence[str], arms: Sequence[str],
               before: dict[str, float] | None = None) -> str:
    """Held-out metrics per seed and arm, with the per-seed difference (second arm minus first)."""
    first, second = arms
    head = f"{'seed':>6} " + " ".join(f"{f'{arm} {m}':>20}" for m in metrics for arm in arms)
    lines = [head + " " + " ".join(f"{f'diff {m}':>14}" for m in metrics)]
    if before is not None:
        lines.append(f"{'before':>6} " + " ".join(f"{before[m]:>20.1%}" for m in metrics for _ in arms))
    for a, b in _paired(runs, arms):
        lines.append(f"{a.seed:>6} " + " ".join(f"{r.metrics[m]:>20.1%}" for m in metrics for r in (a, b)) + " " +
                     " ".join(f"{b.metrics[m] - a.metrics[m]:>+14.1%}" for m in metrics))
    pairs = _paired(runs, arms)
    if pairs:
        lines.append(f"{'mean':>6} " + " ".join(f"{np.mean([p[i].metrics[m] for p in pairs]):>20.1%}"
                                              for m in metrics for i in (0, 1)))
    return "\n".join(lines)


def interval_table(runs: list[RunResult], metrics: Sequence[str], arms: Sequence[str], level: float = 0.9) -> str:
    """Second arm minus first per metric: mean of the paired per-seed differences and its interval,
    plus TRL's share of GRPO groups with no reward spread (no gradient) per arm."""
    first, second = arms
    pairs = _paired(runs, arms)
    if len(pairs) < 2:
        return f"{len(pairs)} paired seeds: no interval yet"
    lines = []
    for m in metrics:
        mean, low, high = paired_interval([b.metrics[m] - a.metrics[m] for a, b in pairs], level)
        verdict = "above 0" if low > 0 else "below 0" if high < 0 else "includes 0"
        lines.append(f"{second} - {first}, held-out {m}: {mean:+.1%} ({level:.0%} interval {low:+.1%} to {high:+.1%}, "
                     f"{len(pairs)} paired seeds: {verdict})")
    flat = {arm: np.mean([row.get("frac_reward_zero_std", np.nan) for p in pairs for row in p[i].log])
            for i, arm in enumerate(arms)}
    minutes = {arm: np.mean([p[i].seconds for p in pairs]) / 60 for i, arm in enumerate(arms)}
    lines.append("groups with no reward spread (no gradient): " +
                 ", ".join(f"{arm} {flat[arm]:.0%}" for arm in arms) +
                 "; minutes per run: " + ", ".join(f"{arm} {minutes[arm]:.1f}" for arm in arms))
    return "\n".join(lines)


def mean_curve(runs: list[RunResult], arm: str, metric: str) -> np.ndarray:
    """The per-step curve of ``strict/<metric>`` (on each step's sampled completions), mean over seeds."""
    curves = [[row.get(f"strict/{metric}", np.nan) for row in r.log] for r in runs if r.arm == arm and r.log]
    if not curves:
        return np.array([])
    steps = min(len(c) for c in curves)
    return np.nanmean([c[:steps] for c in curves], axis=0)


def steps_to_reach(runs: list[RunResult], metric: str, arms: Sequence[str]) -> str:
    """The first step at which each arm's mean training curve reaches the first arm's final value
    (mean of its last two steps): "reaches the sparse arm's final score in at most half the steps"."""
    first = arms[0]
    base = mean_curve(runs, first, metric)
    if base.size < 2:
        return "no curves yet"
    target = float(np.mean(base[-2:]))
    parts = []
    for arm in arms:
        curve = mean_curve(runs, arm, metric)
        hit = np.nonzero(curve >= target)[0]
        parts.append(f"{arm} at step {hit[0] + 1} of {curve.size}" if hit.size else f"{arm} never in {curve.size} steps")
    return (f"training-sample {metric} (mean over seeds) reaching {first}'s final {target:.1%}: " + "; ".join(parts))


def plot_strict_curves(runs: list[RunResult], metrics: Sequence[str], arms: Sequence[str], path: Path,
                       title: str = "") -> Path:
    """One panel per metric: each arm's per-step value on its sampled completions, each seed thin,
    the mean over seeds thick; and a panel of the share of groups with no reward spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [f"strict/{m}" for m in metrics] + ["frac_reward_zero_std"]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.8 * len(keys), 3.3), squeeze=False)
    colors = dict(zip(arms, ("tab:blue", "tab:orange"), strict=False))
    for ax, key in zip(axes[0], keys, strict=True):
        for arm in arms:
            curves = [[row.get(key, np.nan) for row in r.log] for r in runs if r.arm == arm and r.log]
            if not curves:
                continue
            steps = min(len(c) for c in curves)
            x = np.arange(1, steps + 1)
            for c in curves:
                ax.plot(x, c[:steps], color=colors[arm], alpha=0.2, lw=0.8)
            ax.plot(x, np.nanmean([c[:steps] for c in curves], axis=0), color=colors[arm], lw=2.2, marker="o", ms=3,
                    label=f"{arm} ({len(curves)} seeds)")
        ax.set_title(key.replace("strict/", "") + (" (no-gradient groups)" if key == "frac_reward_zero_std" else ""))
        ax.set_xlabel("GRPO step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("share of the step's sampled completions")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
