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
