"""``BaseReward``: the contract every reward component fulfils.

A component turns named context signals into one raw reward term per environment. It declares
its parameters (validated on construction), the inputs it reads with the number of axes one
environment's value has (0 for a float, 1 for a per-replica vector), its documented output range
and the direction in which it is monotone in each input. The composer hands ``compute`` arrays
with a leading environment axis, so one implementation serves scalar and vectorized use.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from .backend import (array_namespace, checking, copy_array, detached, kind, library_of, like as _like, to_numpy,
                      wide_float)
from .errors import ConfigError, RewardKitError
from .params import Param, describe, validate_params

Array = np.ndarray


class ComponentOutputError(RewardKitError, ValueError):
    """A component returned something other than one finite float per environment; names the term."""


def checked_output(value: Any, n_envs: int, term: str, finite: bool = True, like: Any = None) -> Array:
    """A component's batched result as a float array of shape ``(n_envs,)`` in the inputs' library.

    ``like`` is an input array (or the episode flags): the result must come from its library and
    takes its float dtype (float64 for NumPy when ``like`` is not a float array). Raises
    :class:`ComponentOutputError` naming ``term`` when the library or shape is wrong, the values
    are not real numbers, or (with ``finite``) any is NaN or infinite; that last check reads the
    values back from a device (see ``rewardkit.backend.checking``).
    """
    library = "numpy" if like is None else library_of(like) or "numpy"
    if library == "numpy":
        dtype = like.dtype if like is not None and like.dtype in (np.float32, np.float64) else np.float64
        if library_of(value) not in (None, "numpy"):
            raise ComponentOutputError(f"{term}: compute returned a {library_of(value)} array for NumPy inputs; "
                                       "compute in the inputs' library (xp = rewardkit.array_namespace(x))")
        try:
            arr = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError):
            raise ComponentOutputError(f"{term}: compute returned {type(value).__name__} {describe(value)}, expected "
                                       f"an array of {n_envs} floats (one per environment)") from None
    else:
        if library_of(value) != library:
            raise ComponentOutputError(
                f"{term}: compute returned {type(value).__name__} {describe(value)} for {library} inputs, expected a "
                f"{library} array of {n_envs} floats: compute in the inputs' library (xp = rewardkit.array_namespace(x))")
        xp = array_namespace(value)
        if not xp.isdtype(value.dtype, ("real floating", "integral")):
            raise ComponentOutputError(f"{term}: compute returned an array of dtype {value.dtype}, expected floats")
        arr = value if like is None or value.dtype == like.dtype or not xp.isdtype(like.dtype, "real floating") \
            else xp.astype(value, like.dtype)
        if not xp.isdtype(arr.dtype, "real floating"):
            arr = xp.astype(arr, wide_float(xp))
    if tuple(arr.shape) != (n_envs,):
        raise ComponentOutputError(f"{term}: compute returned shape {tuple(arr.shape)} for {n_envs} environment(s), "
                                   f"expected ({n_envs},): one raw value per environment")
    if finite and (library == "numpy" or checking()):
        ok = np.isfinite(arr) if library == "numpy" else array_namespace(arr).isfinite(arr)
        if not bool(ok.all()):
            host = to_numpy(arr)
            bad = int(np.flatnonzero(~np.isfinite(host))[0])
            raise ComponentOutputError(f"{term}: compute returned a non-finite value ({host[bad]}) for environment "
                                       f"{bad} from finite inputs")
    return arr


def check_scalar_output(value: float, term: str) -> None:
    """Raise :class:`ComponentOutputError` naming ``term`` for a non-finite one-environment result."""
    raise ComponentOutputError(f"{term}: the component returned {value} from finite inputs")


class BaseReward:
    """Base class of reward components.

    Subclasses set the class attributes below and implement :meth:`compute`. Stateful ones
    (``stateful = True``) keep one slot of state per environment and implement :meth:`reset`,
    :meth:`state_dict` and :meth:`load_state_dict`.
    """

    #: input name -> number of axes of one environment's value (0: float, 1: vector).
    inputs: ClassVar[dict[str, int]] = {}
    #: inputs that may be absent from the context (``compute`` then does not receive them).
    optional_inputs: ClassVar[frozenset[str]] = frozenset()
    #: inputs that hold text (declared with 0 axes): one ``str`` per environment. ``compute``
    #: receives a list of ``str`` for each, the one-environment function a ``str``.
    text_inputs: ClassVar[frozenset[str]] = frozenset()
    #: parameter name -> specification (default, doc, checker).
    params: ClassVar[dict[str, Param]] = {}
    #: documented closed range of the raw output (may be infinite).
    output_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    #: input name -> "increasing" or "decreasing": direction of monotonicity of the raw output.
    monotone: ClassVar[dict[str, str]] = {}
    #: input name -> closed range ``(low, high)`` of the values it accepts (absent: any finite float).
    #: ``rewardkit.testing`` samples inputs from it; values outside it may raise.
    input_domains: ClassVar[dict[str, tuple[float, float]]] = {}
    #: whether the component keeps per-environment state across calls.
    stateful: ClassVar[bool] = False
    #: a stateful component whose call, when it fails, fails before changing any state (so the
    #: composer need not snapshot it on the scalar path). Leave False unless that is certain.
    atomic_update: ClassVar[bool] = False
    #: registered name, set by :func:`rewardkit.register`.
    type_name: ClassVar[str] = ""
    #: a component that waits on I/O (a remote scorer): the composer awaits :meth:`compute_async`
    #: (never :meth:`compute`), concurrently with the call's other asynchronous terms.
    asynchronous: ClassVar[bool] = False

    def __init__(self, name: str | None = None, inputs: Mapping[str, str] | None = None, **params: Any) -> None:
        self.name = name or self.type_name or type(self).__name__
        self.config = validate_params(self.params, params, path="params")
        for key, value in self.config.items():
            setattr(self, key, value)
        self._validate()
        self.input_keys = self._resolve_inputs(inputs or {})

    # ---- hooks for subclasses --------------------------------------------------------------
    def _validate(self) -> None:
        """Cross-parameter checks; raise ``ConfigError(..., path='params.x')`` on failure."""

    def default_input_keys(self) -> dict[str, str]:
        """Context key each input is read from before user remapping (identity by default)."""
        return {name: name for name in self.inputs}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        """Return the raw term, shape ``(n_envs,)``, from inputs shaped ``(n_envs, ...)``.

        ``terminated`` and ``truncated`` are boolean arrays of shape ``(n_envs,)`` telling which
        environments end their episode with this call. The composer resets state afterwards.
        """
        raise NotImplementedError

    async def compute_async(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        """The raw term of an ``asynchronous = True`` component, like :meth:`compute` but awaited.

        ``x`` holds the term's inputs with a leading axis of n items (text inputs as lists of str).
        The composer gathers every asynchronous term of a call and computes the cheap terms while
        they are in flight.
        """
        raise NotImplementedError(f"{type(self).__name__} sets asynchronous = True but does not implement compute_async")

    def last_call_info(self) -> dict[str, float]:
        """Extra numbers about the last call (a remote term's latency, failures...), empty by default.

        The composer copies them into the breakdown as ``TermOutput.info``.
        """
        return {}

    def scalar_fn(self) -> Callable[..., float]:
        """A function ``f(*inputs, terminated, truncated) -> float`` for one environment.

        Inputs come positionally in the order of ``input_keys`` (floats, or lists of floats for
        vector inputs, a ``str`` for text inputs; ``None`` for an absent optional input). The
        default wraps :meth:`compute`; components override it with plain-float maths for speed,
        and the property tests check both paths agree.
        """
        names = list(self.input_keys)
        compute = self.compute
        term = self.name
        text = self.text_inputs

        def one_env(*args: Any) -> float:
            *values, terminated, truncated = args
            x = {n: [v] if n in text else np.asarray(v, dtype=np.float64)[None]
                 for n, v in zip(names, values, strict=True) if v is not None}
            out = checked_output(compute(x, np.array([terminated]), np.array([truncated])), 1, term, finite=False)
            return float(out[0])

        return one_env

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        """Optional Python expression of the one-environment output, inlined by the composer.

        ``args`` are the variable names holding the inputs (in ``input_keys`` order). Helpers the
        expression needs go into ``env``, a namespace of this term's own: the composer renames
        each name in it (``_exp`` becomes ``_<term>_exp``), so two components may use the same
        helper names. ``tag`` is a prefix unique to the term (``_<term>``) for temporaries:
        name them ``f"{tag}_z"``. Stateless components may return one to skip a function call
        per step; ``None`` (the default) uses :meth:`scalar_fn`. The result must be a float, and
        the code must not raise for finite float inputs other than as :meth:`scalar_fn` would.
        """
        return None

    def scalar_block(self, args: list[str], env: dict[str, Any], tag: str) -> tuple[list[str], str] | None:
        """Optional statements plus a result expression, inlined by the composer (for stateful ones).

        Like :meth:`scalar_source`, but the statements may read and write state; they run at one
        level of indentation, in order, before the result expression is read. For a vector input
        held in variable ``v`` (a list of floats), ``v_sum`` already holds ``sum(v)``; the call's
        episode flags are the booleans ``terminated`` and ``truncated``. A stateful
        component's statements must either raise before writing state or not at all, or leave
        ``atomic_update`` False (the composer then snapshots its state before the call).
        """
        return None

    def reset(self, mask: Array | None = None) -> None:
        """Forget per-environment state where ``mask`` is true (everywhere when ``None``)."""

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state (lists and plain Python numbers) that :meth:`load_state_dict` restores."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; raise ``ConfigError`` (naming the key) on bad data."""

    def snapshot(self) -> Any:
        """Everything a call may change; the composer hands it to :meth:`restore` when a call fails.

        The default copies :meth:`state_dict`; components holding a :class:`PerEnvState` return
        its (much cheaper) snapshot.
        """
        return copy.deepcopy(self.state_dict())

    def restore(self, saved: Any) -> None:
        """Put back what :meth:`snapshot` returned."""
        self.load_state_dict(saved)

    # ---- helpers --------------------------------------------------------------------------
    def _resolve_inputs(self, remap: Mapping[str, str]) -> dict[str, str]:
        keys = self.default_input_keys()
        if not isinstance(remap, Mapping):
            raise ConfigError(f"expected a mapping of input name to context key, got {describe(remap)}", path="inputs")
        for local, key in remap.items():
            if local not in keys:
                raise ConfigError(
                    f"unknown input {local!r}; {self.type_name or type(self).__name__} reads: "
                    + ", ".join(sorted(keys)),
                    path="inputs",
                )
            if not isinstance(key, str) or not key:
                raise ConfigError(f"expected a context key (non-empty string), got {describe(key)}", path=f"inputs.{local}")
            keys[local] = key
        return keys

    def to_dict(self) -> dict[str, Any]:
        """Config entry that rebuilds this component (type, params, non-default inputs)."""
        out: dict[str, Any] = {"type": self.type_name, "params": _plain(self.config)}
        remapped = {k: v for k, v in self.input_keys.items() if self.default_input_keys().get(k) != v}
        if remapped:
            out["inputs"] = remapped
        return out

    @classmethod
    def describe(cls) -> str:
        """First line of the class docstring: the one-line summary shown by ``rewardkit components``."""
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"{type(self).__name__}(name={self.name!r}, {args})"


class StateArrays(dict):
    """The per-environment state's arrays by slot name: every value written is :func:`detached`
    (state never holds an autograd graph; see :mod:`rewardkit.backend`)."""

    def __init__(self, arrays: Mapping[str, Any] = ()) -> None:
        super().__init__({k: detached(v) for k, v in dict(arrays).items()})

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, detached(value))


class PerEnvState:
    """Per-environment float slots, grown lazily to the batch size seen at the first call.

    The batched path holds one array per slot in the inputs' library, on their device and in
    their float dtype (``ensure(n, like=x)``; state loaded or kept from another library moves
    over at the first call that sees the new one). Updates assign new arrays
    (``s["mean"] = xp.where(...)``), which works for immutable JAX arrays too. The composer's
    scalar path uses a plain list of floats for its single environment (``scalar_slots()``),
    several times faster to read and write from Python. Both describe the same state and save to
    the same format: plain lists of Python floats.
    """

    def __init__(self, **initial: float) -> None:
        self._initial = dict(initial)
        self._arrays = StateArrays()
        self.slots: list[float] | None = None
        self._kind: tuple[Any, Any, Any] = (np.ndarray, np.dtype(np.float64), None)
        #: set by a component once every environment's slots hold a written value (no first
        #: step pending anywhere); cleared by any reset that may touch one. A host-side flag: a
        #: component may skip its first-step handling without reading a device.
        self.started_everywhere = False

    @property
    def arrays(self) -> StateArrays:
        """The state's arrays by slot name (what is written into them is detached from any graph)."""
        return self._arrays

    @arrays.setter
    def arrays(self, value: Mapping[str, Any]) -> None:
        self._arrays = value if isinstance(value, StateArrays) else StateArrays(value)

    def ensure(self, n_envs: int, like: Any = None) -> dict[str, Any]:
        """Return the state arrays, allocating them for ``n_envs`` environments if needed.

        ``like`` (an input array) sets the library, device and float dtype of the state (NumPy
        float64 without it); state of another kind is converted once, here.
        """
        if self.slots is not None:
            if n_envs != 1:
                raise ValueError(f"batch size changed from 1 to {n_envs}; call reset() before changing "
                                 "the number of environments")
            self.arrays = {k: np.array([v], dtype=np.float64) for k, v in zip(self._initial, self.slots, strict=True)}
            self._kind = (np.ndarray, np.dtype(np.float64), None)
            self.slots = None
            self.started_everywhere = False
        want = kind(like) if like is not None else (np.ndarray, np.dtype(np.float64), None)
        if not self.arrays:
            self._kind = want
            self.started_everywhere = False
            if like is None:
                self.arrays = {k: np.full(n_envs, v, dtype=np.float64) for k, v in self._initial.items()}
            else:
                xp = array_namespace(like)
                device = None if want[2] is None else want[2]
                self.arrays = {k: xp.full((n_envs,), v, dtype=like.dtype, device=device) if device is not None
                               else xp.full((n_envs,), v, dtype=like.dtype) for k, v in self._initial.items()}
            return self.arrays
        held = self.arrays[next(iter(self._initial))].shape[0]
        if held != n_envs:
            raise ValueError(f"batch size changed from {held} to {n_envs}; call reset() before changing the "
                             "number of environments")
        if want != self._kind:
            self.arrays = {k: _like(a, like) for k, a in self.arrays.items()}
            self._kind = want
        return self.arrays

    def scalar_slots(self) -> list[float]:
        """The single environment's state as a list of floats, in declaration order."""
        if self.slots is None:
            if self.arrays:
                n = self.n_envs()
                if n != 1:
                    raise ValueError(f"batch size changed from {n} to 1; call reset() before changing "
                                     "the number of environments")
                self.slots = [float(to_numpy(a)[0]) for a in self.arrays.values()]
                self.arrays = {}
            else:
                self.slots = list(self._initial.values())
        return self.slots

    def n_envs(self) -> int | None:
        """Number of environments held (None before the first call or after a full reset)."""
        if self.slots is not None:
            return 1
        return int(next(iter(self.arrays.values())).shape[0]) if self.arrays else None

    def reset(self, mask: Any = None) -> None:
        """Back to the initial values where ``mask`` is true (everywhere when None).

        A mask must have one entry per environment held (``ValueError`` otherwise); it may come
        from any library (it is moved to the state's, which costs a copy only if they differ).
        """
        if mask is None:
            self.arrays, self.slots = {}, None
            self.started_everywhere = False
            return
        self.started_everywhere = False
        if library_of(mask) is None:
            mask = np.asarray(mask, dtype=bool)
        held = self.n_envs()
        if held is not None and tuple(mask.shape) != (held,):
            raise ValueError(f"reset mask has shape {tuple(mask.shape)}; the state holds {held} environment(s)")
        if self.slots is not None:
            if bool(to_numpy(mask).any()):
                self.slots = None
            return
        if not self.arrays:
            return
        first = next(iter(self.arrays.values()))
        if kind(mask)[0::2] != kind(first)[0::2]:
            mask = _like(mask, first, dtype=array_namespace(first).bool)
        xp = array_namespace(first)
        for key, value in self._initial.items():
            self.arrays[key] = xp.where(mask, value, self.arrays[key])

    def state_dict(self) -> dict[str, Any]:
        """Plain lists of Python floats (one per environment), whatever library holds the state."""
        if self.slots is not None:
            return {k: [float(v)] for k, v in zip(self._initial, self.slots, strict=True)}
        return {k: [float(v) for v in to_numpy(a).tolist()] for k, a in self.arrays.items()}

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        """Restore :meth:`state_dict` output: every slot or none, one list of finite numbers per
        slot, all of one length. Validated before anything is written; the state moves to the
        inputs' library and device at the next call."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"expected a mapping of {', '.join(self._initial)} to lists, got {describe(state)}",
                              path=path or None)
        where = (lambda key: f"{path}.{key}" if path else key)  # noqa: E731
        for key in state:
            if key not in self._initial:
                raise ConfigError(f"unknown key; expected one of: {', '.join(self._initial)}", path=where(str(key)))
        if not state:
            self.arrays, self.slots = {}, None
            self.started_everywhere = False
            return
        arrays: dict[str, Array] = {}
        for key in self._initial:
            if key not in state:
                raise ConfigError("missing key (give every slot or none)", path=where(key))
            values = state[key]
            if not isinstance(values, (list, tuple)) or not values:
                raise ConfigError(f"expected a non-empty list of finite numbers, got {describe(values)}", path=where(key))
            for i, v in enumerate(values):
                if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not _finite(v):
                    raise ConfigError(f"expected a finite number, got {describe(v)}", path=f"{where(key)}[{i}]")
            arrays[key] = np.array([float(v) for v in values], dtype=np.float64)
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) != 1:
            raise ConfigError(f"expected lists of one length (one entry per environment), got lengths "
                              f"{sorted(lengths)}", path=path or None)
        self.slots = None
        self.arrays = arrays
        self._kind = (np.ndarray, np.dtype(np.float64), None)
        self.started_everywhere = False

    def snapshot(self) -> tuple[dict[str, Any], list[float] | None, tuple[Any, Any, Any]]:
        """A copy of the state, for :meth:`restore` (cheap: a few floats or arrays)."""
        return ({k: copy_array(a) for k, a in self.arrays.items()},
                None if self.slots is None else list(self.slots), self._kind, self.started_everywhere)

    def restore(self, saved: tuple[dict[str, Any], list[float] | None, tuple[Any, Any, Any], bool]) -> None:
        """Put back what :meth:`snapshot` returned."""
        arrays, slots, held_kind, started = saved
        self.arrays = {k: copy_array(a) for k, a in arrays.items()}
        self.slots = None if slots is None else list(slots)
        self._kind = held_kind
        self.started_everywhere = started


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _plain(value: Any) -> Any:
    """Convert tuples (from validated params) back to lists so configs stay YAML-friendly."""
    if isinstance(value, tuple):
        return [None if (isinstance(v, float) and math.isinf(v)) else v for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


#: the faster copies of ``compute`` a component may provide; the composer calls them instead of it
SPEED_HOOKS = ("compute_fast", "scalar_fn", "scalar_source", "scalar_block")


def written_for_its_compute(component: BaseReward, hook: str) -> bool:
    """Whether ``component``'s ``hook`` (one of :data:`SPEED_HOOKS`) was written for the ``compute`` it has.

    A class that overrides ``compute`` below a built-in component does not inherit the built-in's
    faster copies of the old ``compute`` (its own hooks, or the defaults, which call ``compute``);
    built-in components and a user's own hooks are trusted (``rewardkit check`` proves them)."""
    cls = type(component)
    owner = next((c for c in cls.__mro__ if hook in c.__dict__), BaseReward)
    if owner is BaseReward or owner is cls or not owner.__module__.startswith("rewardkit."):
        return True
    return cls.__module__.startswith("rewardkit.") or cls.compute is owner.compute
