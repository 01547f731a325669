"""Our routing policies as a Ray Serve request router (docs/ray-serve.md).

- :class:`PolicyRequestRouter` (:mod:`.router`): a ``ray.serve.request_router.RequestRouter`` that
  decides through any policy of :func:`~schedulers.routing.policy.make_policy`, named in the
  deployment's ``request_router_kwargs`` (``{"policy": "least_prefill"}``, ``{"policy": "ppo",
  "checkpoint": PATH}``), on the same :class:`~schedulers.routing.snapshot.ReplicaSnapshot` the
  gateway builds;
- :class:`ReplicaStats` and :class:`RoutingStatsMixin` (:mod:`.replica_stats`): what a replica
  reports through ``record_routing_stats``;
- :class:`RoutedRequest` (:mod:`.request`): the request an ingress hands the replicas, carrying
  what the router reads (prompt tokens, token ids).

Importing this package imports Ray (the ``ray`` extra).
"""

try:
    import ray.serve.request_router  # noqa: F401 - the router's base class
except ImportError as exc:  # one line naming the install, not a traceback deep in Ray
    raise ImportError(f"schedulers.integrations.ray_serve needs Ray Serve ({exc}): pip install 'ray[serve]==2.60.*' "
                      "(the project's ray extra)") from None

from .replica_stats import ReplicaStats, RoutingStatsMixin, STATS_KEYS
from .request import RoutedRequest
from .router import PolicyRequestRouter, report_first_token, router_stats

__all__ = ["PolicyRequestRouter", "ReplicaStats", "RoutedRequest", "RoutingStatsMixin", "STATS_KEYS",
           "report_first_token", "router_stats"]
