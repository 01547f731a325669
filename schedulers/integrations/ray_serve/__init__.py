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

from .replica_stats import ReplicaStats, RoutingStatsMixin, STATS_KEYS
from .request import RoutedRequest
from .router import PolicyRequestRouter, report_first_token, router_stats

__all__ = ["PolicyRequestRouter", "ReplicaStats", "RoutedRequest", "RoutingStatsMixin", "STATS_KEYS",
           "report_first_token", "router_stats"]
