"""``potential_shaping``: potential-based reward shaping, F = gamma*phi(s') - phi(s).

This module is the definition; faster paths that give the same numbers (plain floats on the
single environment's state slots, inlined code) live in ``components/_fast/potential_shaping.py``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..backend import array_namespace
from ..base import Array, BaseReward, PerEnvState
from ..params import Param
from ..registry import register
from ._numeric import overflow_ok, saturate


@register("potential_shaping")
class PotentialShaping(BaseReward):
    """gamma*phi(s')-phi(s), phi(s')=0 when terminated, 0 on an episode's first call: in (-inf, inf), increasing in potential.

    ``potential`` is phi of the state just reached. The first call of an episode records
    phi(s0) and returns 0; each later call returns ``gamma*phi(s') - phi(s)`` and remembers
    phi(s'). On termination phi(s') counts as 0; on truncation it keeps its value (the episode
    would have continued). Over an episode the discounted sum telescopes to
    ``gamma**T*phi(s_T) - phi(s_0)`` (``-phi(s_0)`` if terminated), so shaping with it leaves
    the optimal policy unchanged (Ng et al., 1999) when ``gamma`` is the agent's discount.
    """

    inputs = {"potential": 0}
    params = {
        "gamma": Param.fraction(0.99, "discount factor; use the agent's", open_low=True),
    }
    output_range = (-math.inf, math.inf)
    monotone = {"potential": "increasing"}
    stateful = True
    atomic_update = True  # the scalar and batched paths can only fail before writing state

    def __init__(self, name: str | None = None, inputs: Mapping[str, str] | None = None, **params: Any) -> None:
        super().__init__(name, inputs, **params)
        self._state = PerEnvState(phi=0.0, started=0.0)

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        potential = x["potential"]
        xp = array_namespace(potential)
        state = self._state
        s = state.ensure(potential.shape[0], like=potential)
        phi_next = xp.where(terminated, 0.0, potential)
        with overflow_ok():
            shaped = saturate(self.gamma * phi_next - s["phi"])
        if state.started_everywhere:  # a host-side flag: no environment is on its first call
            s["phi"] = phi_next
            return shaped
        started = s["started"] != 0.0
        out = xp.where(started, shaped, 0.0)
        s["phi"] = xp.where(started, phi_next, potential)
        s["started"] = xp.ones_like(potential)
        state.started_everywhere = True
        return out

    def reset(self, mask: Array | None = None) -> None:
        self._state.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        return self._state.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._state.load_state_dict(state)

    def snapshot(self) -> Any:
        return self._state.snapshot()

    def restore(self, saved: Any) -> None:
        self._state.restore(saved)
