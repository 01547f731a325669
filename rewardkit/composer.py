"""``RewardComposer``: evaluates a reward config on a context, with a per-term breakdown.

For each term: ``raw = component(ctx)``, ``normalized = transforms(normalizer(raw))``,
``contribution = weight(step) * normalized``. A group's ``raw`` is the sum of its children's
contributions, then it is normalized, transformed and weighted the same way. The total is
``total_transforms(sum of top-level contributions)``; without total transforms the top-level
contributions add up to the total exactly.

A context whose values are floats is evaluated by a Python function compiled once from the
config (no NumPy on the hot path); a context with a leading environment axis ``(n_envs,)`` is
evaluated with NumPy and every output gets that axis. Both give the same numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .config import GroupNode, RewardSpec, TermNode, load_yaml, parse_config, spec_to_dict
from .errors import ConfigError, MissingInputError, NonFiniteInputError
from .shaper import RewardShaper

Array = np.ndarray
_SCALAR_TYPES = (float, int, np.float64, np.float32, np.int64, np.int32)


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
    """Raised by the compiled scalar path when the context holds arrays."""


def _walk(nodes: list[TermNode | GroupNode]) -> Iterator[TermNode | GroupNode]:
    for node in nodes:
        yield node
        if isinstance(node, GroupNode):
            yield from _walk(node.children)


class RewardComposer:
    """Evaluates a validated reward config; build it with :meth:`from_yaml` or :meth:`from_dict`.

    ``allow_nonfinite=True`` lets NaN/inf context values through (they raise by default).
    """

    def __init__(self, spec: RewardSpec, *, source: str | None = None, allow_nonfinite: bool = False) -> None:
        self.spec = spec
        self.source = source
        self.allow_nonfinite = allow_nonfinite
        self.step = 0
        self.training = True
        self._order = list(_walk(spec.nodes))
        self._names = tuple(node.name for node in self._order)
        self._index = {id(node): i for i, node in enumerate(self._order)}
        self._false_flags: dict[int, Array] = {}
        self._leaves = [n for n in self._order if isinstance(n, TermNode)]
        self._stateful = [n.component for n in self._leaves if n.component.stateful]
        self._normalizers = [n.normalizer for n in self._order if n.normalizer is not None]
        self.shaper = RewardShaper({n.name: n.weight for n in self._order})
        self.shaper.on_change(self._on_weight_change)
        self._readers = self._collect_readers()
        # one slot per (context key, per-env ndim): name, input and whether every reader is optional
        self._input_slots = [(key, nd) for key, readers in self._readers.items()
                             for nd in sorted({r[2] for r in readers})]
        self._slot_info = [(key, nd, all(r[3] for r in self._readers[key] if r[2] == nd),
                            next(r for r in self._readers[key] if r[2] == nd)) for key, nd in self._input_slots]
        self._scalar_fn = self._compile_scalar()
        self._vector_fn = self._compile_vector()

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
        ``mask`` over environments is true); keeps normalizer statistics and the step."""
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
        for comp in self._stateful:
            comp.reset(mask)
        for norm in self._normalizers:
            norm.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML-safe) capturing the step, every component and normalizer state."""
        return {
            "step": self.step,
            "training": self.training,
            "components": {n.name: n.component.state_dict() for n in self._leaves if n.component.stateful},
            "normalizers": {n.name: n.normalizer.state_dict() for n in self._order if n.normalizer is not None},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; later outputs equal those of the saved composer."""
        self.step = int(state["step"])
        self.training = bool(state.get("training", True))
        by_name = {n.name: n for n in self._order}
        for name, s in state.get("components", {}).items():
            if not isinstance(by_name.get(name), TermNode):
                raise KeyError(f"state has component {name!r} that this composer does not have")
            by_name[name].component.load_state_dict(s)
        for name, s in state.get("normalizers", {}).items():
            node = by_name.get(name)
            if node is None or node.normalizer is None:
                raise KeyError(f"state has a normalizer for {name!r} that this composer does not have")
            node.normalizer.load_state_dict(s)

    # ---- evaluation -----------------------------------------------------------------------
    def __call__(self, ctx: Mapping[str, Any], step: int | None = None,
                 terminated: Any = None, truncated: Any = None) -> RewardOutput:
        """Evaluate the reward on ``ctx``; see the module docstring for the arithmetic."""
        try:
            # the compiled scalar path defaults the step and checks the flags itself (hot path)
            return self._scalar_fn(ctx, step, terminated, truncated)
        except _NotScalar:
            if step is None:
                step = self.step
            total, values, batch = self._call_vector(ctx, step, terminated, truncated)
            if self.training:
                self.step = step + (batch or 1)
            return RewardOutput(total, values, self._names, batch)
        except KeyError as exc:
            self._raise_missing(ctx, exc)
            raise  # _raise_missing always raises; this line keeps type checkers informed

    # The scalar path is a function generated from the config: inputs read once, finiteness and
    # type checked inline, constant weights and linear schedules inlined. It returns the total and
    # the flat tuple of (raw, normalized, weight, contribution) per term in pre-order.
    def _compile_scalar(self) -> Any:
        env: dict[str, Any] = {"_NotScalar": _NotScalar, "_isfinite": math.isfinite, "_S": _SCALAR_TYPES,
                               "_nonfinite": self._nonfinite, "_np": np, "_as_list": _as_list,
                               "_ndarray": np.ndarray, "_new": object.__new__, "_RO": RewardOutput, "_flag": _scalar_flag,
                               "_names": self._names}
        lines = ["def _scalar(ctx, step, terminated, truncated):",
                 "    if step is None: step = _self.step",
                 "    if terminated is None: terminated = False",
                 "    elif terminated.__class__ is not bool: terminated = _flag(terminated)",
                 "    if truncated is None: truncated = False",
                 "    elif truncated.__class__ is not bool: truncated = _flag(truncated)",
                 "    done = terminated or truncated"]
        var_of_key: dict[tuple[str, int], str] = {}
        for key, readers in self._readers.items():
            ndims = {nd for _, _, nd, _ in readers}
            optional = all(opt for _, _, _, opt in readers)
            for nd in sorted(ndims):
                v = f"x{len(var_of_key)}"
                var_of_key[(key, nd)] = v
                get = f"ctx.get({key!r})" if optional else f"ctx[{key!r}]"
                lines.append(f"    {v} = {get}")
                guard = f"{v} is not None and " if optional else ""
                if nd == 0:
                    lines.append(f"    if {guard}{v}.__class__ not in _S: raise _NotScalar")
                    if not self.allow_nonfinite:
                        lines.append(f"    if {guard}not _isfinite({v}): _nonfinite({key!r}, {v})")
                else:
                    # vector inputs reach scalar_fn as lists of floats (fast to read from Python)
                    lines.append(f"    if {guard}{v}.__class__ is not list: {v} = "
                                 f"{v}.tolist() if {v}.__class__ is _ndarray and {v}.ndim == 1 else _as_list({v}, {nd})")
                    # {v}_sum is offered to components' inlined blocks (see BaseReward.scalar_block)
                    lines.append(f"    {v}_sum = sum({v})" if not optional else f"    {v}_sum = None if {v} is None else sum({v})")
                    if not self.allow_nonfinite:
                        # the sum of finite values is finite unless it overflows: check each then
                        lines.append(f"    if {guard}not _isfinite({v}_sum) and not all(map(_isfinite, {v})): "
                                     f"_nonfinite({key!r}, {v})")
        def leaf(node: TermNode, i: int, raw: str) -> str:
            comp = node.component
            args = [var_of_key[(key, comp.inputs[local])] for local, key in comp.input_keys.items()]
            inline = comp.scalar_source(args, env, str(i))
            block = comp.scalar_block(args, env, str(i)) if inline is None else None
            if inline is not None:
                lines.append(f"    {raw} = {inline}")
            elif block is not None:
                lines.extend(f"    {line}" for line in block[0])
                if block[1].isidentifier():
                    return block[1]  # the block's result variable serves as the raw value
                lines.append(f"    {raw} = {block[1]}")
            else:
                env[f"_c{i}"] = comp.scalar_fn()
                lines.append(f"    {raw} = _c{i}({', '.join(args + ['terminated', 'truncated'])})")
            return raw

        flat = self._emit_tree(lines, env, leaf, "scalar")
        for i, node in enumerate(self._order):
            if isinstance(node, TermNode) and node.component.stateful:
                env[f"_s{i}"] = node.component
                lines.append(f"    if done: _s{i}.reset(None)")
        # Build the output without a call to __init__ and count the step here: this is the hot path.
        lines.append("    out = _new(_RO)")
        lines.append("    out.total = total")
        lines.append(f"    out._values = ({', '.join(flat)},)")
        lines.append("    out._names = _names")
        lines.append("    if _self.training: _self.step = step + 1")
        lines.append("    return out")
        env["_self"] = self
        self._scalar_source = "\n".join(lines)
        return _define(self._scalar_source, env, "_scalar", f"<rewardkit composer {self.source or ''}>")

    def _emit_tree(self, lines: list[str], env: dict[str, Any], leaf: Callable[[TermNode, int, str], str],
                   normalizer_call: str) -> list[str]:
        """Emit the arithmetic shared by both compiled paths; ``leaf`` emits one component's raw value.

        ``normalizer_call`` is the normalizer method used: ``scalar`` (floats) or ``__call__``
        (arrays). Leaves ``total`` (after the total's transforms) assigned and returns the flat
        per-term output variables in pre-order (raw, normalized, weight, contribution).
        """
        out_vars: dict[int, list[str]] = {}
        weight_vars: dict[str, str] = {}  # identical schedules are evaluated once per call

        def emit(node: TermNode | GroupNode) -> str:
            i = self._index[id(node)]
            raw = f"r{i}"
            if isinstance(node, TermNode):
                raw = leaf(node, i, raw)
            else:
                parts = [emit(child) for child in node.children]
                lines.append(f"    {raw} = {' + '.join(parts)}")
            val = raw
            if node.normalizer is not None:
                env[f"_n{i}"] = getattr(node.normalizer, normalizer_call)
                lines.append(f"    m{i} = _n{i}({val}, done, _self.training)")
                val = f"m{i}"
            for k, t in enumerate(node.transforms):
                env[f"_t{i}_{k}"] = t
                lines.append(f"    m{i} = _t{i}_{k}({val})")
                val = f"m{i}"
            expr = self._weight_source(node, i, env)
            if _is_literal(expr):
                w = expr  # a constant weight is used in place
            elif expr in weight_vars:
                w = weight_vars[expr]
            else:
                w = weight_vars[expr] = f"w{i}"
                lines.append(f"    {w} = {expr}")
            lines.append(f"    c{i} = {w} * {val}")
            out_vars[i] = [raw, val, w, f"c{i}"]
            return f"c{i}"

        top = [emit(node) for node in self.spec.nodes]
        lines.append(f"    total = {' + '.join(top)}")
        for k, t in enumerate(self.spec.total_transforms):
            env[f"_tt{k}"] = t
            lines.append(f"    total = _tt{k}(total)")
        return [v for i in range(len(self._order)) for v in out_vars[i]]

    # The batched path is compiled the same way: the Python loop in _call_vector checks and
    # gathers the inputs, then this function calls each component's compute on them and does the
    # weighting and sums without walking the tree.
    def _compile_vector(self) -> Any:
        env: dict[str, Any] = {"_self": self, "_arr": np.asarray, "_f64": np.float64}
        slot = {key_nd: j for j, key_nd in enumerate(self._input_slots)}
        lines = ["def _vector(a, step, terminated, truncated, done):"]

        def leaf(node: TermNode, i: int, raw: str) -> str:
            comp = node.component
            env[f"_c{i}"] = comp.compute
            pairs = [(local, f"a[{slot[(key, comp.inputs[local])]}]") for local, key in comp.input_keys.items()]
            if any(local in comp.optional_inputs for local, _ in pairs):
                items = ", ".join(f"({local!r}, {v})" for local, v in pairs)
                x = f"{{k: v for k, v in ({items},) if v is not None}}"
            else:
                x = "{" + ", ".join(f"{local!r}: {v}" for local, v in pairs) + "}"
            lines.append(f"    {raw} = _arr(_c{i}({x}, terminated, truncated), _f64)")  # third-party may return lists
            return raw

        flat = self._emit_tree(lines, env, leaf, "__call__")
        lines.append(f"    return total, [{', '.join(flat)}]")
        self._vector_source = "\n".join(lines)
        return _define(self._vector_source, env, "_vector", f"<rewardkit composer {self.source or ''} (batched)>")

    def _weight_source(self, node: TermNode | GroupNode, i: int, env: dict[str, Any]) -> str:
        """Python expression of the node's weight at ``step``: a literal when constant."""
        sched = self.shaper.schedule(node.name)
        src = sched.source("step") if hasattr(sched, "source") else None
        if src is not None:
            return src
        env[f"_w{i}"] = sched
        return f"_w{i}(step)"

    def _no_flags(self, n: int) -> Array:
        """A read-only all-False flag array of length ``n``, shared between calls."""
        flags = self._false_flags.get(n)
        if flags is None:
            flags = np.zeros(n, dtype=bool)
            flags.flags.writeable = False
            self._false_flags[n] = flags
        return flags

    def _on_weight_change(self) -> None:
        self._scalar_fn = self._compile_scalar()
        self._vector_fn = self._compile_vector()

    def _nonfinite(self, key: str, value: Any) -> None:
        readers = ", ".join(sorted({name for name, _, _, _ in self._readers.get(key, [])}))
        raise NonFiniteInputError(
            f"context key {key!r} (read by {readers}) is not finite: {value!r}; "
            "pass allow_nonfinite=True to the composer to accept NaN/inf"
        )

    def _collect_readers(self) -> dict[str, list[tuple[str, str, int, bool]]]:
        """Context key -> [(term name, local input name, per-env ndim, optional)]."""
        readers: dict[str, list[tuple[str, str, int, bool]]] = {}
        for node in self._leaves:
            comp = node.component
            for local, key in comp.input_keys.items():
                readers.setdefault(key, []).append(
                    (node.name, local, comp.inputs[local], local in comp.optional_inputs))
        return readers

    def _raise_missing(self, ctx: Mapping[str, Any], exc: KeyError) -> None:
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
        inputs: list[Array | None] = []
        batch: int | None = None
        for key, nd, optional, (name, local, _, _) in self._slot_info:
            if key not in ctx:
                if not optional:
                    self._raise_missing(ctx, KeyError(key))
                inputs.append(None)
                continue
            arr = np.asarray(ctx[key], dtype=np.float64)
            if arr.ndim < nd or arr.ndim > nd + 1:
                raise ValueError(
                    f"context key {key!r} (read by {name}, input {local!r}): expected {nd} axes per "
                    f"environment plus an optional leading environment axis, got shape {arr.shape}")
            if not self.allow_nonfinite and not np.isfinite(arr).all():
                self._nonfinite(key, arr)
            if arr.ndim == nd + 1:
                if batch is None:
                    batch = arr.shape[0]
                elif arr.shape[0] != batch:
                    raise ValueError(f"context key {key!r}: expected {batch} environments on the leading "
                                     f"axis like the other inputs, got shape {arr.shape}")
            inputs.append(arr)
        n = batch if batch is not None else 1
        for j, ((key, nd), arr) in enumerate(zip(self._input_slots, inputs)):
            if arr is not None and arr.ndim == nd:
                inputs[j] = np.broadcast_to(arr, (n,) + arr.shape)
        if terminated is None and truncated is None:
            term = trunc = done = self._no_flags(n)
        else:
            term = _flags(terminated, n, "terminated")
            trunc = _flags(truncated, n, "truncated")
            done = term | trunc
        total, values = self._vector_fn(inputs, step, term, trunc, done)
        if done is not term or done.any():
            for comp in self._stateful:
                comp.reset(done)
        if batch is None:
            values = [float(v[0]) if isinstance(v, np.ndarray) else v for v in values]
            return float(total[0]), values, None
        return total, values, n


def _define(source: str, env: dict[str, Any], name: str, filename: str) -> Any:
    """Compile generated ``source`` (our own code, built from a validated config) and return ``name``."""
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), env, namespace)  # noqa: S102
    return namespace[name]


def _is_literal(expr: str) -> bool:
    """Whether a generated weight expression is a plain number literal (a constant weight)."""
    try:
        float(expr)
    except ValueError:
        return False
    return True


def _scalar_flag(value: Any) -> bool:
    """An episode flag for the scalar path; arrays and lists send the call to the batched path."""
    if value is None:
        return False
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return bool(value)
    raise _NotScalar


def _flags(value: Any, n: int, what: str) -> Array:
    if value is None:
        return np.zeros(n, dtype=bool)
    arr = np.asarray(value, dtype=bool)
    if arr.ndim == 0:
        return np.full(n, bool(arr))
    if arr.shape != (n,):
        raise ValueError(f"{what}: expected shape ({n},) like the context, got {arr.shape}")
    return arr


def _as_list(value: Any, nd: int) -> list:
    """A one-environment vector input on the scalar path, as a list; more axes mean a batch."""
    if value.__class__ is list:
        if value and value[0].__class__ is list:
            raise _NotScalar
        return value
    arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.float64)
    if arr.ndim != nd or nd != 1:
        raise _NotScalar
    return arr.tolist()
