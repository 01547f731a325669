"""Does the gateway's request path keep up with a peer? ``rewardkit gateway`` against SGLang's Rust gateway, side by side.

The same two stub engines (``schedulers/engines/stub.py``, answering at once, each in its own
process) are reached three ways: straight, through ``sglang-router`` (``--policy cache_aware``) and
through ``rewardkit gateway`` (``--router least_prefill``). The client is a bare HTTP/1.1
keep-alive client (its own cost small enough not to set the pace): sequential requests alternating
over the three paths (added median and p99 latency over straight), then ``--connections``
connections in flight (requests/s). Another process keeps the second core busy, as engines would.
Rounds alternate the paths, so each ratio is measured side by side in one run. Prints the table and
the two ratios the issue asks for: the gateway's added median over sglang-router's (target <= 2)
and its throughput over sglang-router's (target >= 1/3).

``sglang-router`` lives in its own environment (``python -m venv .venv-sglang &&
.venv-sglang/bin/pip install sglang-router==0.3.2``); its ``/v1/models`` does not name the model,
so every request names it.

Usage: ``python benchmarks/bench_request_path.py [--sglang .venv-sglang/bin/python] [--requests 3000]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedulers.engines.replicas import free_port  # noqa: E402

# the stub engine and the health wait are bench_gateway's (this script runs from benchmarks/)
from bench_gateway import STUB, wait_healthy  # noqa: E402

BUSY = "while True:\n    pass\n"
PAYLOAD = b'{"model": "stub-model", "prompt": "route me to a replica", "max_tokens": 1}'  # sglang-router takes text prompts


class BareConnection:
    """One keep-alive HTTP/1.1 connection: writes a request, reads the response by its Content-Length."""

    def __init__(self, url: str) -> None:
        self.host, port = url.split("//", 1)[1].split(":")
        self.port = int(port)
        self.request = (f"POST /v1/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(PAYLOAD)}\r\n\r\n").encode() + PAYLOAD

    async def open(self) -> "BareConnection":
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def post(self) -> None:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{self.host}:{self.port}: {head[:120]!r}")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def latencies(targets: dict[str, list[str]], n: int) -> dict[str, list[float]]:
    """``n`` sequential requests per path, alternating paths, in ms (each path's URLs in turn)."""
    conns = {name: [await BareConnection(u).open() for u in urls] for name, urls in targets.items()}
    out: dict[str, list[float]] = {name: [] for name in targets}
    try:
        for i in range(n + 50):
            for name, cs in conns.items():
                start = time.perf_counter()
                await cs[i % len(cs)].post()
                if i >= 50:  # warm-up
                    out[name].append((time.perf_counter() - start) * 1000)
    finally:
        for cs in conns.values():
            for c in cs:
                c.close()
    return out


async def throughput(urls: list[str], n: int, connections: int) -> float:
    """Requests/s of ``n`` requests over ``connections`` keep-alive connections (spread over ``urls``)."""
    conns = [await BareConnection(urls[i % len(urls)]).open() for i in range(connections)]
    remaining = [n]

    async def run(c: BareConnection) -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            await c.post()

    try:
        await asyncio.gather(*(c.post() for c in conns))  # warm
        start = time.perf_counter()
        await asyncio.gather(*(run(c) for c in conns))
        return n / (time.perf_counter() - start)
    finally:
        for c in conns:
            c.close()


def start(cmd: list[str], log: Path, cpu: str | None = None) -> subprocess.Popen:
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpu, *cmd]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def stop(*procs: subprocess.Popen) -> None:
    """SIGTERM each process, then SIGKILL those still running after 20 s."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


#: the Python of the environment holding sglang-router (``python -m venv .venv-sglang &&
#: .venv-sglang/bin/pip install sglang-router==0.3.2``), beside the project like ``.venv-vllm``
SGLANG_PYTHON = ROOT / ".venv-sglang" / "bin" / "python"


def sglang_missing(python: str | Path, flag: str = "--sglang") -> str | None:
    """A one-line error when ``python`` cannot run sglang-router, None when it can."""
    if not Path(python).is_file():
        return (f"error: {flag} {python}: no such Python; create it with `python -m venv .venv-sglang && "
                ".venv-sglang/bin/pip install sglang-router==0.3.2`")
    return None


def start_sglang_router(python: str | Path, worker_urls: list[str], log: Path,
                        policy: str = "cache_aware") -> tuple[subprocess.Popen, str]:
    """SGLang's gateway (``sglang_router.launch_router``, its default thresholds) over ``worker_urls``:
    the process and its URL (wait for its ``/health`` before use)."""
    port = free_port()
    proc = start([str(python), "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                  "--policy", policy, "--log-level", "error", "--prometheus-port", str(free_port()),
                  "--worker-urls", *worker_urls], log)
    return proc, f"http://127.0.0.1:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", default=str(SGLANG_PYTHON),
                        help="the Python of the environment holding sglang-router")
    parser.add_argument("--requests", type=int, default=3000, help="requests per throughput run")
    parser.add_argument("--latency-requests", type=int, default=1500, help="sequential requests per path")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (paths alternate within each)")
    parser.add_argument("--router", default="least_prefill")
    parser.add_argument("--gateway-arg", action="append", default=[], help="extra rewardkit gateway flag (repeat)")
    parser.add_argument("--log-dir", default="/tmp/bench_request_path")
    args = parser.parse_args(argv)
    if (missing := sglang_missing(args.sglang)) is not None:
        print(missing, file=sys.stderr)
        return 2
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    exe = sys.executable
    stub_urls = []
    procs = [start([exe, "-c", BUSY], logs / "busy.log", cpu="1")]
    try:
        for i in range(2):
            port = free_port()
            procs.append(start([exe, "-c", STUB, str(port)], logs / f"stub{i}.log"))
            stub_urls.append(f"http://127.0.0.1:{port}")
        for url in stub_urls:
            wait_healthy(url, timeout_s=60.0)
        sg_proc, sg_url = start_sglang_router(args.sglang, stub_urls, logs / "sglang.log")
        procs.append(sg_proc)
        gw_port = free_port()
        gw_cmd = [str(Path(exe).with_name("rewardkit")), "gateway", "--port", str(gw_port), "--router", args.router,
                  *[flag for url in stub_urls for flag in ("--backend", url)], *args.gateway_arg]
        procs.append(start(gw_cmd, logs / "gateway.log"))
        paths = {"direct": stub_urls, "sglang-router": [sg_url],
                 "rewardkit gateway": [f"http://127.0.0.1:{gw_port}"]}
        for urls in paths.values():
            wait_healthy(urls[0], timeout_s=60.0)
        lat = asyncio.run(latencies(paths, args.latency_requests))
        rps: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, urls in paths.items():
                rps[name].append(asyncio.run(throughput(urls, args.requests, args.connections)))
    finally:
        stop(*reversed(procs))
    direct_med = statistics.median(lat["direct"])
    direct_p99 = float(np.percentile(lat["direct"], 99))
    rows = []
    for name in paths:
        med, p99 = statistics.median(lat[name]), float(np.percentile(lat[name], 99))
        rows.append((name, med, med - direct_med, p99 - direct_p99, statistics.median(rps[name])))
    print(f"request path: 2 stub engines, bare keep-alive client, {args.connections} connections for throughput, "
          f"second core kept busy; {args.latency_requests} sequential requests per path, "
          f"{args.rounds} x {args.requests} for throughput")
    print(f"{'path':<20} {'median ms':>10} {'added median':>13} {'added p99':>10} {'req/s':>9}")
    for name, med, added, added99, r in rows:
        print(f"{name:<20} {med:>10.3f} {added:>13.3f} {added99:>10.3f} {r:>9.0f}")
    sg, gw = rows[1], rows[2]
    print(f"gateway added median / sglang-router's: {gw[2] / sg[2]:.2f} (target <= 2)")
    print(f"gateway throughput / sglang-router's:   {gw[4] / sg[4]:.2f} (target >= 0.33)")
    print(f"gateway throughput / direct:            {gw[4] / rows[0][4]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
