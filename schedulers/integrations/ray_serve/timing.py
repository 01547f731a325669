"""Ray's own request routers, measured the way :class:`~.router.PolicyRequestRouter` measures itself.

``TimedPowerOfTwo`` (Ray Serve's default, ``PowerOfTwoChoicesRequestRouter``) and
``TimedPrefixCacheAffinity`` (Ray Serve LLM's ``PrefixCacheAffinityRouter``) route exactly as
their parents; they only record each request's routing time (from Ray creating its pending
request to the chosen replica accepting it, read in the public ``on_request_routed`` hook) so a
benchmark can compare routers' added latency in one run (:func:`~.router.router_stats`).

Ray Serve LLM's router is imported from its module, not ``ray.serve.llm.request_router``: that
package's ``__init__`` imports Serve LLM's OpenAI models, which need vLLM or SGLang installed in
the same environment (``ImportError: Neither vLLM nor SGLang is installed``), though the router
itself needs neither (nor a GPU).
"""

from __future__ import annotations

from typing import Any

from ray.serve._private.request_router.pow_2_router import PowerOfTwoChoicesRequestRouter

from .. import live_routers
from .report import RouterTimes

PREFIX_AFFINITY_PATH = "ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router"


class RoutingTimer:
    """Mixin: records each request's routing time (ms) and joins this process's live routers."""

    def initialize_state(self, **kwargs: Any) -> None:
        super().initialize_state(**kwargs)  # type: ignore[misc]
        self.spec = type(self).__name__ + "".join(f":{k}={v}" for k, v in sorted(kwargs.items()))
        self.times = RouterTimes(keep=100_000, metrics=False)
        live_routers.ROUTERS.add(self)

    def on_request_routed(self, pending_request: Any, replica_id: Any, result: Any) -> None:
        """Record the request's routing time, then route as the parent."""
        self.times.routed(pending_request.created_at)
        super().on_request_routed(pending_request, replica_id, result)  # type: ignore[misc]

    def first_token(self, request_key: str, tokens: int = 1) -> None:
        """Ray's routers keep no per-request load; nothing to do."""

    def stats(self) -> dict[str, Any]:
        """The router's name, its requests routed and their routing times (ms); no decision times of its own."""
        return {"policy": self.spec, "decisions": len(self.times.routing_s), "fallbacks": {}, **self.times.stats()}


class TimedPowerOfTwo(RoutingTimer, PowerOfTwoChoicesRequestRouter):
    """Ray Serve's default router, timed."""


def _prefix_affinity() -> type:
    from ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router import PrefixCacheAffinityRouter

    return PrefixCacheAffinityRouter


class TimedPrefixCacheAffinity(RoutingTimer, _prefix_affinity()):  # type: ignore[misc]
    """Ray Serve LLM's ``PrefixCacheAffinityRouter``, timed."""
