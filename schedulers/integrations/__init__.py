"""The routing policies inside other serving systems (each integration needs that system installed).

- :mod:`schedulers.integrations.ray_serve`: a Ray Serve request router deciding through any policy
  of :func:`schedulers.routing.policy.make_policy` (``pip install 'rewardkit[ray]'``).
"""
