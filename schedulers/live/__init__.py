"""The live side of the router: a cluster of real engines seen as the simulator sees its replicas.

- :mod:`schedulers.live.view`: :class:`LiveClusterView`, the gateway's bookkeeping of its own
  in-flight requests turned into the same :class:`~schedulers.routing.snapshot.ReplicaSnapshot`
  the simulator builds, so every router decides on it unchanged.
- :mod:`schedulers.live.decision_log`: the decision log (JSON Lines) the gateway writes and
  training reads.
"""
