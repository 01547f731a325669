"""``RewardComposer``: evaluates a reward config on a context, with a per-term breakdown.

For each term: ``raw = component(ctx)``, ``normalized = transforms(normalizer(raw))``,
``contribution = weight(step) * normalized``. A group's ``raw`` is the sum of its children's
contributions, then it is normalized, transformed and weighted the same way. The total is
``total_transforms(sum of top-level contributions)``; without total transforms the top-level
contributions add up to the total exactly.

A context whose values are numbers is evaluated by a Python function compiled once from the
config (no NumPy on the hot path); a context with a leading environment axis ``(n_envs,)`` is
evaluated with NumPy and every output gets that axis. Both give the same numbers, in float64
whatever the input dtype. ``composer.generated_code()`` (``rewardkit explain CONFIG --show-code``)
shows both functions: variables are named after the terms, each component's helpers live under
its own prefix, and tracebacks through them show the generated lines.

A call that raises changes nothing (step, normalizer statistics, component state), and so does
a ``load_state_dict`` or ``reset`` that raises.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import keyword
import linecache
import math
import re
import tokenize
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from .config import GroupNode, RewardSpec, TermNode, load_yaml, parse_config, spec_to_dict
from .errors import ConfigError, InvalidInputError, MissingInputError, NonFiniteInputError
from .params import describe
from .shaper import RewardShaper

Array = np.ndarray
_F64 = np.dtype(np.float64)


class TermOutput:
    """One term's ``raw``, ``normalized``, ``weight`` and ``contribution`` (floats or arrays)."""

    __slots__ = ("raw", "normalized", "weight", "contribution")

    def __init__(self, raw: Any, normalized: Any, weight: Any, contribution: Any) -> None:
        self.raw, self.normalized, self.weight, self.contribution = raw, normalized, weight, contribution

    def __repr__(self) -> str:
        return (f"TermOutput(raw={self.raw!r}, normalized={self.normalized!r}, "
                f"weight={self.weight!r}, contribution={self.contribution!r})")


class RewardOutput:
    """The total reward and, built on first access, the per-term breakdown.

    In batched calls every breakdown value has the environment axis; weights (one number per
    step) are broadcast to it when the breakdown is read, not on the hot path.
    """

    __slots__ = ("total", "_values", "_names", "_terms", "_n_envs")

    def __init__(self, total: Any, values: tuple | list, names: tuple[str, ...], n_envs: int | None = None) -> None:
        self.total = total
        self._values = values
        self._names = names
        self._terms: dict[str, TermOutput] | None = None
        self._n_envs = n_envs

    # The compiled scalar path creates outputs without __init__ and leaves _terms and _n_envs
    # unset (a scalar call); both are read through getattr with a default.
    def _weight(self, i: int) -> Any:
        w = self._values[4 * i + 2]
        n_envs = getattr(self, "_n_envs", None)
        if n_envs is not None and not isinstance(w, np.ndarray):
            return np.full(n_envs, w)
        return w

    @property
    def terms(self) -> dict[str, TermOutput]:
        """Term name (``group/child`` for nested terms) -> :class:`TermOutput`."""
        terms = getattr(self, "_terms", None)
        if terms is None:
            v = self._values
            terms = self._terms = {name: TermOutput(v[4 * i], v[4 * i + 1], self._weight(i), v[4 * i + 3])
                                   for i, name in enumerate(self._names)}
        return terms

    def as_dict(self) -> dict[str, Any]:
        """Flat mapping ``{"<term>/raw": ..., "<term>/contribution": ..., "total": ...}`` for logs."""
        out: dict[str, Any] = {}
        v = self._values
        for i, name in enumerate(self._names):
            out[f"{name}/raw"] = v[4 * i]
            out[f"{name}/normalized"] = v[4 * i + 1]
            out[f"{name}/weight"] = self._weight(i)
            out[f"{name}/contribution"] = v[4 * i + 3]
        out["total"] = self.total
        return out

    def __repr__(self) -> str:
        return f"RewardOutput(total={self.total!r}, terms={list(self._names)})"


class _NotScalar(Exception):
    """Raised by the compiled scalar path when the context holds arrays (before any state moves)."""


_ABSENT = object()  # an optional context key that is not in the context
#: Largest step accepted (the int64 range, as step counters elsewhere).
MAX_STEP = 2**63 - 1
#: Names the generated functions use for themselves; terms and context keys never take them.
_RESERVED = frozenset({"ctx", "step", "terminated", "truncated", "done", "total", "out", "_self"})
_code_ids = itertools.count(1)


def _walk(nodes: list[TermNode | GroupNode]) -> Iterator[TermNode | GroupNode]:
    for node in nodes:
        yield node
        if isinstance(node, GroupNode):
            yield from _walk(node.children)


def _config_path(term_name: str) -> str:
    """The key path of a term in a config: ``components.<group>.components.<term>``."""
    return "components." + ".components.".join(term_name.split("/"))


class RewardComposer:
    """Evaluates a validated reward config; build it with :meth:`from_yaml` or :meth:`from_dict`.

    ``allow_nonfinite=True`` lets NaN/inf context values through (they raise by default).
    A call that raises changes nothing: the step, normalizer statistics and component state stay
    as they were. ``copy.deepcopy`` and ``pickle`` give independent composers with the same state.
    """

    def __init__(self, spec: RewardSpec, *, source: str | None = None, allow_nonfinite: bool = False) -> None:
        self.spec = spec
        self.source = source
        self.allow_nonfinite = allow_nonfinite
        self.step = 0
        self.training = True
        self._order = list(_walk(spec.nodes))
        self._names = tuple(node.name for node in self._order)
        self._false_flags: dict[int, Array] = {}
        self._leaves = [n for n in self._order if isinstance(n, TermNode)]
        self._stateful_nodes = [n for n in self._leaves if n.component.stateful]
        self._stateful = [n.component for n in self._stateful_nodes]
        self._normalized = [n for n in self._order if n.normalizer is not None]
        self._normalizers = [n.normalizer for n in self._normalized]
        self._guarded = self._needs_snapshot()
        self.shaper = RewardShaper({n.name: n.weight for n in self._order})
        self.shaper.on_change(self._on_weight_change)
        self._readers = self._collect_readers()
        # one slot per context key: (key, per-env ndim, whether every reader is optional, first reader)
        self._slot_info = [(key, readers[0][2], all(r[3] for r in readers), readers[0])
                           for key, readers in self._readers.items()]
        self._fingerprint = hashlib.sha256(
            json.dumps(self.to_dict(), sort_keys=True, default=repr).encode()).hexdigest()[:16]
        self._owner: Any = None
        self._compile()

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | Path, **kwargs: Any) -> "RewardComposer":
        """Load, validate and build a composer from a YAML file."""
        source = str(path)
        return cls(parse_config(load_yaml(path), source=source), source=source, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None, **kwargs: Any) -> "RewardComposer":
        """Validate and build a composer from a config mapping."""
        return cls(parse_config(data, source=source or "<dict>"), source=source, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data; ``from_dict(to_dict())`` builds an identical composer."""
        return spec_to_dict(self.spec)

    @property
    def term_names(self) -> tuple[str, ...]:
        """Names of every term and group, in evaluation (pre-)order."""
        return self._names

    def context_keys(self) -> set[str]:
        """Every context key some component reads (optional ones included)."""
        return set(self._readers)

    def required_context_keys(self) -> set[str]:
        """Context keys that must be present."""
        return {k for k, readers in self._readers.items() if any(not opt for _, _, _, opt in readers)}

    def generated_code(self) -> str:
        """The Python source of the two compiled functions (single environment, then batched).

        Tracebacks through them show these lines (the source is registered with ``linecache``).
        """
        return self._scalar_source + "\n\n" + self._vector_source

    # ---- copying, pickling, sharing ---------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_scalar_fn", "_vector_fn", "_owner", "_code_id", "_scalar_source", "_vector_source",
                    "_false_flags"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner = None
        self._false_flags = {}
        self._compile()

    def attach_to(self, owner: Any) -> None:
        """Bind this composer to one environment wrapper; a second live wrapper is refused.

        Per-environment state (potential shaping, EMAs, ``return_std`` returns) belongs to one
        environment, so one composer cannot serve two single-environment wrappers.
        """
        current = self._owner() if self._owner is not None else None
        if current is not None and current is not owner:
            raise ValueError(
                f"this RewardComposer already computes the reward of {type(current).__name__} "
                f"{current!r}; its per-environment state cannot serve a second environment. Give each "
                "environment its own composer (copy.deepcopy(composer) or another from_yaml), or wrap a "
                "vector environment once with the vector wrapper")
        self._owner = weakref.ref(owner)

    # ---- modes and state --------------------------------------------------------------------
    def train(self) -> "RewardComposer":
        """Normalizer statistics update and the step counter advances (the default)."""
        self.training = True
        return self

    def eval(self) -> "RewardComposer":
        """Freeze normalizer statistics and the step counter."""
        self.training = False
        return self

    def reset(self, mask: Any = None) -> None:
        """Start new episodes: clears per-environment state (everywhere, or where the boolean
        ``mask`` over environments is true); keeps normalizer statistics and the step.

        ``mask`` is None or a 1-D array (or list) of booleans with one entry per environment;
        anything else raises ``InvalidInputError`` and changes nothing.
        """
        if mask is not None:
            mask = _bool_array(mask, "reset mask")
            if mask.ndim != 1:
                raise InvalidInputError(f"reset mask: expected a 1-D array of booleans (one per environment), "
                                        f"got shape {mask.shape}")
        with self._transaction():
            for comp in self._stateful:
                comp.reset(mask)
            for norm in self._normalizers:
                norm.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML-safe) capturing the step, every component and normalizer state,
        and a fingerprint of the config it belongs to."""
        return {
            "step": self.step,
            "training": self.training,
            "config": self._fingerprint,
            "components": {n.name: n.component.state_dict() for n in self._stateful_nodes},
            "normalizers": {n.name: n.normalizer.state_dict() for n in self._normalized},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; later outputs equal those of the saved composer.

        All or nothing: the state is checked (names, types, shapes, finite numbers, the config it
        came from) and a ``ConfigError`` naming the key path leaves this composer unchanged.
        """
        where = "state_dict"
        step = self._checked_state_header(state, where)
        parts = [("components", {n.name: n.component for n in self._stateful_nodes}),
                 ("normalizers", {n.name: n.normalizer for n in self._normalized})]
        for section, owners in parts:
            _check_state_section(state[section], section, owners, where)
        with self._transaction():
            for section, owners in parts:
                for name, owner in owners.items():
                    try:
                        owner.load_state_dict(state[section][name])
                    except ConfigError as exc:
                        raise exc.within(where, f"{section}.{name}") from None
                    except Exception as exc:  # a third-party component's own check
                        raise ConfigError(f"{type(exc).__name__}: {exc}", source=where,
                                          path=f"{section}.{name}") from exc
        self.step = step
        self.training = state["training"]

    def _checked_state_header(self, state: Any, where: str) -> int:
        """Check a saved state's keys, config fingerprint, step and training flag; return the step."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"expected a mapping (the output of state_dict()), got {describe(state)}", source=where)
        keys = ("step", "training", "config", "components", "normalizers")
        for key in state:
            if key not in keys:
                raise ConfigError(f"unknown key; expected one of: {', '.join(keys)}", source=where, path=str(key))
        for key in keys:
            if key not in state:
                raise ConfigError("missing key", source=where, path=key)
        if state["config"] != self._fingerprint:
            raise ConfigError(f"expected {self._fingerprint!r} (this composer's config), got "
                              f"{describe(state['config'])}: the state was saved from a different reward config",
                              source=where, path="config")
        try:
            step = _check_step(state["step"])
        except InvalidInputError as exc:
            raise ConfigError(str(exc).split(": ", 1)[1], source=where, path="step") from None
        if not isinstance(state["training"], bool):
            raise ConfigError(f"expected true or false, got {describe(state['training'])}", source=where, path="training")
        return step

    def _needs_snapshot(self) -> list[Any]:
        """The state holders a call must snapshot so that a failing call changes nothing.

        A call updates stateful components, then normalizers (children before their group). One
        needs a snapshot unless it fails only before writing (``atomic_update``) and nothing
        updated after it can fail; the rest of a call (transforms, weights, sums) cannot fail.
        """
        post_order: list[Any] = []

        def visit(node: TermNode | GroupNode) -> None:
            if isinstance(node, GroupNode):
                for child in node.children:
                    visit(child)
            if node.normalizer is not None:
                post_order.append(node.normalizer)

        for node in self.spec.nodes:
            visit(node)
        sequence = [(c, c.atomic_update, True) for c in self._stateful]
        sequence += [(n, n.atomic_update, n.can_fail) for n in post_order]
        return [holder for i, (holder, atomic, _) in enumerate(sequence)
                if not atomic or any(fails for _, _, fails in sequence[i + 1:])]

    @contextmanager
    def _transaction(self, holders: list[Any] | None = None) -> Iterator[None]:
        """Put every component and normalizer state (or that of ``holders``) back if the block raises."""
        mutable = [*self._stateful, *self._normalizers] if holders is None else holders
        if not mutable:
            yield
            return
        saved = [m.snapshot() for m in mutable]
        try:
            yield
        except BaseException:
            for m, s in zip(mutable, saved, strict=True):
                m.restore(s)
            raise

    # ---- evaluation -----------------------------------------------------------------------
    def __call__(self, ctx: Mapping[str, Any], step: int | None = None,
                 terminated: Any = None, truncated: Any = None) -> RewardOutput:
        """Evaluate the reward on ``ctx``; see the module docstring for the arithmetic.

        ``step`` defaults to the composer's counter; it must be a non-negative integer. The
        episode flags are booleans (arrays of booleans in batched calls). A batched call
        advances the step by its number of environments.
        """
        try:
            # the compiled scalar path defaults the step and checks the flags itself (hot path)
            return self._scalar_fn(ctx, step, terminated, truncated)
        except _NotScalar:
            step = self.step if step is None else _check_step(step)
            total, values, batch = self._call_vector(ctx, step, terminated, truncated)
            if self.training:
                self.step = step + (batch or 1)
            return RewardOutput(total, values, self._names, batch)
        except KeyError as exc:
            self._raise_missing(ctx, exc)
            raise  # _raise_missing always raises; this line keeps type checkers informed
        except TypeError:
            if not isinstance(ctx, Mapping):
                raise InvalidInputError(f"expected a context mapping signal names to values, got "
                                        f"{type(ctx).__name__}") from None
            raise

    # ---- code generation ------------------------------------------------------------------
    def _compile(self) -> None:
        """(Re)build both compiled functions and register their source with ``linecache``."""
        if not hasattr(self, "_code_id"):
            self._code_id = next(_code_ids)
            weakref.finalize(self, _forget_sources, self._filenames())
        scalar_file, vector_file = self._filenames()
        self._scalar_fn = self._compile_scalar(scalar_file)
        self._vector_fn = self._compile_vector(vector_file)

    def _filenames(self) -> tuple[str, str]:
        label = self.source or "config"
        return (f"<rewardkit {label} #{self._code_id} single-env>", f"<rewardkit {label} #{self._code_id} batched>")

    def _new_namer(self) -> "_Namer":
        """Readable, unique names: ``<term>_raw``, ``<term>_weight``, ``ctx_<key>``, ``_<term>_<helper>``."""
        namer = _Namer(_RESERVED)
        self._vars: dict[str, str] = {}
        for node in self._order:
            base = _identifier(node.name)
            for suffix in ("", "_raw", "_norm", "_weight"):
                self._vars[node.name + suffix] = namer.unique(base + suffix)
        for key in self._readers:
            self._vars["ctx:" + key] = namer.unique("ctx_" + _identifier(key))
            self._vars["ctx_sum:" + key] = namer.unique("ctx_" + _identifier(key) + "_sum")
        return namer

    # The single-environment path is a function generated from the config: inputs read and
    # checked once, constant weights and linear schedules inlined, components' inlined code in
    # place. It runs in phases so that a call that fails changes nothing: inputs and weights,
    # then stateless terms (which may raise), then stateful terms (snapshotted when a later one
    # could still raise), then normalizers, transforms and sums (which cannot raise on floats).
    def _compile_scalar(self, filename: str) -> Any:
        namer = self._new_namer()
        env: dict[str, Any] = {"_NotScalar": _NotScalar, "_isfinite": math.isfinite, "_ndarray": np.ndarray,
                               "_F64": np.dtype(np.float64), "_nonfinite": self._nonfinite,
                               "_number": self._scalar_number, "_vector_input": self._scalar_vector,
                               "_check_step": _check_step, "_MAX_STEP": MAX_STEP, "_flag": _scalar_flag,
                               "_returned": _returned_float, "_ABSENT": _ABSENT, "_new": object.__new__,
                               "_RO": RewardOutput, "_names": self._names, "_self": self}
        namer.used.update(env)
        lines = ["def reward_single_env(ctx, step, terminated, truncated):",
                 "    if step is None: step = _self.step",
                 "    elif step.__class__ is not int or step < 0 or step > _MAX_STEP: step = _check_step(step)",
                 "    if terminated is None: terminated = False",
                 "    elif terminated.__class__ is not bool: terminated = _flag(terminated, 'terminated')",
                 "    if truncated is None: truncated = False",
                 "    elif truncated.__class__ is not bool: truncated = _flag(truncated, 'truncated')",
                 "    done = terminated or truncated",
                 "    # ---- inputs"]
        self._emit_scalar_inputs(lines)
        weight_of = self._emit_weights(lines, env, namer)
        stateless = [n for n in self._leaves if not n.component.stateful]
        if stateless:
            lines.append("    # ---- stateless terms")
        raw_of: dict[str, str] = {}
        for node in stateless:
            raw_of[node.name] = self._emit_scalar_leaf(node, lines, "    ", env, namer)
        # state changes from here on: snapshot what a later failure would leave half-updated
        holders: dict[int, str] = {}  # id(component or normalizer) -> its global name
        for node in self._order:
            ident = _identifier(node.name)
            if isinstance(node, TermNode) and node.component.stateful:
                holders[id(node.component)] = namer.unique(f"_{ident}_component")
                env[holders[id(node.component)]] = node.component
            if node.normalizer is not None and node.normalizer in self._guarded:
                holders[id(node.normalizer)] = namer.unique(f"_{ident}_normalizer")
                env[holders[id(node.normalizer)]] = node.normalizer
        saved = []
        for holder in self._guarded:
            obj = holders[id(holder)]
            saved.append((obj, namer.unique(obj.lstrip("_") + "_saved")))
        if saved:
            lines.append("    # ---- state is put back as it was if anything below raises")
            lines.extend(f"    {snap} = {obj}.snapshot()" for obj, snap in saved)
        updating: list[str] = []
        if self._stateful_nodes:
            updating.append("    # ---- stateful terms")
            for node in self._stateful_nodes:
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
        for node in self._stateful_nodes:
            lines.append(f"    if done: {holders[id(node.component)]}.reset(None)")
        # Build the output without a call to __init__ and count the step here: this is the hot path.
        lines += ["    out = _new(_RO)",
                  "    out.total = total",
                  f"    out._values = ({', '.join(flat)},)",
                  "    out._names = _names",
                  "    if _self.training: _self.step = step + 1",
                  "    return out"]
        self._scalar_source = "\n".join(lines) + "\n"
        return _define(self._scalar_source, env, "reward_single_env", filename)

    def _emit_scalar_inputs(self, lines: list[str]) -> None:
        """Read each context key once, as a float (or a list of floats), and check it is finite."""
        v = self._vars
        for key, nd, optional, _ in self._slot_info:
            x, total = v["ctx:" + key], v["ctx_sum:" + key]
            nonfinite = "raise _NotScalar" if self.allow_nonfinite else f"_nonfinite({key!r}, {x})"
            if optional:
                lines.append(f"    {x} = ctx.get({key!r}, _ABSENT)")
                lines.append(f"    if {x} is _ABSENT: {x} = None")
                check = f"    elif {x}.__class__ is not float"
            else:
                lines.append(f"    {x} = ctx[{key!r}]")
                check = f"    if {x}.__class__ is not float"
            guard = f"{x} is not None and " if optional else ""
            if nd == 0:
                lines.append(f"{check}: {x} = _number({x}, {key!r})")
                lines.append(f"    if {guard}not _isfinite({x}): {nonfinite}")
            else:
                # vector inputs reach components as lists of floats (fast to read from Python)
                fast = f"{x}.__class__ is _ndarray and {x}.dtype is _F64 and {x}.ndim == 1"
                if optional:
                    lines.append(f"    elif {fast}: {x} = {x}.tolist()")
                    lines.append(f"    else: {x} = _vector_input({x}, {key!r}, {nd})")
                    lines.append(f"    {total} = None if {x} is None else sum({x})")
                else:
                    lines.append(f"    {x} = {x}.tolist() if {fast} else _vector_input({x}, {key!r}, {nd})")
                    lines.append(f"    {total} = sum({x})")  # offered to inlined blocks as <var>_sum
                # the sum of finite values is finite unless it overflows: then check each value
                lines.append(f"    if {guard}not _isfinite({total}) and not all(map(_isfinite, {x})): {nonfinite}")

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
        return raw

    def _emit_weights(self, lines: list[str], env: dict[str, Any], namer: "_Namer") -> dict[str, str]:
        """Every node's weight at ``step``: a literal when constant, identical schedules evaluated once."""
        weight_of: dict[str, str] = {}
        by_expr: dict[str, str] = {}
        header = len(lines)
        for node in self._order:
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
                lines.append(f"    {var} = {expr}")
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
                lines.append(f"    {v[node.name + '_norm']} = {fn}({value}, done, _self.training)")
                value = v[node.name + "_norm"]
            for k, transform in enumerate(node.transforms):
                fn = namer.unique(f"_{ident}_{transform.name}" + (f"{k + 1}" if len(node.transforms) > 1 else ""))
                env[fn] = transform
                lines.append(f"    {v[node.name + '_norm']} = {fn}({value})")
                value = v[node.name + "_norm"]
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
        return [name for node in self._order for name in outputs[node.name]]

    # The batched path is compiled the same way: _call_vector checks and gathers the inputs (one
    # argument per context key), this function calls each component's compute on them and does
    # the weighting and sums without walking the tree.
    def _compile_vector(self, filename: str) -> Any:
        namer = self._new_namer()
        v = self._vars
        env: dict[str, Any] = {"_self": self, "_arr": np.asarray, "_f64": np.float64}
        namer.used.update(env)
        params = [v["ctx:" + key] for key, *_ in self._slot_info]
        lines = [f"def reward_batched({', '.join(params + ['step', 'terminated', 'truncated', 'done'])}):"]
        weight_of = self._emit_weights(lines, env, namer)
        raw_of: dict[str, str] = {}
        stateless = [n for n in self._leaves if not n.component.stateful]
        for title, nodes in (("stateless terms", stateless),
                             ("stateful terms (the caller puts state back if a later step raises)",
                              self._stateful_nodes)):
            if nodes:
                lines.append(f"    # ---- {title}")
            for node in nodes:
                comp = node.component
                fn = namer.unique(f"_{_identifier(node.name)}_compute")
                env[fn] = comp.compute
                pairs = [(local, v["ctx:" + key]) for local, key in comp.input_keys.items()]
                if any(local in comp.optional_inputs for local, _ in pairs):
                    items = ", ".join(f"({local!r}, {var})" for local, var in pairs)
                    x = f"{{k: v for k, v in ({items},) if v is not None}}"
                else:
                    x = "{" + ", ".join(f"{local!r}: {var}" for local, var in pairs) + "}"
                raw = raw_of[node.name] = v[node.name + "_raw"]
                lines.append(f"    {raw} = _arr({fn}({x}, terminated, truncated), _f64)")  # third-party may return lists
        lines.append("    # ---- normalizers, transforms, weighted sums")
        flat = self._emit_combine(lines, env, namer, raw_of, weight_of, "__call__")
        lines.append(f"    return total, [{', '.join(flat)}]")
        self._vector_source = "\n".join(lines) + "\n"
        return _define(self._vector_source, env, "reward_batched", filename)

    def _no_flags(self, n: int) -> Array:
        """A read-only all-False flag array of length ``n``, shared between calls."""
        flags = self._false_flags.get(n)
        if flags is None:
            flags = np.zeros(n, dtype=bool)
            flags.flags.writeable = False
            self._false_flags[n] = flags
        return flags

    def _on_weight_change(self) -> None:
        self._compile()

    # ---- input checks -----------------------------------------------------------------------
    def _read_by(self, key: str) -> str:
        return ", ".join(sorted({name for name, _, _, _ in self._readers.get(key, [])}))

    def _nonfinite(self, key: str, value: Any) -> None:
        raise NonFiniteInputError(
            f"context key {key!r} (read by {self._read_by(key)}) is not finite: {describe(value)}; "
            "pass allow_nonfinite=True to the composer to accept NaN/inf")

    def _bad_input(self, key: str, value: Any, expected: str) -> InvalidInputError:
        return InvalidInputError(f"context key {key!r} (read by {self._read_by(key)}): expected {expected}, "
                                 f"got {type(value).__name__} {describe(value)}")

    def _scalar_number(self, value: Any, key: str) -> float:
        """A one-environment number as a Python float; arrays and lists mean a batch (_NotScalar)."""
        if isinstance(value, (bool, np.bool_)):
            raise self._bad_input(key, value, "a number (booleans are not numbers here)")
        if isinstance(value, (int, float, np.integer, np.floating)):
            try:
                return float(value)
            except OverflowError:
                raise self._bad_input(key, value, "a number within the float64 range") from None
        if isinstance(value, (list, tuple)):
            raise _NotScalar
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "fiu":
                raise self._bad_input(key, value, f"an array of real numbers, not of dtype {value.dtype}")
            if value.ndim == 0:
                return float(value)
            raise _NotScalar
        raise self._bad_input(key, value, "a number or an array of numbers")

    def _scalar_vector(self, value: Any, key: str, nd: int) -> Any:
        """A one-environment vector input as (nested) lists of floats; more axes mean a batch."""
        arr = self._as_float_array(value, key)
        if arr.ndim != nd:
            raise _NotScalar  # a batch, or a shape the batched path reports
        return arr.tolist()

    def _as_float_array(self, value: Any, key: str) -> Array:
        """``value`` as a float64 array; strings, booleans, None, complex numbers and other
        non-numbers raise ``InvalidInputError`` naming the key and the terms that read it."""
        if value.__class__ is np.ndarray and value.dtype is _F64:
            return value
        if isinstance(value, (str, bytes, dict, bool, np.bool_)) or value is None:
            raise self._bad_input(key, value, "a number or an array of numbers")
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            raise self._bad_input(key, value, "a number or a rectangular array of numbers") from None
        kind = arr.dtype.kind
        if kind == "f":
            return arr if arr.dtype == np.float64 else arr.astype(np.float64)
        if kind in "iu":
            return arr.astype(np.float64)
        if kind == "O":  # Python ints beyond int64, or mixed objects: each must be a real number
            if any(isinstance(x, (list, tuple, np.ndarray)) for x in arr.reshape(-1)):
                raise self._bad_input(key, value, "a number or a rectangular array of numbers")
            flat = [self._scalar_number(x, key) for x in arr.reshape(-1)]
            return np.array(flat, dtype=np.float64).reshape(arr.shape)
        raise self._bad_input(key, value, f"real numbers, not an array of dtype {arr.dtype}")

    def _collect_readers(self) -> dict[str, list[tuple[str, str, int, bool]]]:
        """Context key -> [(term name, local input name, per-env ndim, optional)]."""
        readers: dict[str, list[tuple[str, str, int, bool]]] = {}
        for node in self._leaves:
            comp = node.component
            for local, key in comp.input_keys.items():
                nd = comp.inputs[local]
                for other, other_local, other_nd, _ in readers.get(key, []):
                    if other_nd != nd:
                        raise ConfigError(
                            f"context key {key!r} is read with {nd} axes per environment here but with "
                            f"{other_nd} by {other} (input {other_local!r}); one key has one shape",
                            source=self.source, path=f"{_config_path(node.name)}.inputs.{local}")
                readers.setdefault(key, []).append((node.name, local, nd, local in comp.optional_inputs))
        return readers

    def _raise_missing(self, ctx: Mapping[str, Any], exc: KeyError) -> None:
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        for key, readers in self._readers.items():
            needed_by = [f"{name} (input {local!r})" for name, local, _, opt in readers if not opt]
            if needed_by and key not in ctx:
                where = f"{self.source}: " if self.source else ""
                raise MissingInputError(
                    f"{where}context is missing key {key!r}, needed by " + ", ".join(needed_by)
                    + f"; context has: {', '.join(sorted(map(str, ctx))) or 'nothing'}"
                ) from None
        raise exc

    def _call_vector(self, ctx: Mapping[str, Any], step: int, terminated: Any, truncated: Any
                     ) -> tuple[Any, list[Any], int | None]:
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        inputs, batch = self._vector_inputs(ctx)
        n = batch if batch is not None else 1
        if terminated is None and truncated is None:
            term = trunc = done = self._no_flags(n)
        else:
            term = _flags(terminated, n, "terminated")
            trunc = _flags(truncated, n, "truncated")
            done = term | trunc
        if self._guarded:
            with self._transaction(self._guarded):
                total, values = self._vector_step(inputs, step, term, trunc, done)
        else:
            total, values = self._vector_step(inputs, step, term, trunc, done)
        if batch is None:
            values = [float(v[0]) if isinstance(v, np.ndarray) else v for v in values]
            return float(total[0]), values, None
        return total, values, n

    def _vector_inputs(self, ctx: Mapping[str, Any]) -> tuple[list[Array | None], int | None]:
        """Each context key as a checked float array with a leading environment axis, and the
        batch size (``None`` when no input has an environment axis: one environment)."""
        inputs: list[Array | None] = []
        batch: int | None = None
        for key, nd, optional, (name, local, _, _) in self._slot_info:
            if key not in ctx:
                if not optional:
                    self._raise_missing(ctx, KeyError(key))
                inputs.append(None)
                continue
            arr = self._as_float_array(ctx[key], key)
            if arr.ndim < nd or arr.ndim > nd + 1:
                raise InvalidInputError(
                    f"context key {key!r} (read by {name}, input {local!r}): expected {nd} axes per "
                    f"environment plus an optional leading environment axis, got shape {arr.shape}")
            if not self.allow_nonfinite and not np.isfinite(arr).all():
                self._nonfinite(key, arr)
            if arr.ndim == nd + 1:
                if arr.shape[0] == 0:
                    raise InvalidInputError(f"context key {key!r}: expected at least one environment on the "
                                            f"leading axis, got an empty batch (shape {arr.shape})")
                if batch is None:
                    batch = arr.shape[0]
                elif arr.shape[0] != batch:
                    raise InvalidInputError(f"context key {key!r}: expected {batch} environments on the leading "
                                            f"axis like the other inputs, got shape {arr.shape}")
            inputs.append(arr)
        n = batch if batch is not None else 1
        for j, ((_, nd, _, _), arr) in enumerate(zip(self._slot_info, inputs, strict=True)):
            if arr is not None and arr.ndim == nd:
                inputs[j] = np.broadcast_to(arr, (n,) + arr.shape)
        return inputs, batch

    def _vector_step(self, inputs: list[Array | None], step: int, term: Array, trunc: Array, done: Array
                     ) -> tuple[Array, list[Any]]:
        """The compiled batched function, then episode ends clear the state of those environments."""
        total, values = self._vector_fn(*inputs, step, term, trunc, done)
        if done is not term or done.any():
            for comp in self._stateful:
                comp.reset(done)
        return total, values


def _check_state_section(given: Any, section: str, owners: Mapping[str, Any], where: str) -> None:
    """A saved ``components``/``normalizers`` section names exactly the terms in ``owners``."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping of term name to state, got {describe(given)}",
                          source=where, path=section)
    for name in given:
        if name not in owners:
            raise ConfigError(f"unknown name; this composer has {section[:-1]} state for: "
                              f"{', '.join(owners) or 'nothing'}", source=where, path=f"{section}.{name}")
    for name in owners:
        if name not in given:
            raise ConfigError("missing key", source=where, path=f"{section}.{name}")


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


def _check_step(step: Any) -> int:
    """A step is an integer in [0, MAX_STEP] (NumPy integers accepted); refused before anything moves."""
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise InvalidInputError(f"step: expected a non-negative integer, got {type(step).__name__} {describe(step)}")
    step = int(step)
    if not 0 <= step <= MAX_STEP:
        raise InvalidInputError(f"step: expected a non-negative integer up to 2**63-1, got {describe(step)}")
    return step


def _returned_float(value: Any, term: str) -> float:
    """A component's one-environment result as a Python float (NumPy scalars are converted)."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise TypeError(f"{term}: the component's scalar_fn returned {type(value).__name__} {describe(value)}, "
                    "expected a float")


def _bool_array(value: Any, what: str) -> Array:
    """``value`` as a boolean array; anything but booleans raises ``InvalidInputError``."""
    arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind != "b":
        raise InvalidInputError(f"{what}: expected a boolean or an array of booleans, got "
                                f"{type(value).__name__} {describe(value)}")
    return arr


def _scalar_flag(value: Any, what: str) -> bool:
    """An episode flag for the single-environment path; arrays and lists send the call to the batched path."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        raise _NotScalar
    return bool(_bool_array(value, what))


def _flags(value: Any, n: int, what: str) -> Array:
    if value is None:
        return np.zeros(n, dtype=bool)
    arr = _bool_array(value, what)
    if arr.ndim == 0:
        return np.full(n, bool(arr))
    if arr.shape != (n,):
        raise InvalidInputError(f"{what}: expected shape ({n},) like the context, got {arr.shape}")
    return arr
