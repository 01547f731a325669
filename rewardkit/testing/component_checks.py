"""``check_component``: property-test a reward component against every promise it declares.

Like Gymnasium's ``check_env`` for environments, for rewards: Hypothesis draws parameters from
the component's ``params`` schema and inputs from its ``inputs`` and ``input_domains`` (the whole
float64 range by default, huge values included), plays episodes with episode ends mid-way the way
the composer does, and checks each promise. A broken one raises :class:`ComponentCheckError`
naming the promise with the shrunk counterexample. A ``RuntimeWarning`` (overflow, invalid value)
counts as a failure: a component must handle extreme inputs itself.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

from ..backend import library_of, to_numpy
from ..base import BaseReward, written_for_its_compute
from .strategies import Bounds, component_inputs, params_strategy, texts


class ComponentCheckError(AssertionError):
    """A component breaks one of its promises; the message holds the shrunk counterexample."""

    def __init__(self, component: str, promise: str, detail: str) -> None:
        self.component, self.promise, self.detail = component, promise, detail
        super().__init__(f"{component} breaks the promise '{promise}': {detail}")


class _Broken(Exception):
    """Raised inside a Hypothesis example; carries the description of what went wrong."""


@dataclass
class Step:
    """One call's inputs (by local input name) and episode flags, for ``n_envs`` environments."""

    inputs: dict[str, np.ndarray]
    terminated: np.ndarray
    truncated: np.ndarray

    def env(self, i: int) -> "Step":
        """The same call for environment ``i`` alone."""
        return Step({k: v[i:i + 1] for k, v in self.inputs.items()}, self.terminated[i:i + 1], self.truncated[i:i + 1])

    def describe(self) -> str:
        values = ", ".join(f"{k}={_fmt(v)}" for k, v in self.inputs.items()) or "no inputs"
        return f"{values}; terminated={self.terminated.tolist()}, truncated={self.truncated.tolist()}"


def _fmt(value: Any) -> str:
    return np.array2string(np.asarray(value), precision=17, separator=", ", max_line_width=10_000)


#: Episode ends are rarer than continuations, so episodes span several calls.
_END = st.sampled_from([False, False, False, True])


class _Subject:
    """Builds instances of the component under test and draws its episodes."""

    def __init__(self, component: type[BaseReward] | BaseReward, params: Mapping[str, Any] | None,
                 inputs: Mapping[str, Bounds] | None) -> None:
        if isinstance(component, BaseReward):
            if params:
                raise ValueError("pass params only with a class; an instance already has its parameters")
            self.cls: type[BaseReward] = type(component)
            self.params = params_strategy(self.cls, dict(component.config))
            self.label = f"{self.cls.__name__}({', '.join(f'{k}={v!r}' for k, v in component.config.items())})"
        elif isinstance(component, type) and issubclass(component, BaseReward):
            self.cls = component
            self.params = params_strategy(component, params)
            self.label = component.__name__
        else:
            raise TypeError(f"check_component needs a BaseReward subclass or instance, got {component!r}")
        self.ranges = dict(inputs or {})
        self._steps: dict[tuple, st.SearchStrategy[Step]] = {}
        unknown = sorted(set(self.ranges) - set(self.cls.inputs))
        if unknown:
            raise ValueError(f"{self.cls.__name__} has no input {unknown[0]!r}; it reads: {', '.join(self.cls.inputs)}")

    def build(self, params: dict[str, Any]) -> BaseReward:
        return self.cls(name="checked", **params)

    def draw_steps(self, draw: st.DrawFn, template: BaseReward, n_envs: int, n_replicas: int,
                   max_steps: int) -> list[Step]:
        return draw(st.lists(self.step_strategy(template, n_envs, n_replicas), min_size=1, max_size=max_steps))

    def step_strategy(self, template: BaseReward, n_envs: int, n_replicas: int) -> st.SearchStrategy[Step]:
        """Strategy of one call for this shape (built once: building strategies is slow)."""
        domains = tuple(sorted(getattr(template, "input_domains", {}).items()))
        key = (n_envs, n_replicas, domains)
        if key not in self._steps:
            flags = st.lists(_END, min_size=n_envs, max_size=n_envs).map(lambda v: np.array(v, dtype=bool))
            inputs = component_inputs(template, n_envs, n_replicas, self.ranges)
            if template.optional_inputs:
                optional = template.optional_inputs
                inputs = st.tuples(inputs, st.booleans()).map(
                    lambda pair: {k: v for k, v in pair[0].items() if not (pair[1] and k in optional)})
            self._steps[key] = st.builds(Step, inputs, flags, flags)
        return self._steps[key]


class _Example:
    """What one Hypothesis example drew, so a failure can print the (shrunk) counterexample."""

    def __init__(self, data: st.DataObject, subject: _Subject) -> None:
        self.data, self.subject = data, subject
        self.notes: list[str | Callable[[], str]] = []  # formatted only on failure (formatting is slow)

    def params(self) -> dict[str, Any]:
        params = self.data.draw(self.subject.params)
        self.notes.append(f"params: {params}")
        return params

    def episode(self, template: BaseReward, label: str, *, n_envs: int | None = None, max_steps: int = 6,
                n_replicas: int | None = None) -> list[Step]:
        n_envs = n_envs or self.data.draw(st.integers(1, 3))
        n_replicas = n_replicas or self.data.draw(st.integers(1, 5))
        steps = self.subject.draw_steps(self.data.draw, template, n_envs, n_replicas, max_steps)
        self.notes.append(lambda: "\n  ".join(
            [f"{label} ({len(steps)} call{'s' if len(steps) > 1 else ''}, {n_envs} env):"]
            + [f"  call {t}: {s.describe()}" for t, s in enumerate(steps)]))
        return steps

    def fail(self, message: str) -> None:
        notes = [n if isinstance(n, str) else n() for n in self.notes]
        raise _Broken(message + "\ncounterexample:\n  " + "\n  ".join(notes))


def _play(ex: _Example, comp: BaseReward, steps: list[Step], method: str = "compute") -> list[np.ndarray]:
    """Feed ``steps`` as the composer does: ``compute`` (or ``method``), then reset where an episode ended."""
    outs = []
    call = getattr(comp, method)
    for t, step in enumerate(steps):
        before = {k: v.copy() for k, v in step.inputs.items()}
        out = call(_as_passed(comp, step.inputs), step.terminated, step.truncated)
        n = len(step.terminated)
        if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.shape != (n,):
            ex.fail(f"{method} returned {type(out).__name__} "
                    f"{getattr(out, 'dtype', '')} {getattr(out, 'shape', '')} at call {t}, expected a float64 "
                    f"array of shape ({n},)")
        for k, v in before.items():
            if not np.array_equal(v, step.inputs[k]):
                ex.fail(f"{method} modified its input {k!r} in place at call {t}")
        outs.append(out.copy())
        done = step.terminated | step.truncated
        if done.any():
            comp.reset(done)
    return outs


def _as_passed(comp: BaseReward, inputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Inputs as the composer passes them to ``compute``: arrays, and lists of ``str`` for text."""
    return {k: v.tolist() if k in comp.text_inputs else v for k, v in inputs.items()}


def _close(a: float, b: float) -> bool:
    """Equal up to rounding (NumPy's vectorized exp may differ from libm's in the last bit)."""
    if a == b:
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b)) + 1e-300


# ---- the compiled scalar helpers, called under the contract of BaseReward ----------------------
def _scalar_args(comp: BaseReward, step: Step) -> list[Any]:
    """One environment's inputs as the composer's scalar path passes them: floats, lists, None."""
    args = []
    for local in comp.input_keys:
        value = step.inputs.get(local)
        if value is None:
            args.append(None)
        elif local in comp.text_inputs:
            args.append(str(value[0]))
        else:
            args.append(float(value[0]) if comp.inputs[local] == 0 else value[0].tolist())
    return args


def compile_scalar_helper(comp: BaseReward, kind: str) -> Callable[..., float] | None:
    """``scalar_source`` or ``scalar_block`` of ``comp`` as a function ``f(*inputs, terminated,
    truncated)``, built as their docstrings promise (vector ``v`` comes with ``v_sum``); ``None``
    when the component does not define one."""
    args = [f"_in{j}" for j in range(len(comp.input_keys))]
    env: dict[str, Any] = {}
    if kind == "scalar_source":
        expr = comp.scalar_source(args, env, "_checked")
        if expr is None:
            return None
        body = [f"return {expr}"]
    else:
        block = comp.scalar_block(args, env, "_checked")
        if block is None:
            return None
        body = list(block[0]) + [f"return {block[1]}"]
    sums = [f"{a}_sum = None if {a} is None else sum({a})"
            for a, local in zip(args, comp.input_keys, strict=True) if comp.inputs[local] > 0]
    lines = [f"def _helper({', '.join(args + ['terminated', 'truncated'])}):",
             "    done = terminated or truncated"] + [f"    {line}" for line in sums + body]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<{kind} of {comp.name}>", "exec"), env, namespace)  # noqa: S102 - the component's own code
    return namespace["_helper"]


def _play_scalar(comp: BaseReward, fn: Callable[..., float], steps: list[Step]) -> list[Any]:
    outs = []
    for step in steps:
        term, trunc = bool(step.terminated[0]), bool(step.truncated[0])
        outs.append(fn(*_scalar_args(comp, step), term, trunc))
        if term or trunc:
            comp.reset(None)
    return outs


# ---- the promises ---------------------------------------------------------------------------------
def _outputs(ex: _Example) -> None:
    comp = ex.subject.build(ex.params())
    low, high = comp.output_range
    steps = ex.episode(comp, "episode")
    for t, out in enumerate(_play(ex, comp, steps)):
        if not np.all(np.isfinite(out)):
            ex.fail(f"output {_fmt(out)} at call {t} is not finite (finite inputs must give finite outputs)")
        if not np.all((out >= low) & (out <= high)):
            ex.fail(f"output {_fmt(out)} at call {t} is outside output_range [{low}, {high}]")


def _monotone(ex: _Example) -> None:
    comp = ex.subject.build(ex.params())
    if not comp.monotone:
        return
    n_envs = ex.data.draw(st.integers(1, 3))
    n_replicas = ex.data.draw(st.integers(1, 4))
    history = ex.episode(comp, "history", n_envs=n_envs, n_replicas=n_replicas, max_steps=4)
    _play(ex, comp, history)  # stateful components: compare from a non-trivial state
    step = ex.episode(comp, "then", n_envs=n_envs, n_replicas=n_replicas, max_steps=1)[0]
    for local, direction in comp.monotone.items():
        if local not in step.inputs:
            continue
        if local in comp.text_inputs:  # text: "higher" is the same text with more appended
            suffixes = ex.data.draw(st.lists(texts(), min_size=n_envs, max_size=n_envs))
            low = step.inputs[local]
            high = low + np.array(suffixes + [""], dtype=object)[:n_envs]
            other = high
        else:
            other = ex.data.draw(ex.subject.step_strategy(comp, n_envs, n_replicas)).inputs.get(local, step.inputs[local])
            low, high = np.minimum(step.inputs[local], other), np.maximum(step.inputs[local], other)
        ex.notes.append(lambda local=local, other=other: f"other value of {local!r}: {_fmt(other)}")
        out_low = copy.deepcopy(comp).compute(_as_passed(comp, {**step.inputs, local: low}), step.terminated,
                                              step.truncated)
        out_high = copy.deepcopy(comp).compute(_as_passed(comp, {**step.inputs, local: high}), step.terminated,
                                               step.truncated)
        bad = out_high < out_low if direction == "increasing" else out_high > out_low
        if np.any(bad):
            i = int(np.argmax(bad))
            ex.fail(f"declared {direction} in {local!r}, but {local}={_fmt(low[i])} gives {float(out_low[i])!r} "
                    f"and {local}={_fmt(high[i])} gives {float(out_high[i])!r} (environment {i})")


def _batched(ex: _Example) -> None:
    params = ex.params()
    template = ex.subject.build(params)
    steps = ex.episode(template, "episode")
    batched = _play(ex, template, steps)
    for i in range(len(steps[0].terminated)):
        single = _play(ex, ex.subject.build(params), [s.env(i) for s in steps])
        for t, (b, s) in enumerate(zip(batched, single, strict=True)):
            if not np.array_equal(b[i:i + 1], s):
                ex.fail(f"environment {i} at call {t}: batched compute gives {float(b[i])!r}, a single-environment "
                        f"instance gives {float(s[0])!r} (environments must not influence each other)")


def _fast_path(ex: _Example) -> None:
    """``compute_fast`` (what the composer calls on batches) gives ``compute``'s numbers bit for bit
    over whole episodes with resets, and leaves the same state."""
    params = ex.params()
    steps = ex.episode(ex.subject.build(params), "episode")
    reference, fast = ex.subject.build(params), ex.subject.build(params)
    expected = _play(ex, reference, steps)
    got = _play(ex, fast, steps, "compute_fast")
    for t, (e, g) in enumerate(zip(expected, got, strict=True)):
        if not np.array_equal(e, g, equal_nan=True) or not np.array_equal(np.signbit(e), np.signbit(g)):
            ex.fail(f"compute_fast gives {_fmt(g)} at call {t}, compute gives {_fmt(e)}")
    if not _close_state(reference.state_dict(), fast.state_dict()):
        ex.fail("compute_fast leaves another state than compute")


def _scalar_path(kind: str) -> Callable[[_Example], None]:
    def check(ex: _Example) -> None:
        params = ex.params()
        comp = ex.subject.build(params)
        if kind == "scalar_fn":
            fn: Callable[..., float] | None = comp.scalar_fn()
        else:
            fn = compile_scalar_helper(comp, kind)
        if fn is None:
            return
        steps = ex.episode(comp, "episode", n_envs=1)
        expected = [float(out[0]) for out in _play(ex, ex.subject.build(params), steps)]
        got = _play_scalar(comp, fn, steps)
        for t, (e, g) in enumerate(zip(expected, got, strict=True)):
            if not isinstance(g, float) or not _close(g, e):
                ex.fail(f"{kind} gives {g!r} at call {t}, compute gives {e!r}")

    return check


def _state_round_trip(ex: _Example) -> None:
    params = ex.params()
    original = ex.subject.build(params)
    steps = ex.episode(original, "episode", max_steps=8)
    cut = ex.data.draw(st.integers(0, len(steps)))
    ex.notes.append(f"saved after call {cut}")
    _play(ex, original, steps[:cut])
    try:
        text = json.dumps(original.state_dict(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        ex.fail(f"state_dict() is not plain JSON data: {exc}")
    restored = ex.subject.build(params)
    restored.load_state_dict(json.loads(text))
    for t, (a, b) in enumerate(zip(_play(ex, original, steps[cut:]), _play(ex, restored, steps[cut:]), strict=True)):
        if not np.array_equal(a, b):
            ex.fail(f"after load_state_dict, call {cut + t} gives {_fmt(b)}; the saved instance gives {_fmt(a)}")


def _reset(ex: _Example) -> None:
    params = ex.params()
    used = ex.subject.build(params)
    history = ex.episode(used, "history", max_steps=4)
    later = ex.episode(used, "after reset()", max_steps=4)
    _play(ex, used, history)
    used.reset()  # a full reset; may also change the number of environments
    what = "after reset()" if used.stateful else "after earlier calls (stateful = False)"
    for t, (a, b) in enumerate(zip(_play(ex, used, later), _play(ex, ex.subject.build(params), later), strict=True)):
        if not np.array_equal(a, b):
            ex.fail(f"{what}, call {t} gives {_fmt(a)}; a fresh instance gives {_fmt(b)}")


def _deepcopy(ex: _Example) -> None:
    params = ex.params()
    comp = ex.subject.build(params)
    n_envs = ex.data.draw(st.integers(1, 3))
    n_replicas = ex.data.draw(st.integers(1, 4))
    history = ex.episode(comp, "history", n_envs=n_envs, n_replicas=n_replicas, max_steps=4)
    _play(ex, comp, history)
    twin, clone = copy.deepcopy(comp), copy.deepcopy(comp)
    elsewhere = ex.episode(comp, "calls on the copy", n_envs=n_envs, n_replicas=n_replicas, max_steps=4)
    later = ex.episode(comp, "then on the original", n_envs=n_envs, n_replicas=n_replicas, max_steps=4)
    _play(ex, clone, elsewhere)
    for t, (a, b) in enumerate(zip(_play(ex, comp, later), _play(ex, twin, later), strict=True)):
        if not np.array_equal(a, b):
            ex.fail(f"calls on a deep copy changed the original: call {t} gives {_fmt(a)} instead of {_fmt(b)}")


# ---- the same maths in another array library ---------------------------------------------------
#: Libraries ``check_component(..., libraries=...)`` can compare with NumPy (imported only when asked).
LIBRARIES = ("torch", "jax")


def _library(name: str) -> tuple[Callable[[np.ndarray], Any], Any]:
    """A converter of NumPy arrays to ``name``'s arrays (float64 kept) and a context to run in."""
    import contextlib

    if name == "torch":
        import torch

        return (lambda a: torch.from_numpy(np.array(a))), contextlib.nullcontext()
    if name == "jax":
        import jax
        import jax.numpy as jnp

        return jnp.asarray, jax.enable_x64(True)  # float64 inputs stay float64
    raise ValueError(f"libraries: expected names among {', '.join(LIBRARIES)}, got {name!r}")


def _in_library(name: str) -> Callable[[_Example], None]:
    def check(ex: _Example) -> None:
        convert, context = _library(name)
        params = ex.params()
        reference, subject = ex.subject.build(params), ex.subject.build(params)
        steps = ex.episode(reference, "episode", max_steps=8)
        if name == "jax":  # XLA on CPU flushes subnormal numbers to zero: compare the others only
            assume(not any(_subnormal(v) for v in params.values())
                   and not any(_subnormal(v) for s in steps for v in s.inputs.values()))
        expected = _play(ex, reference, steps)
        with context:
            for t, (step, e) in enumerate(zip(steps, expected, strict=True)):
                inputs = {k: convert(v) for k, v in step.inputs.items()}
                term, trunc = convert(step.terminated), convert(step.truncated)
                out = subject.compute(inputs, term, trunc)
                if library_of(out) != name or str(out.dtype).rpartition(".")[2] != "float64" \
                        or tuple(out.shape) != e.shape:
                    ex.fail(f"compute on {name} float64 inputs returned {type(out).__name__} "
                            f"{getattr(out, 'dtype', '')} {tuple(getattr(out, 'shape', ()))} at call {t}, "
                            f"expected a {name} float64 array of shape {e.shape}")
                got = to_numpy(out)
                if not all(_close(float(g), float(w)) for g, w in zip(got, e, strict=True)):
                    ex.fail(f"{name} gives {_fmt(got)} at call {t}; NumPy gives {_fmt(e)}")
                done = step.terminated | step.truncated
                if done.any():
                    subject.reset(term | trunc)
        a, b = reference.state_dict(), subject.state_dict()
        if json.dumps(a) != json.dumps(b) and not _close_state(a, b):
            ex.fail(f"state_dict after the episode differs: {name} {b}, NumPy {a}")

    return check


def _subnormal(value: Any) -> bool:
    """Whether ``value`` (a number, sequence or array) holds a nonzero float below the normal range."""
    if isinstance(value, (list, tuple)):
        return any(_subnormal(v) for v in value)
    if isinstance(value, (int, float, np.ndarray)) and not isinstance(value, bool):
        a = np.abs(np.asarray(value, dtype=np.float64))
        return bool(np.any((a > 0) & (a < np.finfo(np.float64).tiny)))
    return False


def _close_state(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_close_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return _close(a, b)
    return a == b


#: promise name -> check, in the order they run.
PROMISES: dict[str, Callable[[_Example], None]] = {
    "finite outputs within output_range": _outputs,
    "monotone as declared": _monotone,
    "batched compute equals a loop over environments": _batched,
    "compute_fast equals compute": _fast_path,
    "scalar_fn equals compute": _scalar_path("scalar_fn"),
    "scalar_source equals compute": _scalar_path("scalar_source"),
    "scalar_block equals compute": _scalar_path("scalar_block"),
    "reset() restarts like a fresh instance": _reset,
    "state_dict round trip through JSON": _state_round_trip,
    "deep copies are independent": _deepcopy,
}


def check_component(component: type[BaseReward] | BaseReward, *, params: Mapping[str, Any] | None = None,
                    examples: int = 200, inputs: Mapping[str, Bounds] | None = None,
                    shrink: bool = True, derandomize: bool = True, libraries: tuple[str, ...] = ()) -> list[str]:
    """Check every promise of a component class (parameters drawn) or instance (parameters fixed).

    ``params`` fixes some parameters of a class (a value) or sets how they are drawn (a
    Hypothesis strategy); ``inputs`` narrows the sampling range of inputs by local name.
    ``examples`` is the number of Hypothesis examples per promise. ``shrink=False`` reports the
    first failing example as found (shrinking a failure can take many seconds). ``derandomize``
    (the default) draws the same examples on every run, so a check that passes in CI passes again
    and a component breaking two promises is always reported under the same one; ``False`` draws
    fresh examples each run (wider search over repeated runs). ``libraries`` (``("torch", "jax")``
    or a part) adds one promise per library: ``compute`` on that library's float64 arrays (CPU)
    returns its arrays with NumPy's numbers, over episodes with resets, and leaves the same
    ``state_dict``. Returns the names of the promises checked; raises :class:`ComponentCheckError`
    on the first broken one.
    """
    subject = _Subject(component, params, inputs)
    probe = subject.build(_first_params(subject, derandomize))
    checked = []
    for promise, check in PROMISES.items():
        if promise == "monotone as declared" and not (probe.monotone or type(probe).monotone):
            continue
        if promise.startswith("compute_fast") and (getattr(probe, "compute_fast", None) is None
                                                    or not written_for_its_compute(probe, "compute_fast")):
            continue
        if promise.startswith("scalar_source") and type(probe).scalar_source is BaseReward.scalar_source:
            continue
        if promise.startswith("scalar_block") and type(probe).scalar_block is BaseReward.scalar_block:
            continue
        _run(subject, promise, check, examples, shrink, derandomize)
        checked.append(promise)
    if libraries and probe.text_inputs:
        raise ValueError(f"{subject.label} reads text ({', '.join(sorted(probe.text_inputs))}): text is read on "
                         "the host, so libraries= does not apply")
    for name in libraries:
        promise = f"same numbers in {name}"
        _library(name)  # an unknown name or a missing library fails here, before any example
        _run(subject, promise, _in_library(name), examples, shrink, derandomize)
        checked.append(promise)
    return checked


def _first_params(subject: _Subject, derandomize: bool) -> dict[str, Any]:
    """Any valid parameters (to look at which hooks the class overrides)."""
    found: list[dict[str, Any]] = []

    @settings(max_examples=1, database=None, deadline=None, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), derandomize=derandomize)
    @given(subject.params)
    def first(p: dict[str, Any]) -> None:
        found.append(p)

    first()
    return found[0]


def _run(subject: _Subject, promise: str, check: Callable[[_Example], None], examples: int, shrink: bool,
         derandomize: bool) -> None:
    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]

    @settings(max_examples=examples, database=None, deadline=None, verbosity=Verbosity.quiet, phases=phases,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False, derandomize=derandomize)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        ex = _Example(data, subject)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                check(ex)
        except (_Broken, UnsatisfiedAssumption):
            raise
        except Exception as exc:  # noqa: BLE001 - any error on valid inputs breaks the promise
            try:
                ex.fail(f"raised {type(exc).__name__}: {exc}")
            except _Broken as broken:
                raise broken from exc

    try:
        run()
    except _Broken as exc:
        raise ComponentCheckError(subject.label, promise, str(exc)) from None
