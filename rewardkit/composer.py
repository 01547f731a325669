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
import operator
from functools import reduce
from pathlib import Path
from typing import Any, Iterator, Mapping

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

    def _weight(self, i: int) -> Any:
        w = self._values[4 * i + 2]
        if self._n_envs is not None and not isinstance(w, np.ndarray):
            return np.full(self._n_envs, w)
        return w

    @property
    def terms(self) -> dict[str, TermOutput]:
        """Term name (``group/child`` for nested terms) -> :class:`TermOutput`."""
        if self._terms is None:
            v = self._values
            self._terms = {name: TermOutput(v[4 * i], v[4 * i + 1], self._weight(i), v[4 * i + 3])
                           for i, name in enumerate(self._names)}
        return self._terms

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
        self._scalar_fn = self._compile_scalar()

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
        if step is None:
            step = self.step
        try:
            return self._scalar_fn(ctx, step, False if terminated is None else _scalar_flag(terminated),
                                   False if truncated is None else _scalar_flag(truncated))
        except _NotScalar:
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
                               "_ndarray": np.ndarray, "_new": object.__new__, "_RO": RewardOutput,
                               "_names": self._names}
        lines = ["def _scalar(ctx, step, terminated, truncated):", "    done = terminated or truncated"]
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
                    if not self.allow_nonfinite:
                        # the sum of finite values is finite unless it overflows: check each then
                        lines.append(f"    if {guard}not _isfinite(sum({v})) and not all(map(_isfinite, {v})): "
                                     f"_nonfinite({key!r}, {v})")
        out_vars: list[str] = []
        weight_vars: dict[str, str] = {}  # identical schedules are evaluated once per call

        def emit(node: TermNode | GroupNode, idx: int) -> str:
            """Emit code for ``node``; return the variable holding its contribution."""
            i = idx
            raw = f"r{i}"
            if isinstance(node, TermNode):
                comp = node.component
                args = [var_of_key[(key, comp.inputs[local])] for local, key in comp.input_keys.items()]
                inline = comp.scalar_source(args, env, str(i))
                block = comp.scalar_block(args, env, str(i)) if inline is None else None
                if inline is not None:
                    lines.append(f"    {raw} = {inline}")
                elif block is not None:
                    lines.extend(f"    {line}" for line in block[0])
                    if block[1].isidentifier():
                        raw = block[1]  # the block's result variable serves as the raw value
                    else:
                        lines.append(f"    {raw} = {block[1]}")
                else:
                    fn = f"_c{i}"
                    env[fn] = comp.scalar_fn()
                    lines.append(f"    {raw} = {fn}({', '.join(args + ['terminated', 'truncated'])})")
            else:
                parts = [emit(child, self._order.index(child)) for child in node.children]
                lines.append(f"    {raw} = {' + '.join(parts)}")
            val = raw
            if node.normalizer is not None:
                env[f"_n{i}"] = node.normalizer
                lines.append(f"    m{i} = _n{i}.scalar({val}, done, _self.training)")
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
            out_vars.extend([raw, val, w, f"c{i}"])
            return f"c{i}"

        top = [emit(node, self._order.index(node)) for node in self.spec.nodes]
        # out_vars were appended in post-order for groups; reorder to pre-order by index.
        per_node = {}
        for j in range(0, len(out_vars), 4):
            idx = int(out_vars[j + 3][1:])
            per_node[idx] = out_vars[j:j + 4]
        flat = [v for idx in range(len(self._order)) for v in per_node[idx]]
        lines.append(f"    total = {' + '.join(top)}")
        for k, t in enumerate(self.spec.total_transforms):
            env[f"_tt{k}"] = t
            lines.append(f"    total = _tt{k}(total)")
        for i, node in enumerate(self._order):
            if isinstance(node, TermNode) and node.component.stateful:
                env[f"_s{i}"] = node.component
                lines.append(f"    if done: _s{i}.reset(None)")
        # Build the output without a call to __init__ and count the step here: this is the hot path.
        lines.append("    out = _new(_RO)")
        lines.append("    out.total = total")
        lines.append(f"    out._values = ({', '.join(flat)},)")
        lines.append("    out._names = _names")
        lines.append("    out._terms = out._n_envs = None")
        lines.append("    if _self.training: _self.step = step + 1")
        lines.append("    return out")
        env["_self"] = self
        source = "\n".join(lines)
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<rewardkit composer {self.source or ''}>", "exec"), env, namespace)  # noqa: S102
        self._scalar_source = source
        return namespace["_scalar"]

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
        arrays: dict[tuple[str, int], Array] = {}
        batch: int | None = None
        for key, readers in self._readers.items():
            for name, local, nd, optional in readers:
                if (key, nd) in arrays:
                    continue
                if key not in ctx:
                    if optional:
                        continue
                    self._raise_missing(ctx, KeyError(key))
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
                arrays[(key, nd)] = arr
        n = batch if batch is not None else 1
        for (key, nd), arr in arrays.items():
            if arr.ndim == nd:
                arrays[(key, nd)] = np.broadcast_to(arr, (n,) + arr.shape)
        if terminated is None and truncated is None:
            term = trunc = done = self._no_flags(n)
        else:
            term = _flags(terminated, n, "terminated")
            trunc = _flags(truncated, n, "truncated")
            done = term | trunc
        values: list[Any] = [None] * (4 * len(self._order))
        index = self._index

        def evaluate(node: TermNode | GroupNode) -> Array:
            i = index[id(node)]
            if isinstance(node, TermNode):
                comp = node.component
                x = {local: arrays[(key, comp.inputs[local])] for local, key in comp.input_keys.items()
                     if (key, comp.inputs[local]) in arrays}
                raw = np.asarray(comp.compute(x, term, trunc), dtype=np.float64)
            else:
                raw = reduce(operator.add, [evaluate(child) for child in node.children])
            val = raw
            if node.normalizer is not None:
                val = node.normalizer(val, done, self.training)
            for t in node.transforms:
                val = t(val)
            w = self.shaper.weight(node.name, step)
            contribution = w * val
            values[4 * i:4 * i + 4] = [raw, val, w, contribution]
            return contribution

        total = reduce(operator.add, [evaluate(node) for node in self.spec.nodes])
        for t in self.spec.total_transforms:
            total = t(total)
        if done is not term or done.any():
            for comp in self._stateful:
                comp.reset(done)
        if batch is None:
            values = [float(v[0]) if isinstance(v, np.ndarray) else v for v in values]
            return float(total[0]), values, None
        return total, values, n


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
