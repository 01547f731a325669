"""The single-environment function (numbers in, no NumPy on the hot path; it is the composer's
``__call__``). Its body runs in phases so that a call that fails changes nothing: inputs and weights,
then stateless terms (which may raise), then stateful terms (snapshotted when a later one could
still raise), then normalizers, transforms and sums (which cannot raise on floats)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..base import check_scalar_output
from ..config import TermNode
from ..inputs import ABSENT, MAX_STEP, NotScalar, check_step, plain_floats, returned_float, scalar_flag
from ..outputs import CompiledRewardOutput
from .combine import combine
from .inputs import scalar_inputs
from .layout import Layout
from .names import Scope, identifier
from .source import Emitted, indented
from .terms import scalar_term
from .tokens import names_in
from .weights import weights

HEAD = "def reward_single_env(ctx, step=None, terminated=None, truncated=None):"


def fixed_globals(layout: Layout, absent: Callable[..., Any] | None, collect_info: Callable[[], Any]) -> dict[str, Any]:
    """What every single-environment function calls: the reader's checks, the store and its lock,
    the output type, the hand-overs (``_fallback``; ``_absent``: the function for a missing key)."""
    reader, store = layout.reader, layout.store
    return {"_NotScalar": NotScalar, "_isfinite": math.isfinite, "_ndarray": np.ndarray,
            "_F64": np.dtype(np.float64), "_nonfinite": reader.nonfinite,
            "_number": reader.scalar_number, "_vector_input": reader.scalar_vector,
            "_text": reader.scalar_text, "_check_step": check_step, "_plain_floats": plain_floats,
            "_MAX_STEP": MAX_STEP, "_flag": scalar_flag,
            "_returned": returned_float, "_bad_output": check_scalar_output, "_ABSENT": ABSENT,
            "_RO": CompiledRewardOutput, "_names": layout.names, "_store": store,
            "_collect_info": collect_info, "_fallback": layout.fallback, "_absent": absent,
            "_BATCH": NotScalar(),
            "_take": store.lock.take, "_wait_lock": store.lock.wait,
            "_put": store.lock.put, "_waiting": store.lock.waiting,
            "_wake": store.lock.wake}


def single_env_function(layout: Layout, *, assume_present: bool, locked: bool,
                        absent: Callable[..., Any] | None, collect_info: Callable[[], Any]) -> tuple[str, dict[str, Any]]:
    """Source and globals of ``reward_single_env``.

    ``assume_present``: optional keys are read with ``ctx[key]`` and a context lacking one goes to
    ``absent`` (the same function built with ``assume_present=False``). ``locked``: the function
    holds the store's lock for the whole call (``False`` for one called under the lock already)."""
    env = fixed_globals(layout, absent, collect_info)
    scope = layout.scope(env)
    if layout.asynchronous:  # asynchronous terms are awaited together: every call takes the batched path
        lines = [HEAD, "    raise _NotScalar  # asynchronous terms: the batched path gathers them"]
    else:
        body = _body(layout, scope, assume_present)
        env.update(body.globals)
        lines = [HEAD] + body.lines
    # This function is the composer's __call__ (no wrapper frame on the hot path): batched
    # contexts, missing keys and non-mappings leave it for the composer's slower path.
    lines = [lines[0], "    try:"] + indented(lines[1:])
    if assume_present:  # an absent key: the function that reads optional keys with ctx.get
        lines += ["    except KeyError:", "        return _absent(ctx, step, terminated, truncated)"]
    lines += ["    except (_NotScalar, KeyError, TypeError) as exc:",
              "        return _fallback(ctx, step, terminated, truncated, exc)"]
    if locked:  # the store's lock, held for the whole call: calls from threads are each counted
        lines = [lines[0], "    try: _take()", "    except IndexError: _wait_lock()", "    try:",
                 *indented(lines[1:]), "    finally:", "        _put(True)", "        if _waiting: _wake()"]
    return "\n".join(lines) + "\n", env


def _body(layout: Layout, scope: Scope, assume_present: bool) -> Emitted:
    """The statements of ``reward_single_env`` (numbers in, an output built without ``__init__``)."""
    out = Emitted(["    # ---- inputs"])
    out.add(scalar_inputs(layout.slots, scope, assume_present=assume_present, allow_nonfinite=layout.allow_nonfinite))
    present = frozenset(scope.ctx(slot.key) for slot in layout.slots if slot.optional) if assume_present else frozenset()
    emitted, weight_of = weights(layout.order, layout.shaper, scope)
    out.add(emitted)
    stateless = layout.stateless()
    if stateless:
        out.lines.append("    # ---- stateless terms")
    raw_of: dict[str, str] = {}
    for node in stateless:
        emitted, raw_of[node.name] = scalar_term(node, scope, present=present, allow_nonfinite=layout.allow_nonfinite)
        out.add(emitted)
    holders, saved = _state_holders(layout, scope, out)
    updating = Emitted()
    if layout.store.stateful_nodes:
        updating.lines.append("    # ---- stateful terms")
        for node in layout.store.stateful_nodes:
            emitted, raw_of[node.name] = scalar_term(node, scope, present=present,
                                                     allow_nonfinite=layout.allow_nonfinite)
            updating.add(emitted)
    updating.lines.append("    # ---- normalizers, transforms, weighted sums")
    emitted, flat = combine(layout.spec, layout.order, layout.applying, scope, raw_of, weight_of, scalar=True)
    updating.add(emitted)
    if saved:  # state changed from here on is put back as it was if anything raises
        out.lines.append("    # ---- state is put back as it was if anything below raises")
        out.lines.extend(f"    {snap} = {obj}.snapshot()" for obj, snap in saved)
        out.lines.append("    try:")
        out.add(updating, indent="    ")
        out.lines.append("    except BaseException:")
        out.lines.extend(f"        {obj}.restore({snap})" for obj, snap in saved)
        out.lines.append("        raise")
    else:
        out.add(updating)
    for node in layout.store.stateful_nodes:
        out.lines.append(f"    if done: {holders[id(node.component)]}.reset(None)")
    # Build the output without a Python __init__ and count the step here: this is the hot path.
    out.lines += ["    out = _RO()",
                  "    out.total = total",
                  f"    out._values = ({', '.join(flat)},)",
                  "    out._names = _names",
                  *(["    out._info = _collect_info()"] if layout.info_nodes else []),
                  "    if _store.training: _store.step = step + 1",
                  "    return out"]
    # the hand-overs to the batched path pass the flags on as given: they do not count as reading them
    out.lines[:0] = _header(names_in("\n".join(line for line in out.lines if "_BATCH)" not in line)))
    return out


def _state_holders(layout: Layout, scope: Scope, out: Emitted) -> tuple[dict[int, str], list[tuple[str, str]]]:
    """Globals for the stateful components and guarded normalizers (by ``id``), and the snapshot
    variables of what a later failure would leave half-updated: (holder, snapshot) pairs."""
    holders: dict[int, str] = {}
    for node in layout.order:
        ident = identifier(node.name)
        if isinstance(node, TermNode) and node.component.stateful:
            holders[id(node.component)] = out.bind(scope.unique(f"_{ident}_component"), node.component)
        if node.normalizer is not None and node.normalizer in layout.store.guarded:
            holders[id(node.normalizer)] = out.bind(scope.unique(f"_{ident}_normalizer"), node.normalizer)
    saved = []
    for holder in layout.store.guarded:
        obj = holders[id(holder)]
        saved.append((obj, scope.unique(obj.lstrip("_") + "_saved")))
    return holders, saved


def _header(used: set[str]) -> list[str]:
    """Step and episode flags checked; the flags made booleans (and ``done`` computed) only when the
    body reads them, else only validated."""
    lines = ["    if step is None: step = _store.step",
             "    elif step.__class__ is not int or step < 0 or step > _MAX_STEP: step = _check_step(step)"]
    for flag in ("terminated", "truncated"):
        if flag in used or "done" in used:
            lines += [f"    if {flag} is None: {flag} = False",
                      f"    elif {flag}.__class__ is not bool: {flag} = _flag({flag}, {flag!r})"]
        else:  # unused: a bad value is still refused
            lines.append(f"    if {flag} is not None and {flag}.__class__ is not bool: _flag({flag}, {flag!r})")
    if "done" in used:
        lines.append("    done = terminated or truncated")
    return lines
