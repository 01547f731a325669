"""Emitter: normalizers, transforms, weights and sums over the tree, children before their group,
``applies_to`` masks in place; it assigns ``total`` and names the flat per-term output variables."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..applies import batch_mask, masked
from ..config import GroupNode, RewardSpec, TermNode
from .names import Scope, identifier
from .source import Emitted


def combine(spec: RewardSpec, order: Sequence[TermNode | GroupNode], applying: Sequence[TermNode], scope: Scope,
            raw_of: Mapping[str, str], weight_of: Mapping[str, str], *, scalar: bool) -> tuple[Emitted, list[str]]:
    """The statements and the flat output variables in pre-order (raw, normalized, weight,
    contribution per node, then the ``applies_to`` masks). ``scalar``: normalizers called on floats
    (``normalizer.scalar``) rather than arrays."""
    out = Emitted()
    lines = out.lines
    outputs: dict[str, list[str]] = {}

    def node_value(node: TermNode | GroupNode) -> str:
        ident = identifier(node.name)
        if isinstance(node, GroupNode):
            parts = [node_value(child) for child in node.children]
            raw = scope.raw(node.name)
            lines.append(f"    {raw} = {' + '.join(parts)}")
        else:
            raw = raw_of[node.name]
        value = raw
        if node.normalizer is not None:
            fn = out.bind(scope.unique(f"_{ident}_normalize"), node.normalizer.scalar if scalar else node.normalizer.__call__)
            lines.append(f"    {scope.normalized(node.name)} = {fn}({value}, done, _store.training)")
            value = scope.normalized(node.name)
        for k, transform in enumerate(node.transforms):
            fn = out.bind(scope.unique(f"_{ident}_{transform.name}" + (f"{k + 1}" if len(node.transforms) > 1 else "")),
                          transform)
            lines.append(f"    {scope.normalized(node.name)} = {fn}({value})")
            value = scope.normalized(node.name)
        if isinstance(node, TermNode) and node.applies_to:
            out.add(applies(node, scope, raw, value, scalar=scalar))
        contribution = scope.contribution(node.name)
        lines.append(f"    {contribution} = {weight_of[node.name]} * {value}")
        outputs[node.name] = [raw, value, weight_of[node.name], contribution]
        return contribution

    top = [node_value(node) for node in spec.nodes]
    lines.append(f"    total = {' + '.join(top)}")
    for transform in spec.total_transforms:
        lines.append(f"    total = {out.bind(scope.unique(f'_total_{transform.name}'), transform)}(total)")
    flat = [name for node in order for name in outputs[node.name]]
    return out, flat + [scope.applies(node.name) for node in applying]  # the masks follow (TermNames.applies)


def applies(node: TermNode, scope: Scope, raw: str, value: str, *, scalar: bool) -> Emitted:
    """``applies_to``: where the term's columns do not hold its values, its raw and normalized
    values (so its contribution) are 0; the mask goes to the output (rewardkit.applies)."""
    out = Emitted()
    ident = identifier(node.name)
    mask = scope.applies(node.name)
    conditions = sorted(node.applies_to.items())
    allowed = [out.bind(scope.unique(f"_{ident}_allowed_{identifier(key)}"), values) for key, values in conditions]
    if scalar:
        test = " and ".join(f"{scope.ctx(key)} in {name}" for (key, _), name in zip(conditions, allowed, strict=True))
        out.lines.append(f"    {mask} = {test}")
        out.lines.append(f"    if not {mask}: {raw} = {value} = 0.0" if value != raw else f"    if not {mask}: {raw} = 0.0")
        return out
    out.globals.update(_batch_mask=batch_mask, _masked=masked)
    columns = ", ".join(scope.ctx(key) for key, _ in conditions)
    out.lines.append(f"    {mask} = _batch_mask([{columns}], [{', '.join(allowed)}])")
    out.lines.append(f"    {raw} = _masked({raw}, {mask})")
    if value != raw:
        out.lines.append(f"    {value} = _masked({value}, {mask})")
    return out
