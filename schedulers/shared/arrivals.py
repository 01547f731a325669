"""An episode's arrivals exactly as Vidur's synthetic generator draws them for a seed, without Vidur.

The one capped Poisson loop (:func:`poisson_arrival_times`: ``random.Random(seed)`` intervals of
mean ``1/qps``, each capped at ``3/qps``), the one length fitting (:func:`fit_lengths`: lengths
times a scale, then long requests shortened in proportion, as Vidur shortens them) and Vidur's
trace shuffle (:func:`vidur_shuffle`, pandas' ``sample(frac=1, random_state=seed)`` reproduced
with NumPy alone). The simulator, the live env and the load generator all draw from here.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from rewardkit.errors import ConfigError

from ..paths import resolve_path
from .trace import TraceError, read_trace


@dataclass(frozen=True)
class Arrivals:
    """One episode's arrivals: times (s) and prompt/output lengths (the latter hidden from routers)."""

    arrived_at: np.ndarray
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray


def poisson_arrival_times(n: int, qps: float, seed: int) -> np.ndarray:
    """``n`` arrival times: Vidur's Poisson intervals at ``qps`` (capped at 3/qps), the first one interval in."""
    rng = random.Random(seed)
    cap = 3.0 / qps
    times = np.empty(n)
    now = 0.0
    for i in range(n):
        now += min(-math.log(1.0 - rng.random()) / qps, cap)
        times[i] = now
    return times


@lru_cache(maxsize=64)
def vidur_shuffle(n: int, seed: int) -> np.ndarray:
    """The order in which Vidur's trace generator takes a trace of ``n`` requests for ``seed``
    (pandas' ``Series.sample(frac=1, random_state=seed)``: ``RandomState(seed).choice(n, n, replace=False)``)."""
    return np.random.RandomState(seed).choice(n, size=n, replace=False)


def fit_lengths(prefill: np.ndarray, decode: np.ndarray, scale: float = 1.0,
                max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lengths times ``scale`` (rounded half to even, at least 1), then, as Vidur does, requests longer
    than ``max_tokens`` shortened in proportion (both parts, each at least 1)."""
    prefill = np.asarray(prefill, dtype=np.int64)
    decode = np.asarray(decode, dtype=np.int64)
    if scale != 1.0:
        prefill = np.maximum(np.round(prefill * scale), 1).astype(np.int64)
        decode = np.maximum(np.round(decode * scale), 1).astype(np.int64)
    if max_tokens is not None:
        total = prefill + decode
        diff = np.maximum(total - max_tokens, 0)
        prefill = prefill - np.ceil(diff * (prefill / total)).astype(np.int64)
        decode = decode - np.ceil(diff * (decode / total)).astype(np.int64)
    return np.maximum(prefill, 1), np.maximum(decode, 1)


@lru_cache(maxsize=8)
def _fitted_trace(path: str, max_tokens: int, length_scale: float) -> tuple[np.ndarray, np.ndarray]:
    trace = read_trace(path)
    return fit_lengths(trace.prefill_tokens, trace.decode_tokens, length_scale, max_tokens)


def resolved_trace_file(workload: Any) -> str:
    """Absolute path of a workload's trace; a ConfigError naming ``trace_file`` when it does not exist."""
    path = resolve_path(workload.trace_file, workload.source)
    if not path.is_file():
        raise ConfigError(f"expected an existing CSV file with columns num_prefill_tokens,num_decode_tokens, got "
                          f"{workload.trace_file!r} (resolved to {path})", source=workload.source, path="trace_file")
    return str(path)


def sample_arrivals(workload: Any, seed: int) -> Arrivals:
    """Vidur's synthetic generator for ``seed``: the workload's trace lengths times ``length_scale``,
    shortened to ``max_tokens``, in Vidur's shuffled order, with capped Poisson intervals at ``qps``.

    ``workload`` is anything with the workload's fields (a :class:`~schedulers.shared.workload.Workload`,
    the simulator's ``EnvConfig``).
    """
    try:
        prefill, decode = _fitted_trace(resolved_trace_file(workload), workload.max_tokens, workload.length_scale)
    except TraceError as exc:  # located in the env YAML too: "env.yaml: trace_file: trace.csv: line 3: ..."
        raise ConfigError(str(exc), source=workload.source, path="trace_file") from None
    n = workload.requests_per_episode
    if n > len(prefill):
        raise ConfigError(f"expected at most {len(prefill)} (the trace's length), got {n}", source=workload.source,
                          path="requests_per_episode")
    order = vidur_shuffle(len(prefill), seed)[:n]
    times = poisson_arrival_times(n, workload.qps, seed)
    return Arrivals(times, prefill[order].astype(np.int64), decode[order].astype(np.int64))
