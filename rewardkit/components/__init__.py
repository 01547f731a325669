"""Built-in reward components; importing this package registers each under its name.

One module a component: find ``logistic_latency`` in ``logistic_latency.py``. Text components
(``regex_match``, ``length_penalty``, ``length_target``, ``overlong_penalty``, ``answer_match``,
``repetition_rate``) share ``_text.TextReward``; the length ones ``_length.LengthReward``. A
component's module is its definition; faster paths that give the same numbers live apart, in
``_fast/`` (attached here).
"""

from .answer_match import AnswerMatch
from .bullet_count import BulletCount
from .ema_delta import EmaDelta
from .ends_with import EndsWith
from .info_value import InfoValue
from .json_keys import JsonKeys
from .judge import Judge
from .keywords import Keywords
from .length_penalty import LengthPenalty
from .length_target import LengthTarget
from .linear import Linear
from .littles_law_latency import LittlesLawLatency
from .load_imbalance import LoadImbalance
from .logistic_latency import LogisticLatency
from .overlong_penalty import OverlongPenalty
from .potential_shaping import PotentialShaping
from .regex_match import RegexMatch
from .remote_score import RemoteScore
from .repetition_rate import RepetitionRate
from .threshold_penalty import ThresholdPenalty
from .throughput_sigmoid import ThroughputSigmoid
from .word_count_bounds import WordCountBounds
from ._fast import attach_all as _attach_fast_paths

_attach_fast_paths({
    "ema_delta": EmaDelta,
    "length_penalty": LengthPenalty,
    "length_target": LengthTarget,
    "linear": Linear,
    "littles_law_latency": LittlesLawLatency,
    "load_imbalance": LoadImbalance,
    "logistic_latency": LogisticLatency,
    "overlong_penalty": OverlongPenalty,
    "potential_shaping": PotentialShaping,
    "threshold_penalty": ThresholdPenalty,
    "throughput_sigmoid": ThroughputSigmoid,
})

__all__ = [
    "AnswerMatch",
    "BulletCount",
    "EmaDelta",
    "EndsWith",
    "InfoValue",
    "JsonKeys",
    "Judge",
    "Keywords",
    "LengthPenalty",
    "LengthTarget",
    "Linear",
    "LittlesLawLatency",
    "LoadImbalance",
    "LogisticLatency",
    "OverlongPenalty",
    "PotentialShaping",
    "RegexMatch",
    "RemoteScore",
    "RepetitionRate",
    "ThresholdPenalty",
    "ThroughputSigmoid",
    "WordCountBounds",
]
