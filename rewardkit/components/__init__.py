"""Built-in reward components; importing this package registers each under its name.

One module a component: find ``logistic_latency`` in ``logistic_latency.py``.
"""

from .ema_delta import EmaDelta
from .info_value import InfoValue
from .linear import Linear
from .littles_law_latency import LittlesLawLatency
from .load_imbalance import LoadImbalance
from .logistic_latency import LogisticLatency
from .potential_shaping import PotentialShaping
from .threshold_penalty import ThresholdPenalty
from .throughput_sigmoid import ThroughputSigmoid

__all__ = [
    "EmaDelta",
    "InfoValue",
    "Linear",
    "LittlesLawLatency",
    "LoadImbalance",
    "LogisticLatency",
    "PotentialShaping",
    "ThresholdPenalty",
    "ThroughputSigmoid",
]
