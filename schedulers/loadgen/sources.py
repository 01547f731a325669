"""What the load generator sends, from its command line: an env YAML's workload or a trace CSV.

Arrivals and lengths come from any env YAML (:func:`schedulers.shared.workload.load_workload`; the
same Poisson arrivals and trace lengths the simulator draws for a seed) or from a trace CSV read by
the one trace reader (:mod:`schedulers.shared.trace`; its ``arrived_at`` column, or the
simulator's Poisson loop at ``--qps``). Prompts are made by :mod:`schedulers.shared.requests`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..shared.arrivals import poisson_arrival_times
from ..shared.requests import Lengths, RequestSpec, WorkloadError, lengths_from_workload
from ..shared.trace import TraceError, read_trace
from ..shared.workload import load_workload

__all__ = ["WorkloadError", "lengths_from_env", "lengths_from_trace", "summarize_workload", "load_path_check"]


def lengths_from_env(env_path: str, seed: int, qps: float | None = None, requests: int | None = None) -> Lengths:
    """The arrivals and lengths the simulator draws for ``seed`` from env YAML ``env_path``."""
    workload = load_workload(env_path, {"qps": qps, "requests_per_episode": requests})
    return lengths_from_workload(workload, seed)


def lengths_from_trace(path: str, seed: int, qps: float | None = None, requests: int | None = None) -> Lengths:
    """A trace CSV's lengths in file order, with its ``arrived_at`` column (from 0), or Poisson arrivals at
    ``qps`` (the simulator's loop, the first at 0) when it has none or ``qps`` is given."""
    try:
        trace = read_trace(str(path))
    except TraceError as exc:
        raise WorkloadError(str(exc)) from None
    n = len(trace) if requests is None else min(requests, len(trace))
    if qps is None and trace.arrived_at is None:
        raise WorkloadError(f"{path}: the trace has no arrived_at column; give --qps")
    if qps is None:
        times = trace.arrived_at[:n] - trace.arrived_at[0]
    else:
        if not (qps > 0 and math.isfinite(qps)):
            raise WorkloadError(f"--qps: expected a positive number, got {qps}")
        times = poisson_arrival_times(n, qps, seed)
        times = times - times[0]
    return Lengths(times, trace.prefill_tokens[:n].copy(), trace.decode_tokens[:n].copy(), source=str(path))


def summarize_workload(specs: Sequence[RequestSpec]) -> dict[str, float]:
    """Counts and means of a workload, for the report."""
    if not specs:
        return {"requests": 0}
    prompt = np.array([s.prompt_tokens for s in specs])
    out = np.array([s.output_tokens for s in specs])
    shared = np.array([s.shared_tokens for s in specs])
    span = specs[-1].arrival_s - specs[0].arrival_s
    return {
        "requests": len(specs),
        "span_s": float(span),
        "offered_qps": float((len(specs) - 1) / span) if span > 0 else float("inf"),
        "mean_prompt_tokens": float(prompt.mean()),
        "mean_output_tokens": float(out.mean()),
        "shared_token_fraction": float(shared.sum() / prompt.sum()),
    }


def load_path_check(path: str | None, option: str) -> None:
    """A located error when a file option names no file."""
    if path is not None and not Path(path).is_file():
        raise WorkloadError(f"{option} {path}: no such file")
