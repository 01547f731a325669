"""Plots of an evaluation: latency CDFs and per-metric ratios to the baseline (matplotlib, PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def plot_results(results: Any, path: str | Path) -> None:
    """Latency CDFs (e2e, TTFT) and bars of key metrics relative to the baseline, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for router in results.routers:
        for ax, key in ((axes[0], "e2e"), (axes[1], "ttft")):
            values = np.sort(results.samples[router][key])
            if len(values):
                ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=router, lw=1.3)
    axes[0].set(xlabel="request end-to-end latency (s)", ylabel="fraction of requests", title="E2E latency CDF")
    axes[1].set(xlabel="time to first token (s)", ylabel="fraction of requests", title="TTFT CDF", xscale="log")
    axes[0].legend(fontsize=8)
    keys = ("e2e_mean", "e2e_p99", "ttft_p50", "ttft_p99")
    width = 0.8 / max(len(results.routers), 1)
    x = np.arange(len(keys))
    for i, router in enumerate(results.routers):
        ratios, lows, highs = [], [], []
        for key in keys:
            per_seed = results.values(router, key) / results.values(results.baseline, key)
            ratios.append(float(np.mean(per_seed)))
            lows.append(ratios[-1] - float(np.min(per_seed)))
            highs.append(float(np.max(per_seed)) - ratios[-1])
        axes[2].bar(x + i * width, ratios, width, yerr=[lows, highs], capsize=2, label=router)
    axes[2].axhline(1.0, color="k", lw=0.8)
    axes[2].set_xticks(x + width * (len(results.routers) - 1) / 2, [k.replace("_", " ") for k in keys])
    axes[2].set(ylabel=f"ratio to {results.baseline} (mean, min-max over seeds)", title="relative to baseline")
    fig.suptitle(f"{results.env_name}: {len(results.seeds)} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
