"""``logistic_latency``: a bounded latency term that switches on around a threshold."""

from __future__ import annotations

from ..params import Param
from ..registry import register
from ._sigmoid import ScaledSigmoid


@register("logistic_latency")
class LogisticLatency(ScaledSigmoid):
    """1/(1+exp(-(latency-threshold)/sigma)): 0.5 at the threshold, in (0, 1), increasing in latency.

    The raw term is a smooth "latency is too high" indicator; give it a negative weight to
    penalise it. Any finite latency gives a finite value: the logit is clipped to +-700, which
    changes the result by less than float64 resolution.
    """

    inputs = {"latency": 0}
    params = {
        "threshold": Param.number(doc="latency (s) at which the term is 0.5"),
        "sigma": Param.positive(1.0, "width of the transition (s); smaller is steeper"),
    }
    center_param = "threshold"
    width_param = "sigma"
    monotone = {"latency": "increasing"}
