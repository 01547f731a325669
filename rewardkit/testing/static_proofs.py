"""Static proofs of a config's expectations from what its parts declare, without sampling.

- Monotone: a weighted sum of terms each declared monotone in an input, whose weights keep one
  sign over the whole schedule, is monotone; normalizers (for fixed statistics), ``clip`` and
  ``tanh`` keep the direction, a negative ``scale`` or weight flips it.
- Range and finiteness: interval arithmetic over the same operations, in the same order, as the
  composer (float rounding is monotone, so the float bounds hold exactly). A stateless term
  monotone in each scalar input takes its extremes at the corners of the inputs' sampling ranges;
  any other term is bounded by its declared ``output_range``.

The proofs rest on the components' declarations (``monotone``, ``output_range``, finite output),
which :func:`rewardkit.testing.check_component` verifies. When a proof cannot conclude, the
reason says why (a weight that changes sign, terms pulling in opposite directions, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..base import BaseReward
from ..components._numeric import FLOAT_MAX
from ..composer import RewardComposer
from ..config import GroupNode, TermNode
from ..normalizers import Normalizer, ReturnStd, RunningMinMax, RunningZScore
from ..schedules import Constant, Cosine, Exponential, Linear, Piecewise, Schedule, Step
from ..transforms import Clip, Scale, Shift, Tanh, Transform
from .strategies import Bounds, context_keys

Interval = tuple[float, float]
UNBOUNDED: Interval = (-math.inf, math.inf)
_WORD = {1: "non-decreasing", -1: "non-increasing", 0: "constant"}


@dataclass(frozen=True)
class Proof:
    """Outcome of a static proof: ``proved`` and the reason (or why it could not conclude)."""

    proved: bool
    reason: str


class _Unknown(Exception):
    """The direction cannot be concluded; the message says why."""


# ---- weights ----------------------------------------------------------------------------------
def _hull(*values: float) -> Interval:
    return (min(values), max(values))


def schedule_interval(schedule: Schedule) -> Interval | None:
    """Values a weight schedule takes over all steps (a superset), or ``None`` for an unknown kind."""
    c = schedule.config
    if isinstance(schedule, Constant):
        lo = hi = c["value"]
    elif isinstance(schedule, (Linear, Cosine)):
        lo, hi = _hull(c["start"], c["end"])
    elif isinstance(schedule, Exponential):
        start, rate = c["start"], c["rate"]
        far = 0.0 if rate < 1 else (start if rate == 1 else math.copysign(math.inf, start))
        lo, hi = _hull(start, far) if start != 0 else (0.0, 0.0)
    elif isinstance(schedule, Step):
        start, factor = c["start"], c["factor"]
        if start == 0:
            lo = hi = 0.0
        elif factor >= 0:
            lo, hi = _hull(start, 0.0 if factor <= 1 else math.copysign(math.inf, start))
            if factor == 1:
                lo = hi = start
        else:
            lo, hi = (-abs(start), abs(start)) if factor >= -1 else UNBOUNDED
    elif isinstance(schedule, Piecewise):
        lo, hi = _hull(*(v for _, v in c["points"]))
    else:
        return None
    low, high = schedule.low, schedule.high
    return (min(high, max(low, lo)), min(high, max(low, hi)))


def _weight_sign(node: TermNode | GroupNode) -> int:
    """+1 if the weight is >= 0 at every step, -1 if <= 0, else raise ``_Unknown``."""
    interval = schedule_interval(node.weight)
    if interval is None:
        raise _Unknown(f"the weight schedule of {node.name} ({type(node.weight).__name__}) has no known sign")
    lo, hi = interval
    if lo >= 0:
        return 1
    if hi <= 0:
        return -1
    raise _Unknown(f"the weight of {node.name} changes sign over its schedule (from {lo:g} to {hi:g})")


# ---- monotone ---------------------------------------------------------------------------------
def _combine(parts: list[tuple[int, str]], where: str) -> int:
    """Direction of a sum from its parts' directions (+1, -1 or 0, with the part's name)."""
    up = [name for d, name in parts if d > 0]
    down = [name for d, name in parts if d < 0]
    if up and down:
        raise _Unknown(f"{where}: {up[0]} is non-decreasing but {down[0]} is non-increasing in it")
    return 1 if up else (-1 if down else 0)


def _leaf_direction(leaf: TermNode, key: str) -> int:
    comp = leaf.component
    parts = []
    for local, ctx_key in comp.input_keys.items():
        if ctx_key != key:
            continue
        declared = comp.monotone.get(local)
        if declared not in ("increasing", "decreasing"):
            raise _Unknown(f"{leaf.name} ({comp.type_name or type(comp).__name__}) declares no direction "
                           f"for its input {local!r}")
        parts.append((1 if declared == "increasing" else -1, f"{leaf.name} (input {local!r})"))
    return _combine(parts, leaf.name)


def _through(direction: int, normalizer: Normalizer | None, transforms: list[Transform], where: str) -> int:
    if direction == 0:
        return 0
    if normalizer is not None and not isinstance(normalizer, (RunningZScore, RunningMinMax, ReturnStd)):
        raise _Unknown(f"{where}: normalizer {type(normalizer).__name__} has no known direction")
    for t in transforms:
        if isinstance(t, Scale):
            direction = direction * (1 if t.factor > 0 else (-1 if t.factor < 0 else 0))
        elif not isinstance(t, (Clip, Shift, Tanh)):
            raise _Unknown(f"{where}: transform {type(t).__name__} has no known direction")
    return direction


def _node_direction(node: TermNode | GroupNode, key: str) -> int:
    """Direction of the node's contribution (after normalizer, transforms and weight) in ``key``."""
    if isinstance(node, TermNode):
        raw = _leaf_direction(node, key)
    else:
        raw = _combine([(_node_direction(c, key), c.name) for c in node.children], node.name)
    shaped = _through(raw, node.normalizer, node.transforms, node.name)
    return 0 if shaped == 0 else shaped * _weight_sign(node)


def outside_domains(composer: RewardComposer, ranges: Mapping[str, Bounds] | None = None) -> str | None:
    """Why the sampling ranges reach outside an input domain a component declares, or ``None``.

    Declarations hold only within the domains, so the proofs do too."""
    ranges = _ranges(composer, ranges)
    for leaf in composer.leaves():
        comp = leaf.component
        for local, key in comp.input_keys.items():
            domain = getattr(comp, "input_domains", {}).get(local)
            if key in ranges and domain is not None and not domain[0] <= ranges[key][0] <= ranges[key][1] <= domain[1]:
                return (f"the range {_show(*ranges[key])} of {key!r} reaches outside the domain {_show(*domain)} "
                        f"that {leaf.name} declares for its input {local!r}")
    return None


def _ranges(composer: RewardComposer, ranges: Mapping[str, Bounds] | None) -> Mapping[str, Bounds]:
    if ranges is None:
        ranges = composer.spec.expect.inputs if composer.spec.expect is not None else {}
    return ranges


def prove_monotone(composer: RewardComposer, key: str, direction: str,
                   ranges: Mapping[str, Bounds] | None = None) -> Proof:
    """Try to prove the total is ``direction`` ("increasing"/"decreasing", not strictly) in ``key``
    at every step, for any fixed state of components and normalizer statistics."""
    want = 1 if direction == "increasing" else -1
    outside = outside_domains(composer, ranges)
    if outside:
        return Proof(False, f"cannot conclude: {outside}")
    try:
        parts = [(_node_direction(n, key), n.name) for n in composer.spec.nodes]
        got = _through(_combine(parts, "total"), None, composer.spec.total_transforms, "total")
    except _Unknown as exc:
        return Proof(False, f"cannot conclude: {exc}")
    if got == 0:
        return Proof(True, f"the total does not depend on {key!r}")
    if got == want:
        return Proof(True, f"every term reading {key!r} is {_WORD[want]} in it at every step "
                           "(declared directions, sign of each weight over its schedule)")
    return Proof(False, f"cannot conclude: the declared directions make the total {_WORD[got]} in {key!r}")


# ---- intervals --------------------------------------------------------------------------------
def _mul(a: Interval, b: Interval) -> Interval:
    corners = []
    for x in a:
        for y in b:
            if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
                return UNBOUNDED  # 0 * inf: the actual value may be NaN
            corners.append(x * y)
    return (min(corners), max(corners))


def _add(a: Interval, b: Interval) -> Interval:
    lo, hi = a[0] + b[0], a[1] + b[1]
    return UNBOUNDED if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def _leaf_interval(leaf: TermNode, ranges: Mapping[str, Bounds]) -> Interval:
    comp = leaf.component
    declared = comp.output_range
    low, high = max(declared[0], -FLOAT_MAX), min(declared[1], FLOAT_MAX)  # finite outputs are promised
    corners = _corner_values(comp, ranges)
    if corners is not None:
        low, high = max(low, corners[0]), min(high, corners[1])
    return (low, high)


def _corner_values(comp: BaseReward, ranges: Mapping[str, Bounds]) -> Interval | None:
    """Output at the low and high corners of the input box, for a stateless component monotone in
    each of its (scalar, required) inputs with bounded ranges; else ``None``."""
    if comp.stateful or comp.optional_inputs or not comp.inputs:
        return None
    low_in, high_in = {}, {}
    for local, key in comp.input_keys.items():
        direction = comp.monotone.get(local)
        bounds = ranges.get(key)
        if comp.inputs[local] != 0 or direction not in ("increasing", "decreasing") or bounds is None \
                or not all(math.isfinite(b) for b in bounds):
            return None
        lo, hi = bounds if direction == "increasing" else bounds[::-1]
        low_in[local], high_in[local] = np.array([lo]), np.array([hi])
    no = np.zeros(1, dtype=bool)
    try:
        with np.errstate(all="ignore"):
            out_low = float(comp.compute(low_in, no, no)[0])
            out_high = float(comp.compute(high_in, no, no)[0])
    except Exception:  # noqa: BLE001 - a range outside the component's domain: no bound from corners
        return None
    if not (math.isfinite(out_low) and math.isfinite(out_high)) or out_low > out_high:
        return None
    return (out_low, out_high)


def _through_interval(x: Interval, normalizer: Normalizer | None, transforms: list[Transform]) -> Interval:
    if normalizer is not None:
        if isinstance(normalizer, ReturnStd):  # x / sqrt(var + eps): keeps the sign
            x = (-math.inf if x[0] < 0 else 0.0, math.inf if x[1] > 0 else 0.0)
        else:
            x = UNBOUNDED
        clip = getattr(normalizer, "clip", None) if isinstance(normalizer, (RunningZScore, ReturnStd)) else None
        if clip is not None:
            x = (min(clip, max(-clip, x[0])), min(clip, max(-clip, x[1])))
    for t in transforms:
        if isinstance(t, Scale):
            x = _mul(x, (t.factor, t.factor))
        elif isinstance(t, Shift):
            x = (x[0] + t.offset, x[1] + t.offset)
        elif isinstance(t, Clip):
            x = (min(t.high, max(t.low, x[0])), min(t.high, max(t.low, x[1])))
        elif isinstance(t, Tanh):  # one ulp outward: NumPy's tanh may differ from libm's
            x = (max(-1.0, math.nextafter(math.tanh(x[0]), -2.0)), min(1.0, math.nextafter(math.tanh(x[1]), 2.0)))
        else:
            x = UNBOUNDED
    return x


def _node_interval(node: TermNode | GroupNode, ranges: Mapping[str, Bounds]) -> Interval:
    if isinstance(node, TermNode):
        raw = _leaf_interval(node, ranges)
    else:
        parts = [_node_interval(c, ranges) for c in node.children]
        raw = parts[0]
        for p in parts[1:]:
            raw = _add(raw, p)
    shaped = _through_interval(raw, node.normalizer, node.transforms)
    if getattr(node, "applies_to", None):  # 0 where the term does not apply
        shaped = (min(shaped[0], 0.0), max(shaped[1], 0.0))
    weight = schedule_interval(node.weight)
    return _mul(weight if weight is not None else UNBOUNDED, shaped)


def total_interval(composer: RewardComposer, ranges: Mapping[str, Bounds] | None = None) -> Interval:
    """Bounds of the total over every step and context (infinite ends: no bound found).

    ``ranges`` are the sampling ranges of context keys (default: ``expect.inputs``, else the
    components' declared domains)."""
    bounds = {k.name: k.bounds for k in context_keys(composer, _ranges(composer, ranges))}
    parts = [_node_interval(n, bounds) for n in composer.spec.nodes]
    total = parts[0]
    for p in parts[1:]:
        total = _add(total, p)
    return _through_interval(total, None, composer.spec.total_transforms)


def prove_range(composer: RewardComposer, low: float, high: float,
                ranges: Mapping[str, Bounds] | None = None) -> Proof:
    """Try to prove the total stays in ``[low, high]``."""
    outside = outside_domains(composer, ranges)
    if outside:
        return Proof(False, f"cannot conclude: {outside}")
    lo, hi = total_interval(composer, ranges)
    if low <= lo and hi <= high:
        return Proof(True, f"the total lies in {_show(lo, hi)} (declared output ranges, weights over their schedules)")
    return Proof(False, f"cannot conclude: the bound found for the total is {_show(lo, hi)}")


def prove_finite(composer: RewardComposer, ranges: Mapping[str, Bounds] | None = None) -> Proof:
    """Try to prove the total is finite for every finite context within the sampling ranges."""
    outside = outside_domains(composer, ranges)
    if outside:
        return Proof(False, f"cannot conclude: {outside}")
    lo, hi = total_interval(composer, ranges)
    if math.isfinite(lo) and math.isfinite(hi):
        return Proof(True, f"the total lies in {_show(lo, hi)}")
    return Proof(False, f"cannot conclude: the bound found for the total is {_show(lo, hi)}")


def _show(lo: float, hi: float) -> str:
    return f"[{lo + 0.0:.6g}, {hi + 0.0:.6g}]"  # + 0.0 prints -0.0 as 0
