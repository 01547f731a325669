"""What a router in this process reports: its decisions' times, its requests' routing times, its Ray metrics.

``RouterTimes`` keeps the last ``keep`` decision times (``decision_ms``: what Ray's
``rewardkit_ray_router_decision_ms`` histogram observes, and ``router_stats()``'s p50/p99) and the
last ``keep`` routing times per request (``routing_ms``: from Ray creating the pending request to
the chosen replica accepting it, the routing cost per request that ``benchmarks/bench_ray_serve.py``
compares with Ray's own routers), and, when asked (``time_stages``), each decision's stages.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Optional

import numpy as np

from .. import live_routers

#: the stages of one decision, timed apart with ``time_stages``: folding new replica stats in, finding
#: the request among Ray's arguments, the snapshot (prefix lookup included), the observation rows, the policy
STAGES = ("stats", "request", "snapshot", "observation", "policy")


def router_stats() -> list[dict[str, Any]]:
    """``stats()`` of every router in this process (the example's ingress serves it at ``GET /router-stats``)."""
    return [router.stats() for router in list(live_routers.ROUTERS)]


def _metric(kind: str, name: str, description: str, **kwargs: Any) -> Any:
    """A Ray metric, or None where Ray's metrics cannot be made (outside a Ray worker)."""
    try:
        from ray.util import metrics

        return getattr(metrics, kind)(name, description=description, **kwargs)
    except Exception:  # noqa: BLE001 - metrics are a report, never a reason not to route
        return None


def _ms(values: Any, digits: int = 5) -> list[float]:
    return [round(1000.0 * float(t), digits) for t in values]


class RouterTimes:
    """Decision and routing times of one router, and its Ray metrics (fallbacks by reason, decision time)."""

    def __init__(self, keep: int, time_stages: bool = False, deployment_id: Any = None, metrics: bool = True) -> None:
        self.decision_s: deque[float] = deque(maxlen=keep)
        self.routing_s: deque[float] = deque(maxlen=keep)
        self.stage_s: Optional[dict[str, deque[float]]] = (
            {s: deque(maxlen=keep) for s in STAGES} if time_stages else None)
        tags = ("deployment", "application")
        self._fallbacks = self._decision_hist = None
        if not metrics:
            return
        self._fallbacks = _metric("Counter", "rewardkit_ray_router_fallback_decisions",
                                  "decisions made without fresh replica stats", tag_keys=tags + ("reason",))
        self._decision_hist = _metric("Histogram", "rewardkit_ray_router_decision_ms", "time to decide one request (ms)",
                                      boundaries=[0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10], tag_keys=tags)
        if deployment_id is not None:
            for m in (self._fallbacks, self._decision_hist):
                if m is not None:
                    m.set_default_tags({"deployment": deployment_id.name, "application": deployment_id.app_name})

    def decided(self, seconds: float, reason: Optional[str], marks: Optional[list[float]] = None) -> None:
        """One decision took ``seconds`` (``reason``: why it fell back, or None; ``marks``: its stages' clock reads)."""
        self.decision_s.append(seconds)
        if self._decision_hist is not None:
            self._decision_hist.observe(1000.0 * seconds)
        if reason is not None and self._fallbacks is not None:
            self._fallbacks.inc(tags={"reason": reason})
        if marks is not None and self.stage_s is not None:
            for name, begin, end in zip(STAGES, marks, marks[1:], strict=False):
                self.stage_s[name].append(end - begin)

    def routed(self, created_at: float) -> None:
        """A request Ray created at ``created_at`` (wall clock) was accepted by its replica now."""
        self.routing_s.append(time.time() - created_at)

    def stats(self) -> dict[str, Any]:
        """Decision time p50/p99 (ms) and every kept decision, routing and stage time (ms)."""
        times = np.asarray(self.decision_s) * 1000.0
        return {"decision_ms_p50": float(np.percentile(times, 50)) if len(times) else None,
                "decision_ms_p99": float(np.percentile(times, 99)) if len(times) else None,
                "decision_ms": _ms(self.decision_s), "routing_ms": _ms(self.routing_s, 4),
                "stage_ms": {k: _ms(v) for k, v in (self.stage_s or {}).items() if v}}
