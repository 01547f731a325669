"""``rewardkit replay``: what other routers would have done on a gateway's own traffic, in the simulator.

:mod:`~schedulers.replay.logged` reads decision logs into the requests that were answered;
:mod:`~schedulers.replay.workload` turns them into the simulator's arrivals (as logged, with shared
prefixes from the logged block names) and cluster; :mod:`~schedulers.replay.fit` fits each
replica's speed to its logged requests; :mod:`~schedulers.replay.runner` runs routers on that
cluster; :mod:`~schedulers.replay.report` gives the calibration error, the paired table, the JSON
and the plot; :mod:`~schedulers.replay.cli` is the command.
"""
