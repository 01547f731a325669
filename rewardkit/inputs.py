"""Input checks: how ``RewardComposer`` reads, checks and converts a context and episode flags.

``InputChecks`` is mixed into ``RewardComposer``; the module-level helpers are also used by the
generated single-environment function (see ``rewardkit.codegen``). Every check raises an
``InvalidInputError``/``MissingInputError``/``NonFiniteInputError`` naming the context key and
the terms that read it, before any state changes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .backend import (all_finite, array_namespace, check_one_library, device_of, evaluating, library_of, like, maybe_any,
                      to_numpy, wide_float)
from .errors import ConfigError, InvalidInputError, MissingInputError, NonFiniteInputError
from .params import describe

Array = np.ndarray
_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)


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
        if kind == "f":  # float32 stays float32 (the dtype policy); other floats compute in float64
            return arr if arr.dtype == _F64 or arr.dtype == _F32 else arr.astype(np.float64)
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

    def _call_vector(self, ctx: Mapping[str, Any], step: int, terminated: Any, truncated: Any,
                     start: Any = None) -> tuple[Any, list[Any], int | None]:
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        inputs, batch, dtype = self._vector_inputs(ctx)
        n = batch if batch is not None else 1
        ref = next((a for a in inputs if a is not None), None)
        if terminated is None and truncated is None:
            term = trunc = done = self._no_flags(n, ref)
        else:
            term = _flags(terminated, n, "terminated", ref)
            trunc = _flags(truncated, n, "truncated", ref)
            done = term | trunc
        if self._guarded:
            with self._transaction(self._guarded):
                total, values = self._vector_step(inputs, step, term, trunc, done, dtype, start)
        else:
            total, values = self._vector_step(inputs, step, term, trunc, done, dtype, start)
        if batch is None:
            values = [v if isinstance(v, (int, float)) else float(to_numpy(v)[0]) for v in values]
            return float(to_numpy(total)[0]), values, None
        return total, values, n

    def _vector_inputs(self, ctx: Mapping[str, Any]) -> tuple[list[Any], int | None, Any]:
        """Each context key as a checked float array of the context's library with a leading
        environment axis, the batch size (``None`` when no input has an environment axis) and
        the float dtype of the call.

        Dtype policy: float32 if every array input is float32, else float64 (float32 in JAX
        without x64); Python numbers and lists follow the arrays. The only checks that read
        values (and so synchronise with a device) are the NaN/inf check (off with
        ``allow_nonfinite``) and components' domain checks; ``check_inputs=False`` skips them.
        """
        library = check_one_library(ctx, self._readers)
        host = library in (None, "numpy")
        raw: list[Any] = []
        for key, _, optional, _ in self._slot_info:
            if key not in ctx:
                if not optional:
                    self._raise_missing(ctx, KeyError(key))
                raw.append(None)
            else:
                raw.append(ctx[key])
        if host:
            inputs: list[Any] = [None if value is None else self._as_float_array(value, key)
                                 for (key, *_), value in zip(self._slot_info, raw, strict=True)]
            dtypes = {a.dtype for a, v in zip(inputs, raw, strict=True) if a is not None and library_of(v) is not None}
            dtype = _F32 if dtypes == {_F32} else _F64
            if _F32 in dtypes or dtype is _F32:
                inputs = [a if a is None or a.dtype == dtype else a.astype(dtype) for a in inputs]
            xp, device = np, None
        else:
            xp = array_namespace(*(v for v in raw if library_of(v) is not None))
            ref = next(v for v in raw if library_of(v) == library)
            device = device_of(ref)
            inputs, dtype = self._library_inputs(raw, xp, device)
        batch = self._check_shapes(inputs, xp)
        n = batch if batch is not None else 1
        for j, ((_, nd, _, _), arr) in enumerate(zip(self._slot_info, inputs, strict=True)):
            if arr is not None and arr.ndim == nd:
                inputs[j] = xp.broadcast_to(arr, (n,) + tuple(arr.shape))
        return inputs, batch, dtype

    def _library_inputs(self, raw: list[Any], xp: Any, device: Any) -> tuple[list[Any], Any]:
        """The context's values as float arrays of a non-NumPy library on ``device``, and their dtype."""
        wide = wide_float(xp)
        floats = set()
        for (key, *_), value in zip(self._slot_info, raw, strict=True):
            if value is None or library_of(value) is None:
                continue
            if xp.isdtype(value.dtype, "real floating"):
                floats.add(value.dtype)
            elif not xp.isdtype(value.dtype, "integral"):
                raise self._bad_input(key, value, f"an array of real numbers, not of dtype {value.dtype}")
        dtype = xp.float32 if floats == {xp.float32} else wide
        inputs: list[Any] = []
        for (key, *_), value in zip(self._slot_info, raw, strict=True):
            if value is None:
                inputs.append(None)
            elif library_of(value) is None:  # Python numbers and lists: copied to the device each call
                inputs.append(xp.asarray(self._as_float_array(value, key), dtype=dtype, device=device))
            else:
                inputs.append(value if value.dtype == dtype else xp.astype(value, dtype))
        return inputs, dtype

    def _check_shapes(self, inputs: list[Any], xp: Any) -> int | None:
        """Check each input's axes, the batch size they agree on and (unless allowed) finiteness."""
        batch: int | None = None
        check_values = not self.allow_nonfinite and (xp is np or self.check_inputs)
        for (key, nd, _, (name, local, _, _)), arr in zip(self._slot_info, inputs, strict=True):
            if arr is None:
                continue
            shape = tuple(arr.shape)
            if len(shape) < nd or len(shape) > nd + 1:
                raise InvalidInputError(
                    f"context key {key!r} (read by {name}, input {local!r}): expected {nd} axes per "
                    f"environment plus an optional leading environment axis, got shape {shape}")
            if len(shape) == nd + 1:
                if shape[0] == 0:
                    raise InvalidInputError(f"context key {key!r}: expected at least one environment on the "
                                            f"leading axis, got an empty batch (shape {shape})")
                if batch is None:
                    batch = shape[0]
                elif shape[0] != batch:
                    raise InvalidInputError(f"context key {key!r}: expected {batch} environments on the leading "
                                            f"axis like the other inputs, got shape {shape}")
        if check_values:  # reads one number back from a device: the call's one synchronisation
            present = [a for a in inputs if a is not None]
            if not all_finite(*present):
                for (key, *_), arr in zip(self._slot_info, inputs, strict=True):
                    if arr is not None and not all_finite(arr):
                        self._nonfinite(key, to_numpy(arr))
        return batch

    def _vector_step(self, inputs: list[Any], step: int, term: Any, trunc: Any, done: Any, dtype: Any = None,
                     start: Any = None) -> tuple[Any, list[Any]]:
        """The compiled batched function, then episode ends clear the state of those environments.

        ``start`` launches the asynchronous terms (the composer's background loop by default)."""
        with evaluating(self.check_inputs, dtype):
            total, values = self._vector_fn(*inputs, step, term, trunc, done, start or self._async_loop.start)
        if self._stateful and maybe_any(done):  # on a device: a where() per state array, no sync
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


def _bool_array(value: Any, what: str) -> Any:
    """``value`` as a boolean array (NumPy, or the library it comes from); anything but booleans
    raises ``InvalidInputError``."""
    library = library_of(value)
    if library not in (None, "numpy"):
        if not array_namespace(value).isdtype(value.dtype, "bool"):
            raise InvalidInputError(f"{what}: expected a boolean or an array of booleans, got "
                                    f"{type(value).__name__} of dtype {value.dtype}")
        return value
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
    if library_of(value) not in (None, "numpy"):
        raise _NotScalar  # a torch/JAX flag: the batched path (which checks its dtype)
    return bool(_bool_array(value, what))


def _flags(value: Any, n: int, what: str, ref: Any = None) -> Any:
    """Episode flags as a boolean array of ``n`` environments in the library and on the device of
    ``ref`` (an input array; NumPy when ``None``). Flags from elsewhere are copied there."""
    numpy_ref = ref is None or isinstance(ref, np.ndarray)
    if value is None:
        if numpy_ref:
            return np.zeros(n, dtype=bool)
        xp = array_namespace(ref)
        return xp.zeros((n,), dtype=xp.bool, device=device_of(ref))
    arr = _bool_array(value, what)
    if arr.ndim == 0:
        full = bool(to_numpy(arr))
        if numpy_ref:
            return np.full(n, full)
        xp = array_namespace(ref)
        return xp.full((n,), full, dtype=xp.bool, device=device_of(ref))
    if tuple(arr.shape) != (n,):
        raise InvalidInputError(f"{what}: expected shape ({n},) like the context, got {tuple(arr.shape)}")
    if numpy_ref:
        return arr if isinstance(arr, np.ndarray) else to_numpy(arr)
    if library_of(arr) != library_of(ref) or device_of(arr) != device_of(ref):
        arr = like(arr, ref, dtype=array_namespace(ref).bool)
    return arr
