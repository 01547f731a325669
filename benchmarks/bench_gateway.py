"""What does the gateway add? Latency and throughput against a fast stub engine, side by side in one run.

A stub engine (`schedulers/engines/stub.py`, answering at once) runs in its own process; the
gateway (`rewardkit gateway`, one process, router least_prefill or ppo) in another. The client
sends the same small non-streaming requests straight to the stub and through the gateway,
alternating, one at a time (latency), then many at once (throughput: with httpx, and with a bare
HTTP/1.1 client whose own cost is small enough not to be the limit). It prints the added median
and p99 latency per request, requests/s through the gateway against straight to the stub, and the
PPO router's decision time (the gateway's own `rewardkit_gateway_decision_seconds` histogram and an
in-process timing of `PPORouter.decide` on a gateway-sized observation; `bench_request_path.py` puts the
request path beside sglang-router). Targets: added
median <= 2 ms, p99 <= 10 ms, >= 500 requests/s, PPO decision p99 <= 0.5 ms.

Usage: ``python benchmarks/bench_gateway.py [--requests 2000] [--concurrency 32]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.engines.replicas import free_port  # noqa: E402
from schedulers.routing.policy import policy_class  # noqa: E402

STUB = """
import sys
from schedulers.engines.stub import StubEngine
import uvicorn
uvicorn.run(StubEngine("stub").app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="error", access_log=False)
"""


def wait_healthy(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


async def latencies(urls: dict[str, str], n: int) -> dict[str, list[float]]:
    """``n`` sequential requests to each URL, alternating, in milliseconds."""
    out: dict[str, list[float]] = {k: [] for k in urls}
    body = {"model": "stub-model", "prompt": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": 1}
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(20):  # warm-up: connections, first-call costs
            for url in urls.values():
                await client.post(url + "/v1/completions", json=body)
        for _ in range(n):
            for name, url in urls.items():
                start = time.perf_counter()
                resp = await client.post(url + "/v1/completions", json=body)
                out[name].append((time.perf_counter() - start) * 1000)
                resp.raise_for_status()
    return out


async def throughput(url: str, n: int, concurrency: int) -> float:
    """Requests/s for ``n`` requests with ``concurrency`` in flight."""
    body = {"model": "stub-model", "prompt": [1, 2, 3, 4], "max_tokens": 1}
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        async def one() -> None:
            async with sem:
                (await client.post(url + "/v1/completions", json=body)).raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - start)


async def raw_throughput(url: str, n: int, concurrency: int) -> float:
    """Requests/s for ``n`` requests over ``concurrency`` keep-alive connections, with a bare HTTP/1.1 client.

    httpx spends more CPU per request than the gateway does, so on a shared 2-core machine it, not the
    gateway, sets the pace; this client writes the request bytes and reads the response by its
    Content-Length, nothing more.
    """
    host, port = url.split("//", 1)[1].split(":")
    payload = b'{"model": "stub-model", "prompt": [1, 2, 3, 4], "max_tokens": 1}'
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
    remaining = [n]

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while remaining[0] > 0:
                remaining[0] -= 1
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"{url}: {head[:80]!r}")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return n / (time.perf_counter() - start)


def ppo_decision_p99_ms(replicas: int = 4, n: int = 5000) -> float:
    """In-process p99 of one PPO routing decision on a live-sized observation."""
    import torch

    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.rl.ppo_router import PPORouter
    from schedulers.routing.observation import FEATURE_NAMES

    torch.set_num_threads(1)
    router = PPORouter(ReplicaScorerPolicy(len(FEATURE_NAMES)))
    obs = np.random.default_rng(0).random((replicas, len(FEATURE_NAMES)))
    times = []
    for _ in range(n):
        start = time.perf_counter()
        router.decide(None, rows=obs)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 99))


def gateway_decision_p99_ms(url: str) -> float | None:
    """The gateway's decision-time histogram: the smallest bucket holding 99% of decisions (ms)."""
    buckets, count = [], 0.0
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("rewardkit_gateway_decision_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("rewardkit_gateway_decision_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
    for le, cumulative in sorted(buckets):
        if count and cumulative >= 0.99 * count:
            return le * 1000
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per target (latency)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (throughput)")
    parser.add_argument("--router", default="least_prefill", help="the gateway's router (ppo: a fresh policy)")
    args = parser.parse_args(argv)
    exe = Path(sys.executable)
    stub_port, gw_port = free_port(), free_port()
    stub_url, gw_url = f"http://127.0.0.1:{stub_port}", f"http://127.0.0.1:{gw_port}"
    procs = [subprocess.Popen([str(exe), "-c", STUB, str(stub_port)], cwd=ROOT)]
    cmd = [str(exe.with_name("rewardkit")), "gateway", "--backend", stub_url, "--backend", stub_url,
           "--port", str(gw_port), "--router", args.router]
    with tempfile.TemporaryDirectory() as tmp:
        if policy_class(args.router).needs_checkpoint:  # a fresh network: the decision costs what a trained one does
            import torch

            from schedulers.rl.scorer_network import ReplicaScorerPolicy
            from schedulers.routing.observation import FEATURE_NAMES

            policy = Path(tmp) / "policy.pt"
            torch.save(ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint(), policy)
            cmd += ["--checkpoint", str(policy)]
        procs.append(subprocess.Popen(cmd, cwd=ROOT))
        try:
            wait_healthy(stub_url)
            wait_healthy(gw_url)
            lat = asyncio.run(latencies({"direct": stub_url, "gateway": gw_url}, args.requests))
            direct_rps = asyncio.run(throughput(stub_url, args.requests, args.concurrency))
            gateway_rps = asyncio.run(throughput(gw_url, args.requests, args.concurrency))
            raw_direct_rps = asyncio.run(raw_throughput(stub_url, args.requests, args.concurrency))
            raw_gateway_rps = asyncio.run(raw_throughput(gw_url, args.requests, args.concurrency))
            gw_decision = gateway_decision_p99_ms(gw_url)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=30)
    added = np.array(lat["gateway"]) - np.array(lat["direct"])
    rows = [
        ("median latency, direct (ms)", statistics.median(lat["direct"]), ""),
        ("median latency, through the gateway (ms)", statistics.median(lat["gateway"]), ""),
        ("added median (ms)", statistics.median(lat["gateway"]) - statistics.median(lat["direct"]), "<= 2"),
        ("added p99 (ms)", float(np.percentile(lat["gateway"], 99) - np.percentile(lat["direct"], 99)), "<= 10"),
        ("added per request, median of pairs (ms)", float(np.median(added)), ""),
        (f"requests/s direct, {args.concurrency} in flight (httpx client)", direct_rps, ""),
        (f"requests/s through the gateway ({args.router}, httpx client)", gateway_rps, ""),
        (f"requests/s direct, {args.concurrency} connections (bare client)", raw_direct_rps, ""),
        (f"requests/s through the gateway ({args.router}, bare client)", raw_gateway_rps, ">= 500"),
        ("gateway / direct throughput (bare client)", raw_gateway_rps / raw_direct_rps, ""),
        ("PPO decision p99, in process (ms)", ppo_decision_p99_ms(), "<= 0.5"),
        (f"gateway decision p99 ({args.router}, histogram bucket, ms)", gw_decision or float("nan"), ""),
    ]
    print(f"gateway overhead: {args.requests} small non-streaming requests, stub engine answering at once, "
          f"one machine (client, gateway and stub share its cores)")
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  target")
    print("-" * (width + 22))
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>10.3f}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
