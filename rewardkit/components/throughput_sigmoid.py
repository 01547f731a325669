"""``throughput_sigmoid``: a bounded reward for throughput around a target."""

from __future__ import annotations

from ..params import Param
from ..registry import register
from ._sigmoid import ScaledSigmoid


@register("throughput_sigmoid")
class ThroughputSigmoid(ScaledSigmoid):
    """1/(1+exp(-(throughput-target)/scale)): 0.5 at the target, in (0, 1), increasing in throughput."""

    inputs = {"throughput": 0}
    params = {
        "target": Param.number(doc="throughput at which the term is 0.5"),
        "scale": Param.positive(1.0, "width of the transition; smaller is steeper"),
    }
    center_param = "target"
    width_param = "scale"
    monotone = {"throughput": "increasing"}
