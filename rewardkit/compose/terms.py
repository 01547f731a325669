"""Emitters: one term's raw value. On floats, a component's inlined expression or block when it
offers one (its helpers renamed into a namespace of its own), else a call of its ``scalar_fn``; on
batches, a call of its ``compute`` (or its fast path), third-party results checked."""

from __future__ import annotations

from typing import AbstractSet

from ..base import BaseReward, written_for_its_compute
from ..config import TermNode
from .layout import built_in
from .names import Scope, identifier
from .source import Emitted
from .tokens import known_present, names_in, rename_names


def scalar_term(node: TermNode, scope: Scope, *, present: AbstractSet[str], allow_nonfinite: bool
                ) -> tuple[Emitted, str]:
    """One component's raw value on floats, and the variable holding it. ``present``: variables of
    optional keys known to hold a value here (their ``is None`` tests are dropped)."""
    comp = node.component
    ident = identifier(node.name)
    args = [scope.ctx(key) for key in comp.input_keys.values()]
    raw = scope.raw(node.name)
    tag = "_" + ident
    own: dict[str, object] = {}  # the component's helpers, renamed into a namespace of its own
    inline = comp.scalar_source(args, own, tag) if written_for_its_compute(comp, "scalar_source") else None
    block = None
    if inline is None and written_for_its_compute(comp, "scalar_block"):
        block = comp.scalar_block(args, own, tag)
    known = [arg for arg in args if arg in present]
    if known and inline is not None:
        inline = known_present(inline, known)
    elif known and block is not None:
        body = known_present("\n".join(block[0]), known)
        block = (body.split("\n") if body else [], known_present(block[1], known))
    snippet = inline if inline is not None else "\n".join(block[0] + [block[1]]) if block is not None else ""
    scope.namer.reserve(names_in(snippet))  # the component's temporaries: helpers never take them
    rename = {name: scope.unique(f"_{ident}_{name.lstrip('_')}") for name in own}
    out = Emitted(globals={rename[name]: value for name, value in own.items()})
    if inline is not None:
        out.lines.append(f"    {raw} = {rename_names(inline, rename)}")
    elif block is not None:
        statements, result = block
        body = rename_names("\n".join(statements), rename) if statements else ""
        out.lines.extend(f"    {line}" for line in body.split("\n") if line)
        out.lines.append(f"    {raw} = {rename_names(result, rename)}")
    else:
        scalar_fn = comp.scalar_fn() if written_for_its_compute(comp, "scalar_fn") else BaseReward.scalar_fn(comp)
        fn = out.bind(scope.unique(f"_{ident}_fn"), scalar_fn)
        out.lines.append(f"    {raw} = {fn}({', '.join(args + ['terminated', 'truncated'])})")
        out.lines.append(f"    if {raw}.__class__ is not float: {raw} = _returned({raw}, {node.name!r})")
        if not allow_nonfinite:  # components are trusted to keep finite inputs finite only when built in
            out.lines.append(f"    if not _isfinite({raw}): _bad_output({raw}, {node.name!r})")
    return out, raw


def inputs_literal(comp: BaseReward, scope: Scope) -> str:
    """The dict of a component's inputs (local name -> variable), absent optional ones left out."""
    pairs = [(local, scope.ctx(key)) for local, key in comp.input_keys.items()]
    optional = [(local, var) for local, var in pairs if local in comp.optional_inputs]
    every = "{" + ", ".join(f"{local!r}: {var}" for local, var in pairs) + "}"
    if len(optional) == 1:  # a conditional, cheaper than a comprehension on every call
        var = optional[0][1]
        rest = "{" + ", ".join(f"{local!r}: {other}" for local, other in pairs if other != var) + "}"
        return f"({every} if {var} is not None else {rest})"
    if optional:
        items = ", ".join(f"({local!r}, {var})" for local, var in pairs)
        return f"{{k: v for k, v in ({items},) if v is not None}}"
    return every


def vector_term(node: TermNode, scope: Scope, *, allow_nonfinite: bool) -> tuple[Emitted, str]:
    """One component's batched ``compute`` call, and the variable holding its raw value."""
    comp = node.component
    out = Emitted()
    # a fast path gives the definition's numbers (rewardkit check proves it)
    fast = getattr(comp, "compute_fast", None) if written_for_its_compute(comp, "compute_fast") else None
    fn = out.bind(scope.unique(f"_{identifier(node.name)}_compute"), fast or comp.compute)
    raw = scope.raw(node.name)
    call = f"{fn}({inputs_literal(comp, scope)}, terminated, truncated)"
    if built_in(comp):  # tested to return one float per environment in the inputs' library and dtype
        out.lines.append(f"    {raw} = {call}")
    else:  # third-party components: library, shape, type and finiteness checked, the term named
        out.lines.append(f"    {raw} = _checked_output({call}, done.shape[0], {node.name!r}, {not allow_nonfinite}, _like)")
    return out, raw


def async_call(node: TermNode, scope: Scope) -> tuple[Emitted, str]:
    """An asynchronous term's coroutine call (started with the others), and its expression."""
    out = Emitted()
    fn = out.bind(scope.unique(f"_{identifier(node.name)}_compute_async"), node.component.compute_async)
    return out, f"{fn}({inputs_literal(node.component, scope)}, terminated, truncated)"
