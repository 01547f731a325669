"""The compiled plan: a reward config compiled into two Python functions.

:class:`CompiledPlan` writes ``reward_single_env`` (numbers in, no NumPy on the hot path; it is the
composer's ``__call__``) and ``reward_batched`` (a leading environment axis), defines them with
their source registered in ``linecache`` so tracebacks show generated lines, and :meth:`compile`
rebuilds them (the composer calls it when a weight changes). It reads inputs through the
composer's :class:`~rewardkit.inputs.InputReader` and state through its
:class:`~rewardkit.state_store.StateStore`; ``composer.generated_code()`` shows both functions.

Contract of the two functions:

- ``single_env(ctx, step=None, terminated=None, truncated=None) -> RewardOutput`` evaluates one
  environment and advances ``store.step`` when training; a context it cannot take (a batch,
  asynchronous terms, a missing key, not a mapping) goes, before any state moves, to
  ``fallback(ctx, step, terminated, truncated, exc)`` given at construction.
- ``batched(*slot_values, step, terminated, truncated, done, start) -> (total, flat values)``
  takes the reader's checked :class:`~rewardkit.inputs.BatchInputs` values in slot order and the
  episode flags; ``start`` launches the asynchronous terms (``rewardkit.async_terms``). It does not
  snapshot state or clear ended episodes: the caller does (see ``RewardComposer``).
"""

from __future__ import annotations

import io
import itertools
import keyword
import linecache
import math
import re
import tokenize
import weakref
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .applies import batch_mask, masked
from .base import BaseReward, check_scalar_output, checked_output
from .config import GroupNode, RewardSpec, TermNode, walk
from .inputs import ABSENT, MAX_STEP, InputReader, NotScalar, check_step, plain_floats, returned_float, scalar_flag
from .outputs import CompiledRewardOutput, TermNames
from .shaper import RewardShaper
from .state_store import StateStore

#: Names the generated functions use for themselves; terms and context keys never take them.
_RESERVED = frozenset({"ctx", "step", "terminated", "truncated", "done", "total", "out", "_self", "start", "_pending",
                       "_inputs_sum"})
_code_ids = itertools.count(1)



def _built_in(component: BaseReward) -> bool:
    """Components shipped with rewardkit are tested to return one finite float per environment."""
    return type(component).__module__.startswith("rewardkit.components.")


class CompiledPlan:
    """The two compiled evaluation functions of one config (see the module docstring)."""

    def __init__(self, spec: RewardSpec, reader: InputReader, store: StateStore, shaper: RewardShaper, *,
                 fallback: Callable[..., Any], source: str | None = None, allow_nonfinite: bool = False) -> None:
        self.spec, self.reader, self.store, self.shaper = spec, reader, store, shaper
        self.fallback = fallback
        self.source = source
        self.allow_nonfinite = allow_nonfinite
        self.order = list(walk(spec.nodes))
        self.leaves = [n for n in self.order if isinstance(n, TermNode)]
        #: terms with ``applies_to``: their masks follow the flat values, in this order
        self.applying = [n for n in self.leaves if n.applies_to]
        self.names = TermNames((node.name for node in self.order), applies=(n.name for n in self.applying))
        #: terms whose component is asynchronous (awaited together; every call is batched then)
        self.asynchronous = [n for n in self.leaves if n.component.asynchronous]
        #: terms whose component reports ``last_call_info()`` (copied into ``TermOutput.info``)
        self.info_nodes = [n for n in self.leaves if type(n.component).last_call_info is not BaseReward.last_call_info]
        self._code_id = next(_code_ids)
        #: variables of optional keys the function being generated reads as present
        self._present: frozenset[str] = frozenset()
        weakref.finalize(self, _forget_sources, self._filenames())
        self.compile()

    def compile(self) -> None:
        """(Re)build both functions (``single_env``, ``batched``) and register their source with ``linecache``.

        With optional context keys, ``single_env`` reads every key as present (the common case,
        one dict lookup each) and hands a context lacking one to ``single_env_absent``, which
        reads the optional keys with ``ctx.get``."""
        scalar_file, vector_file, absent_file = self._filenames()
        optional = any(slot.optional for slot in self.reader.slots) and not self.asynchronous
        self._absent_source = ""
        self.single_env_absent = None
        self.single_env_absent = self._compile_scalar(absent_file, locked_by_caller=True) if optional else None
        if optional:
            self._absent_source = self._scalar_source
        self.single_env = self._compile_scalar(scalar_file, assume_present=optional)
        self.batched = self._compile_vector(vector_file)

    def generated_code(self) -> str:
        """The Python source of the functions (single environment, the same when an optional key
        is absent, if any, then batched)."""
        parts = [self._scalar_source, self._absent_source, self._vector_source]
        return "\n\n".join(part for part in parts if part)

    def collect_info(self) -> dict[str, dict[str, float]] | None:
        """``last_call_info()`` of the terms that report one, ``None`` when none does."""
        if not self.info_nodes:
            return None
        return {n.name: dict(n.component.last_call_info()) for n in self.info_nodes}

    def _filenames(self) -> tuple[str, str, str]:
        label = self.source or "config"
        return (f"<rewardkit {label} #{self._code_id} single-env>", f"<rewardkit {label} #{self._code_id} batched>",
                f"<rewardkit {label} #{self._code_id} single-env, optional key absent>")

    def _new_namer(self) -> "_Namer":
        """Readable, unique names: ``<term>_raw``, ``<term>_weight``, ``ctx_<key>``, ``_<term>_<helper>``."""
        namer = _Namer(_RESERVED)
        self._vars: dict[str, str] = {}
        for node in self.order:
            base = _identifier(node.name)
            for suffix in ("", "_raw", "_norm", "_weight"):
                self._vars[node.name + suffix] = namer.unique(base + suffix)
            if isinstance(node, TermNode) and node.applies_to:
                self._vars[node.name + "_applies"] = namer.unique(base + "_applies")
        for key in self.reader.readers:
            self._vars["ctx:" + key] = namer.unique("ctx_" + _identifier(key))
            self._vars["ctx_sum:" + key] = namer.unique("ctx_" + _identifier(key) + "_sum")
        return namer

    # The single-environment path is a function generated from the config: inputs read and
    # checked once, constant weights and linear schedules inlined, components' inlined code in
    # place. It runs in phases so that a call that fails changes nothing: inputs and weights,
    # then stateless terms (which may raise), then stateful terms (snapshotted when a later one
    # could still raise), then normalizers, transforms and sums (which cannot raise on floats).
    def _compile_scalar(self, filename: str, assume_present: bool = False, locked_by_caller: bool = False) -> Any:
        namer = self._new_namer()
        reader = self.reader
        env: dict[str, Any] = {"_NotScalar": NotScalar, "_isfinite": math.isfinite, "_ndarray": np.ndarray,
                               "_F64": np.dtype(np.float64), "_nonfinite": reader.nonfinite,
                               "_number": reader.scalar_number, "_vector_input": reader.scalar_vector,
                               "_text": reader.scalar_text, "_check_step": check_step, "_plain_floats": plain_floats,
                               "_MAX_STEP": MAX_STEP, "_flag": scalar_flag,
                               "_returned": returned_float, "_bad_output": check_scalar_output, "_ABSENT": ABSENT,
                               "_RO": CompiledRewardOutput, "_names": self.names, "_store": self.store,
                               "_plan": self, "_fallback": self.fallback, "_absent": self.single_env_absent,
                               "_BATCH": NotScalar(),
                               "_take": self.store.lock.take, "_wait_lock": self.store.lock.wait,
                               "_put": self.store.lock.put, "_waiting": self.store.lock.waiting,
                               "_wake": self.store.lock.wake}
        namer.used.update(env)
        head = "def reward_single_env(ctx, step=None, terminated=None, truncated=None):"
        if self.asynchronous:  # asynchronous terms are awaited together: every call takes the batched path
            lines = [head, "    raise _NotScalar  # asynchronous terms: the batched path gathers them"]
        else:
            lines = [head] + self._scalar_body(namer, env, assume_present)
        # This function is the composer's __call__ (no wrapper frame on the hot path): batched
        # contexts, missing keys and non-mappings leave it for the composer's slower path.
        lines = [lines[0], "    try:"] + ["    " + line for line in lines[1:]]
        if assume_present:  # an absent key: the function that reads optional keys with ctx.get
            lines += ["    except KeyError:", "        return _absent(ctx, step, terminated, truncated)"]
        lines += ["    except (_NotScalar, KeyError, TypeError) as exc:",
                  "        return _fallback(ctx, step, terminated, truncated, exc)"]
        if not locked_by_caller:  # the store's lock, held for the whole call: calls from threads are each counted
            lines = [lines[0], "    try: _take()", "    except IndexError: _wait_lock()", "    try:",
                     *("    " + line for line in lines[1:]),
                     "    finally:", "        _put(True)", "        if _waiting: _wake()"]
        self._scalar_source = "\n".join(lines) + "\n"
        return _define(self._scalar_source, env, "reward_single_env", filename)

    def _scalar_body(self, namer: "_Namer", env: dict[str, Any], assume_present: bool) -> list[str]:
        """The statements of ``reward_single_env`` (numbers in, an output built without ``__init__``)."""
        lines = ["    # ---- inputs"]
        self._emit_scalar_inputs(lines, assume_present)
        self._present = self._present_optional_vars() if assume_present else frozenset()
        weight_of = self._emit_weights(lines, env, namer)
        stateless = [n for n in self.leaves if not n.component.stateful]
        if stateless:
            lines.append("    # ---- stateless terms")
        raw_of: dict[str, str] = {}
        for node in stateless:
            raw_of[node.name] = self._emit_scalar_leaf(node, lines, "    ", env, namer)
        # state changes from here on: snapshot what a later failure would leave half-updated
        holders: dict[int, str] = {}  # id(component or normalizer) -> its global name
        for node in self.order:
            ident = _identifier(node.name)
            if isinstance(node, TermNode) and node.component.stateful:
                holders[id(node.component)] = namer.unique(f"_{ident}_component")
                env[holders[id(node.component)]] = node.component
            if node.normalizer is not None and node.normalizer in self.store.guarded:
                holders[id(node.normalizer)] = namer.unique(f"_{ident}_normalizer")
                env[holders[id(node.normalizer)]] = node.normalizer
        saved = []
        for holder in self.store.guarded:
            obj = holders[id(holder)]
            saved.append((obj, namer.unique(obj.lstrip("_") + "_saved")))
        if saved:
            lines.append("    # ---- state is put back as it was if anything below raises")
            lines.extend(f"    {snap} = {obj}.snapshot()" for obj, snap in saved)
        updating: list[str] = []
        if self.store.stateful_nodes:
            updating.append("    # ---- stateful terms")
            for node in self.store.stateful_nodes:
                raw_of[node.name] = self._emit_scalar_leaf(node, updating, "    ", env, namer)
        updating.append("    # ---- normalizers, transforms, weighted sums")
        flat = self._emit_combine(updating, env, namer, raw_of, weight_of, "scalar")
        if saved:
            lines.append("    try:")
            lines.extend("    " + line for line in updating)
            lines.append("    except BaseException:")
            lines.extend(f"        {obj}.restore({snap})" for obj, snap in saved)
            lines.append("        raise")
        else:
            lines.extend(updating)
        for node in self.store.stateful_nodes:
            lines.append(f"    if done: {holders[id(node.component)]}.reset(None)")
        # Build the output without a Python __init__ and count the step here: this is the hot path.
        lines += ["    out = _RO()",
                  "    out.total = total",
                  f"    out._values = ({', '.join(flat)},)",
                  "    out._names = _names",
                  *(["    out._info = _plan.collect_info()"] if self.info_nodes else []),
                  "    if _store.training: _store.step = step + 1",
                  "    return out"]
        # the hand-overs to the batched path pass the flags on as given: they do not count as reading them
        return self._scalar_header(_names_in("\n".join(line for line in lines if "_BATCH)" not in line))) + lines

    @staticmethod
    def _scalar_header(used: set[str]) -> list[str]:
        """Step and episode flags checked; the flags made booleans (and ``done`` computed) only
        when the body reads them, else only validated."""
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

    def _present_optional_vars(self) -> frozenset[str]:
        """Variables of optional keys that the function reads as present (never ``None`` there)."""
        return frozenset(self._vars["ctx:" + slot.key] for slot in self.reader.slots if slot.optional)

    def _emit_scalar_inputs(self, lines: list[str], assume_present: bool) -> None:
        """Read each context key once, as a float (or a list of floats), and check it is finite
        (``assume_present``: optional keys too are read with ``ctx[key]``)."""
        v = self._vars
        numbers: list[tuple[str, str]] = []  # (key, variable) of the numbers read as present
        for key, nd, optional, text, _ in self.reader.slots:
            optional = optional and not assume_present
            x, total = v["ctx:" + key], v["ctx_sum:" + key]
            if text:  # one str; a list or array of them is a batch (_text raises _NotScalar)
                if optional:
                    lines += [f"    {x} = ctx.get({key!r}, _ABSENT)",
                              f"    if {x} is _ABSENT: {x} = None",
                              f"    elif {x}.__class__ is not str: {x} = _text({x}, {key!r})"]
                else:
                    lines += [f"    {x} = ctx[{key!r}]",
                              f"    if {x}.__class__ is not str: {x} = _text({x}, {key!r})"]
                continue
            nonfinite = "raise _NotScalar" if self.allow_nonfinite else f"_nonfinite({key!r}, {x})"
            # a NumPy array with an environment axis: the batched path, before anything changed
            # (a direct call: no exception raised and caught on the way)
            batch = "return _fallback(ctx, step, terminated, truncated, _BATCH)"
            # ``v - v`` is 0.0 (false) for a finite float and NaN (true) for NaN and +-inf: the
            # finiteness check without a function call
            if nd == 0 and optional:
                lines += [f"    {x} = ctx.get({key!r}, _ABSENT)",
                          f"    if {x}.__class__ is float:",
                          f"        if {x} - {x}: {nonfinite}",
                          f"    elif {x} is _ABSENT: {x} = None",
                          "    else:",
                          f"        if {x}.__class__ is _ndarray and {x}.ndim: {batch}",
                          f"        {x} = _number({x}, {key!r})",
                          f"        if {x} - {x}: {nonfinite}"]
                continue
            if nd == 0:
                lines += [f"    {x} = ctx[{key!r}]",
                          f"    if {x}.__class__ is not float:",
                          f"        if {x}.__class__ is _ndarray and {x}.ndim: {batch}",
                          f"        {x} = _number({x}, {key!r})"]
                numbers.append((key, x))  # checked below, all at once
                continue
            if optional:
                lines.append(f"    {x} = ctx.get({key!r}, _ABSENT)")
                lines.append(f"    if {x} is _ABSENT: {x} = None")
            else:
                lines.append(f"    {x} = ctx[{key!r}]")
            guard = f"{x} is not None and " if optional else ""
            # vector inputs reach components as lists of floats (fast to read from Python)
            fast = f"{x}.__class__ is _ndarray and {x}.dtype is _F64 and {x}.ndim == 1"
            # a flat list of Python floats/ints (the common case) skips numpy.asarray and back
            plain = f"{x}.__class__ is list and ({total} := _plain_floats({x})) is not None"
            if optional:
                if nd == 1:
                    lines.append(f"    elif {plain}: {x} = {total}")
                lines.append(f"    elif {fast}: {x} = {x}.tolist()")
            else:
                lead = "if"
                if nd == 1:
                    lines.append(f"    if {plain}: {x} = {total}")
                    lead = "elif"
                lines.append(f"    {lead} {fast}: {x} = {x}.tolist()")
            lines.append(f"    elif {x}.__class__ is _ndarray and {x}.ndim > {nd}: {batch}")
            lines.append(f"    else: {x} = _vector_input({x}, {key!r}, {nd})")
            if optional:
                lines.append(f"    {total} = None if {x} is None else sum({x})")
            else:
                lines.append(f"    {total} = sum({x})")  # offered to inlined blocks as <var>_sum
            # the sum of finite values is finite unless it overflows: then check each value
            lines.append(f"    if {guard}{total} - {total} and not all(map(_isfinite, {x})): {nonfinite}")
        if not numbers:
            return
        nonfinite = "raise _NotScalar" if self.allow_nonfinite else "_nonfinite({key!r}, {x})"
        if len(numbers) == 1:
            key, x = numbers[0]
            lines.append(f"    if {x} - {x}: {nonfinite.format(key=key, x=x)}")
            return
        # Several numbers: one test on their sum, which is finite when they all are (unless it
        # overflows); only then is each one tested, so the error names the first bad key.
        lines.append(f"    _inputs_sum = {' + '.join(x for _, x in numbers)}")
        lines.append("    if _inputs_sum - _inputs_sum:")
        lines += [f"        if {x} - {x}: {nonfinite.format(key=key, x=x)}" for key, x in numbers]

    def _emit_scalar_leaf(self, node: TermNode, lines: list[str], indent: str, env: dict[str, Any],
                          namer: "_Namer") -> str:
        """One component's raw value on floats; returns the variable (or expression) holding it."""
        comp, v = node.component, self._vars
        ident = _identifier(node.name)
        args = [v["ctx:" + key] for key in comp.input_keys.values()]
        raw = v[node.name + "_raw"]
        tag = "_" + ident
        own: dict[str, Any] = {}  # the component's helpers, renamed into a namespace of its own
        inline = comp.scalar_source(args, own, tag)
        block = comp.scalar_block(args, own, tag) if inline is None else None
        present = [arg for arg in args if arg in self._present]
        if present and inline is not None:
            inline = _known_present(inline, present)
        elif present and block is not None:
            body = _known_present("\n".join(block[0]), present)
            block = (body.split("\n") if body else [], _known_present(block[1], present))
        snippet = inline if inline is not None else "\n".join(block[0] + [block[1]]) if block is not None else ""
        namer.used.update(_names_in(snippet))  # the component's temporaries: helpers never take them
        rename = {name: namer.unique(f"_{ident}_{name.lstrip('_')}") for name in own}
        env.update({rename[name]: value for name, value in own.items()})
        if inline is not None:
            lines.append(f"{indent}{raw} = {_rename_names(inline, rename)}")
        elif block is not None:
            statements, result = block
            body = _rename_names("\n".join(statements), rename) if statements else ""
            lines.extend(f"{indent}{line}" for line in body.split("\n") if line)
            lines.append(f"{indent}{raw} = {_rename_names(result, rename)}")
        else:
            fn = namer.unique(f"_{ident}_fn")
            env[fn] = comp.scalar_fn()
            lines.append(f"{indent}{raw} = {fn}({', '.join(args + ['terminated', 'truncated'])})")
            lines.append(f"{indent}if {raw}.__class__ is not float: {raw} = _returned({raw}, {node.name!r})")
            if not self.allow_nonfinite:  # components are trusted to keep finite inputs finite only when built in
                lines.append(f"{indent}if not _isfinite({raw}): _bad_output({raw}, {node.name!r})")
        return raw

    def _emit_weights(self, lines: list[str], env: dict[str, Any], namer: "_Namer") -> dict[str, str]:
        """Every node's weight at ``step``: a literal when constant, identical schedules evaluated once."""
        weight_of: dict[str, str] = {}
        by_expr: dict[str, str] = {}
        # (variable, ramp's end step, expression on the ramp, full expression, value after the ramp)
        ramps: list[tuple[str, int, str, str, str]] = []
        header = len(lines)
        for node in self.order:
            sched = self.shaper.schedule(node.name)
            expr = sched.source("step")
            if expr is None or not _is_finite_literal(expr) and not expr.startswith(("(", "min(", "max(")):
                fn = namer.unique(f"_{_identifier(node.name)}_schedule")
                env[fn] = sched
                expr = f"{fn}(step)"
            if _is_finite_literal(expr):
                weight_of[node.name] = expr
            elif expr in by_expr:
                weight_of[node.name] = by_expr[expr]
            else:
                var = by_expr[expr] = weight_of[node.name] = self._vars[node.name + "_weight"]
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
        if len(lines) > header:
            lines.insert(header, "    # ---- weights (schedules of the step)")
        return weight_of

    def _emit_combine(self, lines: list[str], env: dict[str, Any], namer: "_Namer", raw_of: dict[str, str],
                      weight_of: dict[str, str], normalizer_call: str) -> list[str]:
        """Normalizers, transforms, weights and sums, children before their group; assigns ``total``
        and returns the flat per-term output variables in pre-order (raw, normalized, weight,
        contribution). ``normalizer_call``: ``scalar`` (floats) or ``__call__`` (arrays)."""
        v = self._vars
        outputs: dict[str, list[str]] = {}

        def combine(node: TermNode | GroupNode) -> str:
            ident = _identifier(node.name)
            if isinstance(node, GroupNode):
                parts = [combine(child) for child in node.children]
                raw = v[node.name + "_raw"]
                lines.append(f"    {raw} = {' + '.join(parts)}")
            else:
                raw = raw_of[node.name]
            value = raw
            if node.normalizer is not None:
                fn = namer.unique(f"_{ident}_normalize")
                env[fn] = getattr(node.normalizer, normalizer_call)
                lines.append(f"    {v[node.name + '_norm']} = {fn}({value}, done, _store.training)")
                value = v[node.name + "_norm"]
            for k, transform in enumerate(node.transforms):
                fn = namer.unique(f"_{ident}_{transform.name}" + (f"{k + 1}" if len(node.transforms) > 1 else ""))
                env[fn] = transform
                lines.append(f"    {v[node.name + '_norm']} = {fn}({value})")
                value = v[node.name + "_norm"]
            if isinstance(node, TermNode) and node.applies_to:
                self._emit_applies(node, lines, env, namer, raw, value, normalizer_call == "scalar")
            contribution = v[node.name]
            lines.append(f"    {contribution} = {weight_of[node.name]} * {value}")
            outputs[node.name] = [raw, value, weight_of[node.name], contribution]
            return contribution

        top = [combine(node) for node in self.spec.nodes]
        lines.append(f"    total = {' + '.join(top)}")
        for transform in self.spec.total_transforms:
            fn = namer.unique(f"_total_{transform.name}")
            env[fn] = transform
            lines.append(f"    total = {fn}(total)")
        flat = [name for node in self.order for name in outputs[node.name]]
        return flat + [v[node.name + "_applies"] for node in self.applying]  # the masks follow (TermNames.applies)

    def _emit_applies(self, node: TermNode, lines: list[str], env: dict[str, Any], namer: "_Namer", raw: str,
                      value: str, scalar: bool) -> None:
        """``applies_to``: where the term's columns do not hold its values, its raw and normalized
        values (so its contribution) are 0; the mask goes to the output (rewardkit.applies)."""
        v, ident = self._vars, _identifier(node.name)
        applies = v[node.name + "_applies"]
        conditions = sorted(node.applies_to.items())
        allowed = []
        for key, values in conditions:
            allowed.append(namer.unique(f"_{ident}_allowed_{_identifier(key)}"))
            env[allowed[-1]] = values
        if scalar:
            test = " and ".join(f"{v['ctx:' + key]} in {name}" for (key, _), name in zip(conditions, allowed, strict=True))
            lines.append(f"    {applies} = {test}")
            lines.append(f"    if not {applies}: {raw} = {value} = 0.0" if value != raw
                         else f"    if not {applies}: {raw} = 0.0")
            return
        env.setdefault("_batch_mask", batch_mask)
        env.setdefault("_masked", masked)
        columns = ", ".join(v["ctx:" + key] for key, _ in conditions)
        lines.append(f"    {applies} = _batch_mask([{columns}], [{', '.join(allowed)}])")
        lines.append(f"    {raw} = _masked({raw}, {applies})")
        if value != raw:
            lines.append(f"    {value} = _masked({value}, {applies})")

    # The batched path is compiled the same way: _call_vector checks and gathers the inputs (one
    # argument per context key), this function calls each component's compute on them and does
    # the weighting and sums without walking the tree.
    def _compile_vector(self, filename: str) -> Any:
        namer = self._new_namer()
        v = self._vars
        env: dict[str, Any] = {"_store": self.store, "_checked_output": checked_output, "_like": None}
        namer.used.update(env)
        slots = self.reader.slots
        params = [v["ctx:" + slot.key] for slot in slots]
        lines = [f"def reward_batched({', '.join(params + ['step', 'terminated', 'truncated', 'done', 'start'])}):"]
        if not all(_built_in(n.component) for n in self.leaves):
            # third-party results are checked against the numeric inputs' library, device and dtype
            candidates = ", ".join([p for p, slot in zip(params, slots, strict=True) if not slot.text] + ["done"])
            lines.append(f"    _like = next(_a for _a in ({candidates},) if _a is not None)")
        weight_of = self._emit_weights(lines, env, namer)
        raw_of: dict[str, str] = {}
        asynchronous = self.asynchronous
        stateless = [n for n in self.leaves if not n.component.stateful and not n.component.asynchronous]
        if asynchronous:
            lines.append("    # ---- asynchronous terms: started together now, awaited after the cheap terms")
            calls = []
            for node in asynchronous:
                fn = namer.unique(f"_{_identifier(node.name)}_compute_async")
                env[fn] = node.component.compute_async
                calls.append(f"{fn}({self._inputs_literal(node.component)}, terminated, truncated)")
            lines.append(f"    _pending = start(({', '.join(calls)},))")
        cheap: list[str] = []
        if stateless:
            cheap.append("    # ---- stateless terms")
        for node in stateless:
            raw_of[node.name] = self._emit_vector_leaf(node, cheap, env, namer)
        if asynchronous and stateless:  # a cheap term that raises cancels the terms in flight
            lines += ["    try:", *("    " + line for line in cheap), "    except BaseException:",
                      "        _pending.cancel()", "        raise"]
        else:
            lines += cheap
        if asynchronous:
            raws = [v[node.name + "_raw"] for node in asynchronous]
            lines.append(f"    {', '.join(raws)}, = _pending.result()")
            for node, raw in zip(asynchronous, raws, strict=True):
                raw_of[node.name] = raw
                finite = not self.allow_nonfinite
                lines.append(f"    {raw} = _checked_output({raw}, done.shape[0], {node.name!r}, {finite}, _like)")
        if self.store.stateful_nodes:
            lines.append("    # ---- stateful terms (the caller puts state back if a later step raises)")
        for node in self.store.stateful_nodes:
            raw_of[node.name] = self._emit_vector_leaf(node, lines, env, namer)
        lines.append("    # ---- normalizers, transforms, weighted sums")
        flat = self._emit_combine(lines, env, namer, raw_of, weight_of, "__call__")
        lines.append(f"    return total, [{', '.join(flat)}]")
        self._vector_source = "\n".join(lines) + "\n"
        return _define(self._vector_source, env, "reward_batched", filename)

    def _inputs_literal(self, comp: BaseReward) -> str:
        """The dict of a component's inputs (local name -> variable), absent optional ones left out."""
        v = self._vars
        pairs = [(local, v["ctx:" + key]) for local, key in comp.input_keys.items()]
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

    def _emit_vector_leaf(self, node: TermNode, lines: list[str], env: dict[str, Any], namer: "_Namer") -> str:
        """One component's batched ``compute`` call; returns the variable holding its raw value."""
        comp = node.component
        fn = namer.unique(f"_{_identifier(node.name)}_compute")
        env[fn] = getattr(comp, "compute_fast", None) or comp.compute  # a fast path gives the definition's numbers
        raw = self._vars[node.name + "_raw"]
        call = f"{fn}({self._inputs_literal(comp)}, terminated, truncated)"
        if _built_in(comp):  # tested to return one float per environment in the inputs' library and dtype
            lines.append(f"    {raw} = {call}")
        else:  # third-party components: library, shape, type and finiteness checked, the term named
            finite = not self.allow_nonfinite
            lines.append(f"    {raw} = _checked_output({call}, done.shape[0], {node.name!r}, {finite}, _like)")
        return raw


class _Namer:
    """Hands out identifiers, each once (a suffix ``_2``, ``_3``... settles collisions)."""

    def __init__(self, reserved: Iterable[str]) -> None:
        self.used: set[str] = set(reserved)

    def unique(self, base: str) -> str:
        name, k = base, 2
        while name in self.used or keyword.iskeyword(name):
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


def _identifier(text: str) -> str:
    """A Python identifier that reads like ``text``: ``group/term`` -> ``group__term``."""
    ident = re.sub(r"\W", "_", text.replace("/", "__"), flags=re.ASCII)
    return ident if ident and not ident[0].isdigit() else "t" + ident


def _rename_names(code: str, mapping: Mapping[str, str]) -> str:
    """``code`` with every name token in ``mapping`` renamed (attributes and strings untouched)."""
    if not mapping:
        return code
    rows = code.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in mapping and not (
                previous is not None and previous.type == tokenize.OP and previous.string == "."):
            edits.append((tok.start[0] - 1, tok.start[1], tok.end[1], mapping[tok.string]))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok
    for row, start, end, new in reversed(edits):
        rows[row] = rows[row][:start] + new + rows[row][end:]
    return "\n".join(rows)


def _known_present(code: str, names: Iterable[str]) -> str:
    """``code`` with ``<name> is None`` read as ``False`` (and ``is not None`` as ``True``) for
    variables known to hold a value, so the compiler drops the test (chained comparisons left alone)."""
    names = set(names)
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, SyntaxError):
        return code  # left as written: the compiler reports what is wrong with it
    chaining = {"<", ">", "==", ">=", "<=", "!=", "is", "in", "not", "."}
    rows = code.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    for i, tok in enumerate(toks):
        if tok.type != tokenize.NAME or tok.string not in names or (i and toks[i - 1].string in chaining):
            continue
        following = [t.string for t in toks[i + 1:i + 4]]
        if following[:2] == ["is", "None"]:
            last, value = i + 2, "False"
        elif following == ["is", "not", "None"]:
            last, value = i + 3, "True"
        else:
            continue
        if last + 1 < len(toks) and toks[last + 1].string in chaining or toks[last].end[0] != tok.start[0]:
            continue  # a chained comparison, or a test over several lines: left as written
        edits.append((tok.start[0] - 1, tok.start[1], toks[last].end[1], value))
    for row, begin, stop, text in reversed(edits):
        rows[row] = rows[row][:begin] + text + rows[row][stop:]
    return "\n".join(rows)


def _names_in(code: str) -> set[str]:
    """Every name token in a snippet of generated code."""
    if not code:
        return set()
    return {tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type == tokenize.NAME}


def _define(source: str, env: dict[str, Any], name: str, filename: str) -> Any:
    """Compile generated ``source`` (our own code, built from a validated config) and return ``name``.

    The source is registered with ``linecache`` under ``filename`` so tracebacks show its lines.
    """
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), env, namespace)  # noqa: S102
    return namespace[name]


def _forget_sources(filenames: tuple[str, ...]) -> None:
    for filename in filenames:
        linecache.cache.pop(filename, None)


def _is_finite_literal(expr: str) -> bool:
    """Whether a generated weight expression is a plain finite number literal (a constant weight)."""
    try:
        return math.isfinite(float(expr))
    except ValueError:
        return False
