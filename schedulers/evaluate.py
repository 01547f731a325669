"""Compare routers on the same simulated arrivals: latency table, paired wins, CSV/JSON and a plot.

:func:`evaluate_policies` runs every router on every seed through one
:class:`~schedulers.env.VidurRoutingEnv` in ``evaluate`` mode (each episode drained to the end),
so all routers see identical arrivals per seed, and reports per router the mean over seeds of:
request end-to-end latency mean/p50/p99, time to first token p50/p99, scheduling delay mean and
throughput; the ratio of each to ``round_robin`` and to the best heuristic on that metric; and
paired wins (seeds on which the router beat the reference on that metric).
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .env_config import EnvConfig, load_env_config
from .heuristics import POLICY_NAMES
from .routers import HeuristicRouter, Router

#: (summary key, label, direction): "min" means lower is better.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("e2e_mean", "e2e mean (s)", "min"),
    ("e2e_p50", "e2e p50 (s)", "min"),
    ("e2e_p99", "e2e p99 (s)", "min"),
    ("ttft_p50", "TTFT p50 (s)", "min"),
    ("ttft_p99", "TTFT p99 (s)", "min"),
    ("sched_delay_mean", "sched delay mean (s)", "min"),
    ("throughput", "throughput (req/s)", "max"),
)
#: metrics for which paired wins are reported.
WIN_METRICS = ("e2e_mean", "ttft_p99")


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
            for key, _, direction in METRICS:
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
                    row[f"{key}_wins_vs_{label}"] = int(sum(_better(a, b, direction) for a, b in zip(mine, theirs)))
            rows.append(row)
        return rows

    def format_table(self) -> str:
        """Plain-text tables for the terminal: the metrics, then ratios and paired wins."""
        rows = self.table()
        n = len(self.seeds)
        metrics_head = ["router"] + [label for _, label, _ in METRICS]
        metrics_body = [[row["router"]] + [f"{row[k]:.3f}" for k, _, _ in METRICS] for row in rows]
        base = self.baseline
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
        best = {k: self.best_heuristic(k) for k in ("e2e_mean", "ttft_p99")}
        lines = _aligned(metrics_head, metrics_body) + [""] + _aligned(compare_head, compare_body)
        lines.append(
            f"({self.env_name}; seeds {self.seeds}; means over seeds; 'best' = best heuristic per metric: "
            f"e2e {best['e2e_mean']}, TTFT p99 {best['ttft_p99']}; wins = seeds strictly better, paired)"
        )
        return "\n".join(lines)

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
        """Latency CDFs (e2e, TTFT) and bars of key metrics relative to the baseline."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        for router in self.routers:
            for ax, key in ((axes[0], "e2e"), (axes[1], "ttft")):
                values = np.sort(self.samples[router][key])
                if len(values):
                    ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=router, lw=1.3)
        axes[0].set(xlabel="request end-to-end latency (s)", ylabel="fraction of requests", title="E2E latency CDF")
        axes[1].set(xlabel="time to first token (s)", ylabel="fraction of requests", title="TTFT CDF", xscale="log")
        axes[0].legend(fontsize=8)
        keys = ("e2e_mean", "e2e_p99", "ttft_p50", "ttft_p99")
        width = 0.8 / max(len(self.routers), 1)
        x = np.arange(len(keys))
        for i, router in enumerate(self.routers):
            ratios, lows, highs = [], [], []
            for key in keys:
                per_seed = self.values(router, key) / self.values(self.baseline, key)
                ratios.append(float(np.mean(per_seed)))
                lows.append(ratios[-1] - float(np.min(per_seed)))
                highs.append(float(np.max(per_seed)) - ratios[-1])
            axes[2].bar(x + i * width, ratios, width, yerr=[lows, highs], capsize=2, label=router)
        axes[2].axhline(1.0, color="k", lw=0.8)
        axes[2].set_xticks(x + width * (len(self.routers) - 1) / 2, [k.replace("_", " ") for k in keys])
        axes[2].set(ylabel=f"ratio to {self.baseline} (mean, min-max over seeds)", title="relative to baseline")
        fig.suptitle(f"{self.env_name}: {len(self.seeds)} seeds")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def _aligned(head: list[str], body: list[list[str]]) -> list[str]:
    """Rows of left-aligned columns, as wide as their widest cell."""
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *body]]


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


def evaluate_policies(
    env_config: EnvConfig | str | Path,
    routers: Mapping[str, Router],
    seeds: Sequence[int],
    *,
    out_dir: str | Path | None = None,
    baseline: str = "round_robin",
    reward_composer: Any = None,
    compute_reward: bool = False,
    log: Callable[[str], None] | None = None,
) -> EvaluationResults:
    """Run every router on every seed (same arrivals per seed) and summarise; see the module doc.

    ``routers`` maps display names to routers. The ``baseline`` heuristic is added when missing.
    A router counts as a heuristic for "best heuristic" when it is a
    :class:`~schedulers.routers.HeuristicRouter`. With ``compute_reward=True`` the episode return
    under ``reward_composer`` (default: the env config's reward) is recorded too. Progress lines go
    to ``log`` (stderr by default); with ``out_dir`` the CSV/JSON/PNG files are written there.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if not routers:
        raise ValueError("evaluate_policies needs at least one router")
    if not seeds:
        raise ValueError("evaluate_policies needs at least one seed")
    routers = dict(routers)
    if baseline not in routers:
        if baseline not in POLICY_NAMES:
            raise ValueError(f"baseline {baseline!r} is neither among the routers nor a heuristic name")
        routers = {baseline: HeuristicRouter(baseline), **routers}
        log(f"[evaluate] added baseline router {baseline!r}")
    cfg = env_config if isinstance(env_config, EnvConfig) else load_env_config(env_config)
    from .env import VidurRoutingEnv

    env = VidurRoutingEnv(cfg, reward_composer, evaluate=True, compute_reward=compute_reward)
    heuristics = [name for name, r in routers.items() if isinstance(r, HeuristicRouter)]
    results = EvaluationResults(cfg.name, [int(s) for s in seeds], list(routers), heuristics, baseline)
    pooled: dict[str, dict[str, list]] = {name: {"e2e": [], "ttft": []} for name in routers}
    total, done = len(routers) * len(seeds), 0
    for seed in results.seeds:
        for name, router in routers.items():
            start = time.perf_counter()
            obs, _ = env.reset(seed=seed)
            router.reset(seed)
            episode_return, steps = 0.0, 0
            while True:
                obs, reward, terminated, truncated, _ = env.step(router.act(obs, env))
                episode_return += reward
                steps += 1
                if terminated or truncated:
                    break
            metrics = env.episode_metrics()
            wall = time.perf_counter() - start
            row: dict[str, Any] = {"router": name, "seed": seed, **metrics.summary(), "wall_s": wall}
            row["decisions_per_s"] = steps / wall if wall > 0 else math.nan
            if compute_reward:
                row["episode_return"] = episode_return
            results.episodes.append(row)
            pooled[name]["e2e"].append(metrics.e2e)
            pooled[name]["ttft"].append(metrics.ttft)
            done += 1
            log(
                f"[evaluate {done}/{total}] seed {seed} {name}: e2e mean {row['e2e_mean']:.3f} s, "
                f"TTFT p99 {row['ttft_p99']:.3f} s, {metrics.num_completed}/{metrics.num_requests} done "
                f"({wall:.1f} s wall)"
            )
    env.close()
    results.samples = {n: {k: np.concatenate(v) if v else np.zeros(0) for k, v in d.items()} for n, d in pooled.items()}
    if out_dir is not None:
        paths = results.save(out_dir)
        log("[evaluate] wrote " + ", ".join(str(p) for p in paths.values()))
    return results
