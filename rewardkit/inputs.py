"""Input checks: how ``RewardComposer`` reads, checks and converts a context and episode flags.

``InputChecks`` is mixed into ``RewardComposer``; the module-level helpers are also used by the
generated single-environment function (see ``rewardkit.codegen``). Every check raises an
``InvalidInputError``/``MissingInputError``/``NonFiniteInputError`` naming the context key and
the terms that read it, before any state changes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .backend import check_one_library, library_of
from .errors import ConfigError, InvalidInputError, MissingInputError, NonFiniteInputError
from .params import describe

Array = np.ndarray
_F64 = np.dtype(np.float64)


class _NotScalar(Exception):
    """Raised by the compiled scalar path when the context holds arrays (before any state moves)."""


_ABSENT = object()  # an optional context key that is not in the context
#: Largest step accepted (the int64 range, as step counters elsewhere).
MAX_STEP = 2**63 - 1


def _config_path(term_name: str) -> str:
    """The key path of a term in a config: ``components.<group>.components.<term>``."""
    return "components." + ".components.".join(term_name.split("/"))



class InputChecks:
    """The composer's context reading and checking (a mixin of ``RewardComposer``)."""

    # ---- input checks -----------------------------------------------------------------------
    def batch_size(self, ctx: Mapping[str, Any]) -> int | None:
        """The number of environments ``ctx`` holds (its inputs' leading axis), ``None`` for one.

        Reads shapes only: nothing is evaluated and no state changes, so wrappers can check a
        context before the call. Values whose shape cannot be read (ragged lists) are left to
        the call's own checks.
        """
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        for key, nd, _, _ in self._slot_info:
            if key in ctx:
                try:
                    shape = np.shape(ctx[key])
                except (ValueError, TypeError):
                    continue
                if len(shape) == nd + 1:
                    return int(shape[0])
        return None

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
        if library_of(value) not in (None, "numpy"):
            raise _NotScalar  # another library's array: the batched path names it (and a mixed context)
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
        library = check_one_library(ctx, self._readers)
        if library not in (None, "numpy"):
            key = next(k for k in self._readers if k in ctx and library_of(ctx[k]) == library)
            raise InvalidInputError(
                f"context key {key!r} (read by {self._read_by(key)}) is a {library} array; the batched path "
                f"computes in NumPy only so far: pass NumPy arrays (for example tensor.cpu().numpy())")
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


def _check_step(step: Any) -> int:
    """A step is an integer in [0, MAX_STEP] (NumPy integers accepted); refused before anything moves."""
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise InvalidInputError(f"step: expected a non-negative integer, got {type(step).__name__} {describe(step)}")
    step = int(step)
    if not 0 <= step <= MAX_STEP:
        raise InvalidInputError(f"step: expected a non-negative integer up to 2**63-1, got {describe(step)}")
    return step


def _plain_floats(value: list[Any]) -> list[float] | None:
    """A flat list of Python floats and ints as a new list of floats, or ``None`` when the list
    needs the full checks (booleans, NumPy scalars, nested lists, ints beyond the float range)."""
    for item in value:
        if item.__class__ is not float and item.__class__ is not int:
            return None
    try:
        return [*map(float, value)]
    except OverflowError:
        return None


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
