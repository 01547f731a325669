"""Built-in reward components; importing this package registers each under its name.

One module a component: find ``logistic_latency`` in ``logistic_latency.py``.
"""

from .ema_delta import EmaDelta
from .info_value import InfoValue
from .judge import Judge
from .linear import Linear
from .littles_law_latency import LittlesLawLatency
from .load_imbalance import LoadImbalance
from .logistic_latency import LogisticLatency
from .potential_shaping import PotentialShaping
from .remote_score import RemoteScore
from .threshold_penalty import ThresholdPenalty
from .throughput_sigmoid import ThroughputSigmoid

__all__ = [
    "EmaDelta",
    "InfoValue",
    "Judge",
    "Linear",
    "LittlesLawLatency",
    "LoadImbalance",
    "LogisticLatency",
    "PotentialShaping",
    "RemoteScore",
    "ThresholdPenalty",
    "ThroughputSigmoid",
]
