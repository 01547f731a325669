"""Per-episode serving metrics (e2e, TTFT, scheduling delay, throughput), simulated or live."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class EpisodeMetrics:
    """Per-request latencies of one episode (completed requests only), from Vidur or from live engines."""

    seed: int
    num_requests: int
    num_routed: int
    num_completed: int
    #: end-to-end time, completed_at - arrived_at (Vidur's request_e2e_time), s.
    e2e: np.ndarray
    #: time to first token, prefill_completed_at - arrived_at (Vidur's prefill_e2e_time), s.
    ttft: np.ndarray
    #: arrival to first scheduling on a replica (Vidur's request_scheduling_delay), s.
    scheduling_delay: np.ndarray
    #: completed requests per second between the first arrival and the last completion.
    throughput: float
    #: simulated seconds from the first arrival to the last completion.
    makespan: float
    #: requests routed to each replica.
    routed_per_replica: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: prompt tokens of the routed requests, and how many of them a replica's prefix cache held
    #: (``None``: not known, e.g. on a live cluster whose engines were not asked).
    prompt_tokens: int = 0
    cached_prompt_tokens: int | None = None

    @property
    def complete(self) -> bool:
        """Whether every request of the episode completed (``evaluate=True`` drains to the end)."""
        return self.num_completed == self.num_requests

    @property
    def prefix_hit_rate(self) -> float:
        """Cached prompt tokens over all prompt tokens (NaN when unknown or without prompts)."""
        if self.cached_prompt_tokens is None or not self.prompt_tokens:
            return float("nan")
        return self.cached_prompt_tokens / self.prompt_tokens

    def summary(self) -> dict[str, float]:
        """Scalar statistics (numpy's linear percentiles); NaN where no request completed."""

        def stat(values: np.ndarray, fn: Callable[[np.ndarray], float]) -> float:
            return float(fn(values)) if len(values) else float("nan")

        out: dict[str, float] = {}
        for name, values in (("e2e", self.e2e), ("ttft", self.ttft), ("sched_delay", self.scheduling_delay)):
            out[f"{name}_mean"] = stat(values, np.mean)
            for q in (50, 90, 99):
                out[f"{name}_p{q}"] = stat(values, lambda v, q=q: np.percentile(v, q))
        out["prefix_hit_rate"] = self.prefix_hit_rate
        out["throughput"] = self.throughput
        out["makespan"] = self.makespan
        out["num_completed"] = float(self.num_completed)
        out["num_requests"] = float(self.num_requests)
        return out
