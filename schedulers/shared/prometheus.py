"""The Prometheus parser: a vLLM engine's ``/metrics`` text into numbers (load, KV use, prefix-cache hits).

Standard library only; samples with labels are summed over their label sets (one engine per
server here). :func:`prefix_cache_hit_rate` turns two scrapes into the hit rate in between.
"""

from __future__ import annotations

import math
import re
import urllib.request

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
#: the vLLM 0.32 metrics the benchmarks read.
WATCHED = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)


def parse_metrics(text: str, names: tuple[str, ...] = WATCHED) -> dict[str, float]:
    """The samples of ``names`` in Prometheus exposition ``text``, summed over label sets."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m and m.group(1) in names:
            try:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
            except ValueError:
                continue
    return out


_LABEL = re.compile(r'(\w+)="([^"]*)"')


def kv_capacity_tokens(text: str) -> float | None:
    """Tokens of KV cache the engine holds (``vllm:cache_config_info``: ``num_gpu_blocks`` x
    ``block_size``), None when its ``/metrics`` do not say."""
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            labels = dict(_LABEL.findall(line[: line.rfind("}") + 1]))
            try:
                tokens = float(labels["num_gpu_blocks"]) * float(labels["block_size"])
            except (KeyError, ValueError):
                return None
            return tokens if math.isfinite(tokens) and tokens > 0 else None
    return None


def scrape(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """``parse_metrics`` of ``GET {url}/metrics``."""
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout_s) as resp:
        return parse_metrics(resp.read().decode("utf-8", "replace"))


def prefix_cache_hit_rate(before: dict[str, float], after: dict[str, float]) -> tuple[float, float, float]:
    """``(hits, queries, hit_rate)`` of prefix-cache lookups (in tokens) between two scrapes."""
    hits = after.get("vllm:prefix_cache_hits_total", 0.0) - before.get("vllm:prefix_cache_hits_total", 0.0)
    queries = after.get("vllm:prefix_cache_queries_total", 0.0) - before.get("vllm:prefix_cache_queries_total", 0.0)
    return hits, queries, (hits / queries if queries > 0 else 0.0)
