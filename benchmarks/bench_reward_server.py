"""What does serving a reward over HTTP cost? ``rewardkit serve-reward`` against the in-process composer.

The same reward config (an answer check, a format regex, a length penalty with a running
z-score normalizer: cheap local terms, so the HTTP path's own cost shows) scores the same batches
of 256 completions two ways, interleaved batch by batch in one run:

- **in process**: the lists to a context and one composer call (``TextScorer``, what the server
  itself runs per batch);
- **server**: ``rewardkit serve-reward`` in its own process on 127.0.0.1; each batch one
  ``POST /get_reward`` in OpenRLHF's shape (``query``, ``prompts``, ``labels``) from a kept-alive
  httpx client, the answer's JSON decoded.

It prints completions per second each way (medians over the batches), their ratio, and the HTTP
cost per batch: the median of the paired differences (server minus in process), with its 10th
and 90th percentiles. Goal: at most 5 ms per batch of 256. A last row sends the same completions
as OpenRLHF 0.11 does, one query per request (aiohttp, ``--in-flight`` at once): the server merges
requests that wait into one composer call.

Usage: ``python benchmarks/bench_reward_server.py [--batches 60] [--batch-size 256] [--in-flight 32]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.integrations.text_scoring import TextScorer  # noqa: E402

CONFIG = """\
version: 1
components:
  correct: {type: answer_match, params: {mode: numeric}, weight: 2.0}
  format: {type: regex_match, params: {pattern: "answer is -?[0-9]+"}, weight: 0.5}
  length:
    type: length_penalty
    params: {unit: words, max: 24}
    normalize: {type: running_zscore}
    weight: 0.2
"""
WORDS = "the so we have then it is that and a of to in sum total first next carry".split()


def make_batch(rng: random.Random, size: int) -> dict:
    """``size`` arithmetic prompts with completions of 5 to 60 words, half right, and their labels."""
    prompts, queries, labels = [], [], []
    for _ in range(size):
        a, b = rng.randint(1, 999), rng.randint(1, 999)
        prompt = f"<|user|>What is {a} + {b}?<|assistant|>"
        answer = a + b if rng.random() < 0.5 else a + b + rng.randint(1, 9)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))
        prompts.append(prompt)
        queries.append(f"{prompt}{words}, so the answer is {answer}")
        labels.append(str(a + b))
    return {"query": queries, "prompts": prompts, "labels": labels}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(config: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rewardkit", "serve-reward", str(config), "--port", str(port)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("rewardkit serve-reward did not start within 60 s")


def in_process(scorer: TextScorer, batch: dict) -> list[float]:
    """What the server does per batch, without HTTP: completions cut from the queries, one composer call."""
    completions = [q[len(p):] for q, p in zip(batch["query"], batch["prompts"], strict=True)]
    ctx = scorer.context(completions, prompts=batch["prompts"], references=batch["labels"])
    return scorer.score(ctx, len(completions)).totals


async def one_query_requests(url: str, batch: dict, in_flight: int) -> float:
    """The batch as OpenRLHF 0.11 sends it: one query per request (aiohttp, its client library),
    ``in_flight`` at once; seconds taken."""
    import aiohttp

    limit = asyncio.Semaphore(in_flight)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as session:
        async def one(i: int) -> None:
            async with limit, session.post(url + "/get_reward", json={k: [v[i]] for k, v in batch.items()}) as r:
                r.raise_for_status()
                await r.json()

        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(len(batch["query"]))))
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    batches = [make_batch(rng, args.batch_size) for _ in range(args.batches)]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "reward.yaml"
        config.write_text(CONFIG)
        scorer = TextScorer(RewardComposer.from_yaml(config))
        proc, url = start_server(config)
        try:
            local_s, served_s, local_cpu, client_cpu = [], [], 0.0, 0.0
            with httpx.Client(timeout=60) as client:
                for batch in batches[:3]:  # warm both paths (imports, connection, compiled plan)
                    in_process(scorer, batch)
                    client.post(url + "/get_reward", json=batch).raise_for_status()
                server_cpu = _cpu_seconds(proc.pid)
                for batch in tqdm(batches, desc="paired batches", file=sys.stderr):
                    began, cpu = time.perf_counter(), time.process_time()
                    want = in_process(scorer, batch)
                    local_s.append(time.perf_counter() - began)
                    local_cpu += time.process_time() - cpu
                    began, cpu = time.perf_counter(), time.process_time()
                    r = client.post(url + "/get_reward", json=batch)
                    got = r.json()["rewards"]
                    served_s.append(time.perf_counter() - began)
                    client_cpu += time.process_time() - cpu
                    if r.status_code != 200 or not np.allclose(got, want, atol=1e-9):
                        raise SystemExit(f"the server's rewards differ from the in-process composer's: {r.text[:300]}")
                server_cpu = _cpu_seconds(proc.pid) - server_cpu
            single_server_cpu, single_client_cpu = _cpu_seconds(proc.pid), time.process_time()
            single_s = [asyncio.run(one_query_requests(url, batch, args.in_flight))
                        for batch in tqdm(batches[:5], desc="one query per request", file=sys.stderr)]
            single_server_cpu = _cpu_seconds(proc.pid) - single_server_cpu
            single_client_cpu = time.process_time() - single_client_cpu
            metrics = httpx.get(url + "/metrics").text
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    n = args.batch_size
    local, served = statistics.median(local_s), statistics.median(served_s)
    diffs = np.asarray(served_s) - np.asarray(local_s)
    cost_ms = 1000 * float(np.median(diffs))
    p10, p90 = (1000 * float(np.percentile(diffs, q)) for q in (10, 90))
    calls = _metric(metrics, "rewardkit_reward_composer_calls_total")
    print(f"\n{args.batches} batches of {n} completions, paired (in process, then the server), "
          f"median per batch; {len(single_s)} batches one query per request, {args.in_flight} in flight\n")
    print("| path | ms per batch | completions/s | vs in process |")
    print("|---|---:|---:|---:|")
    print(f"| in process (TextScorer, one composer call) | {1000 * local:.2f} | {n / local:,.0f} | 1.00x |")
    print(f"| rewardkit serve-reward, one POST per batch | {1000 * served:.2f} | {n / served:,.0f} | "
          f"{local / served:.2f}x |")
    single = statistics.median(single_s)
    print(f"| serve-reward, one query per request ({args.in_flight} in flight) | {1000 * single:.1f} | "
          f"{n / single:,.0f} | {local / single:.3f}x |")
    print(f"\nHTTP cost per batch of {n}: {cost_ms:.2f} ms median of the paired differences "
          f"(p10 {p10:.2f}, p90 {p90:.2f}); goal <= 5 ms: {'met' if cost_ms <= 5 else 'NOT met'}")
    if server_cpu == server_cpu:  # psutil present
        per = 1000 / args.batches
        cost_cpu = (client_cpu + server_cpu - local_cpu) * per
        print(f"CPU per batch: in process {local_cpu * per:.2f} ms; through the server {client_cpu * per:.2f} ms in the "
              f"client + {server_cpu * per:.2f} ms in the server; HTTP's CPU cost {cost_cpu:.2f} ms per batch "
              "(the wall-time cost less waiting for a core on a loaded machine)")
    if single_server_cpu == single_server_cpu:
        requests = len(single_s) * n
        print(f"one query per request: CPU per request {1000 * single_server_cpu / requests:.3f} ms in the server, "
              f"{1000 * single_client_cpu / requests:.3f} ms in the aiohttp client; wall "
              f"{1000 * sum(single_s) / requests:.3f} ms per request")
    print(f"composer calls in the server: {calls:.0f} for {3 + args.batches} batched requests and "
          f"{len(single_s) * n} one-query requests")
    plot(local_s, served_s, n)


def plot(local_s: list[float], served_s: list[float], n: int) -> None:
    """Per-batch wall times of both paths, in batch order, to ``benchmarks/out/bench_reward_server.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return
    out = ROOT / "benchmarks" / "out" / "bench_reward_server.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot([1000 * v for v in served_s], ".-", label="rewardkit serve-reward (one POST)")
    ax.plot([1000 * v for v in local_s], ".-", label="in process (one composer call)")
    ax.axhline(1000 * statistics.median(local_s) + 5, color="grey", ls="--", lw=1, label="in-process median + 5 ms")
    ax.set_xlabel(f"batch of {n} completions (paired, in run order)")
    ax.set_ylabel("wall time (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used; NaN without psutil."""
    try:
        import psutil
    except ImportError:
        return float("nan")
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _metric(text: str, name: str) -> float:
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))


if __name__ == "__main__":
    main()
