"""What do batching, concurrency and the composer do for a remote reward term? Side by side in one run.

A stub scorer (`schedulers/engines/stub_scorer.py`, 50 ms per request whatever the batch) runs
in its own process. 256 distinct completions are scored:

- one request at a time, one completion per request (256 requests in a row);
- in batches of 16, one request at a time (16 requests in a row);
- in batches of 16 with 8 in flight, through a ``remote_score`` term in a RewardComposer
  (``composer(ctx)``: its background event loop, the term's client, cache and budget);
- the same 16 requests with 8 in flight as raw httpx calls (one AsyncClient, a semaphore, the
  same loop kept across repeats), interleaved with the composer's repeats.

It prints the median wall time of each (over ``--repeats``, fresh completions every time so the
cache never answers), the speed-ups over one request at a time, and what the composer adds per
batch over the raw calls. Targets: batches of 16 with 8 in flight >= 5x faster than
one request at a time; the composer adds <= 2 ms per batch. A bar chart goes to
``benchmarks/out/bench_remote.png``.

Usage: ``python benchmarks/bench_remote.py [--repeats 15] [--delay-s 0.05]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit import RewardComposer  # noqa: E402
from schedulers.engines.replicas import free_port  # noqa: E402

STUB = """
import sys
import uvicorn
from schedulers.engines.stub_scorer import StubScorer
uvicorn.run(StubScorer(delay_s=float(sys.argv[2])).app(), host="127.0.0.1", port=int(sys.argv[1]),
            log_level="error", access_log=False)
"""
N_ITEMS, BATCH, IN_FLIGHT = 256, 16, 8


def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            httpx.post(url, json={"prompts": [""], "completions": [""]}, timeout=1).raise_for_status()
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def completions(tag: str) -> list[str]:
    """256 distinct completions (a new tag each repeat, so the term's cache never answers)."""
    return [f"{tag} completion {i} " + "x" * (i % 40) for i in range(N_ITEMS)]


def composer_for(url: str, batch_size: int, in_flight: int) -> RewardComposer:
    term = {"type": "remote_score", "params": {"url": url, "batch_size": batch_size, "max_concurrency": in_flight,
                                                "timeout_s": 30.0}}
    return RewardComposer.from_dict({"version": 1, "components": {"score": term}})


async def raw_calls(client: httpx.AsyncClient, url: str, texts: list[str]) -> list[float]:
    """The same batches as the composer's term, as bare httpx POSTs with at most IN_FLIGHT at once."""
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(batch: list[str]) -> list[float]:
        async with slots:
            resp = await client.post(url, json={"prompts": [""] * len(batch), "completions": batch})
            resp.raise_for_status()
            return resp.json()["scores"]

    batches = [texts[i:i + BATCH] for i in range(0, len(texts), BATCH)]
    return [s for scores in await asyncio.gather(*(one(b) for b in batches)) for s in scores]


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="repeats of the concurrent measurements (>= 3)")
    parser.add_argument("--delay-s", type=float, default=0.05, help="the stub scorer's time per request")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error(f"--repeats: expected an integer >= 3, got {args.repeats}")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", STUB, str(port), str(args.delay_s)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}/score"
    try:
        wait_ready(url)
        return run(url, args.repeats, args.delay_s)
    finally:
        server.terminate()
        server.wait(timeout=10)


def run(url: str, repeats: int, delay_s: float) -> int:
    one_at_a_time = composer_for(url, 1, 1)
    batched_serial = composer_for(url, BATCH, 1)
    concurrent = composer_for(url, BATCH, IN_FLIGHT)
    loop = asyncio.new_event_loop()
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    client = httpx.AsyncClient(timeout=30.0, limits=limits)
    times: dict[str, list[float]] = {"one request at a time (256 requests)": [], "batches of 16, one at a time": [],
                                     "batches of 16, 8 in flight (composer)": [], "raw httpx, same batches": []}
    names = list(times)
    expected = None
    try:
        for warm in range(3):  # connections, first-call costs
            concurrent({"completion": completions(f"warm{warm}")})
            loop.run_until_complete(raw_calls(client, url, completions(f"warm{warm}")))
        seconds, _ = timed(one_at_a_time, {"completion": completions("serial")})
        times[names[0]].append(seconds)
        for r in tqdm(range(repeats), desc="repeats", unit="repeat"):
            if r < 3:
                seconds, _ = timed(batched_serial, {"completion": completions(f"bs{r}")})
                times[names[1]].append(seconds)
            texts = completions(f"c{r}")
            seconds, out = timed(concurrent, {"completion": texts})
            times[names[2]].append(seconds)
            raw_seconds, raw = timed(loop.run_until_complete, raw_calls(client, url, completions(f"r{r}")))
            times[names[3]].append(raw_seconds)
            expected = [float(len(t)) for t in texts]
            assert np.array_equal(out.terms["score"].raw, expected), "the composer's scores differ from the scorer's"
            assert len(raw) == N_ITEMS
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
        for composer in (one_at_a_time, batched_serial, concurrent):
            composer.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    serial, batched, conc, raw = (medians[n] for n in names)
    added_ms = (conc - raw) / (N_ITEMS // BATCH) * 1000
    print(f"\nremote_score: {N_ITEMS} completions, stub scorer {delay_s * 1000:.0f} ms per request, "
          f"median of {repeats} repeats (one-at-a-time rows: {len(times[names[0]])} and {len(times[names[1]])})")
    print(f"{'how':<42} {'wall s':>8} {'speed-up':>9}")
    for name in names:
        print(f"{name:<42} {medians[name]:>8.3f} {serial / medians[name]:>8.1f}x")
    print(f"\nbatches of 16 with 8 in flight vs one request at a time:  {serial / conc:.1f}x  (target >= 5x)")
    print(f"batches of 16 with 8 in flight vs batches one at a time:  {batched / conc:.1f}x")
    print(f"composer over raw httpx: {added_ms:+.2f} ms per batch of {BATCH} "
          f"({conc * 1000:.1f} vs {raw * 1000:.1f} ms per call; target <= 2 ms)")
    plot(medians)
    return 0


def plot(medians: dict[str, float]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return
    out = ROOT / "benchmarks" / "out" / "bench_remote.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.barh(list(medians)[::-1], list(medians.values())[::-1])
    ax.set_xscale("log")
    ax.set_xlabel("wall time for 256 completions (s, log scale)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    sys.exit(main())
