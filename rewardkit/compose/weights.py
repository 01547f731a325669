"""Emitter: every node's weight at ``step``, a literal when constant, identical schedules evaluated
once, and the linear ramps that are still rising tested by one comparison instead of one each."""

from __future__ import annotations

from typing import Sequence

from ..config import GroupNode, TermNode
from ..shaper import RewardShaper
from .names import Scope, identifier
from .source import Emitted
from .tokens import is_finite_literal


def weights(order: Sequence[TermNode | GroupNode], shaper: RewardShaper, scope: Scope) -> tuple[Emitted, dict[str, str]]:
    """The weight statements and, per node name, the expression or variable holding its weight."""
    out = Emitted()
    weight_of: dict[str, str] = {}
    by_expr: dict[str, str] = {}
    # (variable, ramp's end step, expression on the ramp, full expression, value after the ramp)
    ramps: list[tuple[str, int, str, str, str]] = []
    lines: list[str] = []
    for node in order:
        sched = shaper.schedule(node.name)
        expr = sched.source("step")
        if expr is None or not is_finite_literal(expr) and not expr.startswith(("(", "min(", "max(")):
            expr = f"{out.bind(scope.unique(f'_{identifier(node.name)}_schedule'), sched)}(step)"
        if is_finite_literal(expr):
            weight_of[node.name] = expr
        elif expr in by_expr:
            weight_of[node.name] = by_expr[expr]
        else:
            var = by_expr[expr] = weight_of[node.name] = scope.weight(node.name)
            ramp = sched.ramp_source("step")
            if ramp is None:
                lines.append(f"    {var} = {expr}")
            else:
                ramps.append((var, ramp[0], ramp[1], expr, repr(float(sched(ramp[0])))))
    if len(ramps) == 1:
        lines.append(f"    {ramps[0][0]} = {ramps[0][3]}")
    elif ramps:  # one comparison while every ramp still rises (or once all ended), not one per schedule
        lines.append(f"    if step < {min(r[1] for r in ramps)}:")
        lines += [f"        {var} = {ramp}" for var, _, ramp, _, _ in ramps]
        lines.append(f"    elif step >= {max(r[1] for r in ramps)}:")
        lines += [f"        {var} = {end}" for var, _, _, _, end in ramps]
        lines.append("    else:")
        lines += [f"        {var} = {expr}" for var, _, _, expr, _ in ramps]
    if lines:
        out.lines = ["    # ---- weights (schedules of the step)", *lines]
    return out, weight_of
