"""Our routing policies as a Ray Serve request router (docs/ray-serve.md).

- :class:`PolicyRequestRouter` (:mod:`.router`): a ``ray.serve.request_router.RequestRouter`` that
  decides through any policy of :func:`~schedulers.routing.policy.make_policy`, named in the
  deployment's ``request_router_kwargs`` (``{"policy": "least_prefill"}``, ``{"policy": "ppo",
  "checkpoint": PATH}``), on the same :class:`~schedulers.routing.snapshot.ReplicaSnapshot` the
  gateway builds; its ``request_router_kwargs`` are checked as :class:`RouterOptions` (:mod:`.options`),
  and what it reports (:func:`router_stats`) is kept by :mod:`.report`;
- :class:`ReplicaStats` and :class:`RoutingStatsMixin` (:mod:`.replica_stats`): what a replica
  reports through ``record_routing_stats``;
- :class:`RoutedRequest` (:mod:`.request`): the request an ingress hands the replicas, carrying
  what the router reads (prompt tokens, token ids).

Importing this package imports Ray (the ``ray`` extra).
"""

try:
    import ray.serve.request_router  # noqa: F401 - the router's base class
except ImportError as exc:  # one line naming the install, not a traceback deep in Ray
    raise ModuleNotFoundError(f"schedulers.integrations.ray_serve needs Ray Serve ({exc}): pip install "
                              "'ray[serve]==2.60.*' (the project's ray extra)", name=exc.name or "ray") from None

from .options import RouterOptions
from .replica_stats import ReplicaStats, RoutingStatsMixin, STATS_KEYS
from .request import RoutedRequest
from .router import PolicyRequestRouter, report_first_token
from .report import router_stats

__all__ = ["PolicyRequestRouter", "ReplicaStats", "RoutedRequest", "RouterOptions", "RoutingStatsMixin", "STATS_KEYS",
           "report_first_token", "router_stats"]
