"""The live side of the router: a cluster of real engines seen as the simulator sees its replicas.

- :mod:`schedulers.live.view`: :class:`LiveClusterView`, the bookkeeping of one's own in-flight
  requests (plus the engines' scraped ``/metrics``) turned into the same
  :class:`~schedulers.routing.snapshot.ReplicaSnapshot` the simulator builds, so every policy
  decides on it unchanged.
- :mod:`schedulers.live.config`: the live env YAML (a ``live`` section naming the engines, beside
  the workload every env YAML has).
- :mod:`schedulers.live.env`: :class:`~schedulers.live.env.LiveRoutingEnv`, the Gymnasium interface
  of the Vidur env over real engines (arrivals and per-request credit as in the simulator).
- :mod:`schedulers.live.decision_log`: the decision log (JSON Lines) the gateway writes and
  training reads.

It stands on ``shared`` and ``routing`` only: no simulator, no load generator.
"""
