"""Plain-text tables of an evaluation (metrics, then ratios and paired wins)."""

from __future__ import annotations

import math
from typing import Any

#: (summary key, label, direction): "min" means lower is better.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("e2e_mean", "e2e mean (s)", "min"),
    ("e2e_p50", "e2e p50 (s)", "min"),
    ("e2e_p99", "e2e p99 (s)", "min"),
    ("ttft_p50", "TTFT p50 (s)", "min"),
    ("ttft_p99", "TTFT p99 (s)", "min"),
    ("sched_delay_mean", "sched delay mean (s)", "min"),
    ("throughput", "throughput (req/s)", "max"),
    ("prefix_hit_rate", "prefix hit rate", "max"),
)
#: metrics for which paired wins are reported.
WIN_METRICS = ("e2e_mean", "ttft_p99")



def format_results(results: Any) -> str:
    """Plain-text tables of an :class:`~schedulers.evaluate.evaluation_results.EvaluationResults`:
    metrics, then ratios and paired wins."""
    rows = results.table()
    n = len(results.seeds)
    metrics_head = ["router"] + [label for _, label, _ in METRICS]
    metrics_body = [[row["router"]] + [f"{row[k]:.3f}" for k, _, _ in METRICS] for row in rows]
    base = results.baseline
    compare_head = ["router", f"e2e/{base}", f"TTFTp99/{base}", "e2e/best", "TTFTp99/best",
                    f"wins e2e vs {base}", f"wins TTFTp99 vs {base}", "wins e2e vs best", "wins TTFTp99 vs best"]
    compare_body = [[
        row["router"],
        f"{row['e2e_mean_vs_' + base]:.3f}",
        f"{row['ttft_p99_vs_' + base]:.3f}",
        f"{row.get('e2e_mean_vs_best_heuristic', math.nan):.3f}",
        f"{row.get('ttft_p99_vs_best_heuristic', math.nan):.3f}",
        f"{row['e2e_mean_wins_vs_baseline']}/{n}",
        f"{row['ttft_p99_wins_vs_baseline']}/{n}",
        f"{row.get('e2e_mean_wins_vs_best_heuristic', 0)}/{n}",
        f"{row.get('ttft_p99_wins_vs_best_heuristic', 0)}/{n}",
    ] for row in rows]
    best = {k: results.best_heuristic(k) for k in ("e2e_mean", "ttft_p99")}
    lines = _aligned(metrics_head, metrics_body) + [""] + _aligned(compare_head, compare_body)
    lines.append(
        f"({results.env_name}; seeds {results.seeds}; means over seeds; 'best' = best heuristic per metric: "
        f"e2e {best['e2e_mean']}, TTFT p99 {best['ttft_p99']}; wins = seeds strictly better, paired)"
    )
    return "\n".join(lines)


def _aligned(head: list[str], body: list[list[str]]) -> list[str]:
    """Rows of left-aligned columns, as wide as their widest cell."""
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *body]]
