"""``ObservationConfig``: how a router's observation rows are scaled, the ``observation`` section of an env YAML.

Its home is the floor both halves stand on: the env YAML's reader (:mod:`schedulers.shared.workload`)
checks the section with :data:`OBSERVATION_CHECKS`, and :mod:`schedulers.routing.observation` builds
the rows with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewardkit.params import Param

from ..bounds import MIN_OBSERVATION_SCALE


@dataclass(frozen=True)
class ObservationConfig:
    """How replica and request features are normalized (:mod:`schedulers.routing.observation`)."""

    #: window (simulated seconds) for "recent completions" and the recent throughput/latency.
    recent_window_s: float = 10.0
    #: request counts are divided by this.
    count_scale: float = 16.0
    #: token counts are divided by this.
    token_scale: float = 4096.0
    #: time constant (s of batch work) of the online speed estimate (``measured_speed``).
    speed_tau_s: float = 2.0
    #: opt-in: add ``PREFIX_FEATURES`` (the prefix-cache match) to every row. Off by default, so
    #: observations, and the checkpoints trained on them, keep ``len(FEATURE_NAMES)`` columns.
    prefix_match: bool = False


#: the ``observation`` section's keys and their checks
OBSERVATION_CHECKS = {
    "speed_tau_s": Param.between(MIN_OBSERVATION_SCALE, float("inf"),
                                 doc="time constant (s) of the measured-speed moving average"),
    "recent_window_s": Param.between(MIN_OBSERVATION_SCALE, float("inf"),
                                     doc="window (s) of recent completions and throughput"),
    "count_scale": Param.between(MIN_OBSERVATION_SCALE, float("inf"), doc="request counts are divided by this"),
    "token_scale": Param.between(MIN_OBSERVATION_SCALE, float("inf"), doc="token counts are divided by this"),
    "prefix_match": Param.boolean(doc="add the prefix-cache match feature (0 in Vidur, which caches no prefixes)"),
}
