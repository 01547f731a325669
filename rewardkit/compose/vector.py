"""The batched function: the reader's checked inputs in slot order (one argument per context key)
and the episode flags in; each component's ``compute`` called on them, then the weighting and sums,
without walking the tree. Asynchronous terms start first and are awaited after the cheap terms."""

from __future__ import annotations

from typing import Any

from ..base import checked_output
from .combine import combine
from .layout import Layout, built_in
from .source import Emitted
from .terms import async_call, vector_term
from .weights import weights


def batched_function(layout: Layout) -> tuple[str, dict[str, Any]]:
    """Source and globals of ``reward_batched(*slot values, step, terminated, truncated, done, start)``;
    it returns ``(total, flat values)``. The caller snapshots state and clears ended episodes."""
    env: dict[str, Any] = {"_store": layout.store, "_checked_output": checked_output, "_like": None}
    scope = layout.scope(env)
    params = [scope.ctx(slot.key) for slot in layout.slots]
    out = Emitted()
    if not all(built_in(n.component) for n in layout.leaves):
        # third-party results are checked against the numeric inputs' library, device and dtype
        candidates = ", ".join([p for p, slot in zip(params, layout.slots, strict=True) if not slot.text] + ["done"])
        out.lines.append(f"    _like = next(_a for _a in ({candidates},) if _a is not None)")
    emitted, weight_of = weights(layout.order, layout.shaper, scope)
    out.add(emitted)
    raw_of: dict[str, str] = {}
    finite = not layout.allow_nonfinite
    if layout.asynchronous:
        out.lines.append("    # ---- asynchronous terms: started together now, awaited after the cheap terms")
        calls = []
        for node in layout.asynchronous:
            emitted, call = async_call(node, scope)
            out.add(emitted)
            calls.append(call)
        out.lines.append(f"    _pending = start(({', '.join(calls)},))")
    stateless = layout.stateless(synchronous_only=True)
    cheap = Emitted(["    # ---- stateless terms"] if stateless else [])
    for node in stateless:
        emitted, raw_of[node.name] = vector_term(node, scope, allow_nonfinite=layout.allow_nonfinite)
        cheap.add(emitted)
    if layout.asynchronous and stateless:  # a cheap term that raises cancels the terms in flight
        out.lines.append("    try:")
        out.add(cheap, indent="    ")
        out.lines += ["    except BaseException:", "        _pending.cancel()", "        raise"]
    else:
        out.add(cheap)
    if layout.asynchronous:
        raws = [scope.raw(node.name) for node in layout.asynchronous]
        out.lines.append(f"    {', '.join(raws)}, = _pending.result()")
        for node, raw in zip(layout.asynchronous, raws, strict=True):
            raw_of[node.name] = raw
            out.lines.append(f"    {raw} = _checked_output({raw}, done.shape[0], {node.name!r}, {finite}, _like)")
    if layout.store.stateful_nodes:
        out.lines.append("    # ---- stateful terms (the caller puts state back if a later step raises)")
    for node in layout.store.stateful_nodes:
        emitted, raw_of[node.name] = vector_term(node, scope, allow_nonfinite=layout.allow_nonfinite)
        out.add(emitted)
    out.lines.append("    # ---- normalizers, transforms, weighted sums")
    emitted, flat = combine(layout.spec, layout.order, layout.applying, scope, raw_of, weight_of, scalar=False)
    out.add(emitted)
    out.lines.append(f"    return total, [{', '.join(flat)}]")
    env.update(out.globals)
    head = f"def reward_batched({', '.join(params + ['step', 'terminated', 'truncated', 'done', 'start'])}):"
    return "\n".join([head, *out.lines]) + "\n", env


