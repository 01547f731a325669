"""The input reader: how a composer reads, checks and converts a context and its episode flags.

:class:`InputReader` is built once from the config's terms (which context key each reads, with
how many axes, whether optional, whether text) and is held by the composer; the compiled plan
(``rewardkit.compose``) calls its public methods from the generated single-environment function.
Every check raises an ``InvalidInputError``/``MissingInputError``/``NonFiniteInputError`` naming
the context key and the terms that read it, before any state changes.

Numbers: a float (one environment) or an array with a leading environment axis, in any array
library. Text (inputs a component lists in ``text_inputs``): a ``str`` for one environment, a list
(or 1-D NumPy array) of ``str`` for a batch; numbers there are read as text (``72`` and ``72.0``
as ``"72"``: a dataset's integer answer column feeds a text term); anything else is an
``InvalidInputError``. Text is read on the host as Python lists of ``str``.
"""

from __future__ import annotations

from collections import abc
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from .applies import number_text
from .backend import (all_finite, array_namespace, check_one_library, device_of, library_of, like, to_numpy,
                      wide_float)
from .config import TermNode
from .errors import ConfigError, InvalidInputError, MissingInputError, NonFiniteInputError
from .params import describe

Array = np.ndarray
F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
BOOL = np.dtype(bool)


class NotScalar(Exception):
    """Raised by the compiled single-environment path when the context holds a batch (before any
    state moves): the composer then takes the batched path."""


#: Marks an optional context key that is not in the context (the generated code tests ``is ABSENT``).
ABSENT = object()


#: the digits of the integers answer columns mostly hold, written once: looking them up is about
#: three times quicker than writing them (filled on first use; str(i) for any other integer)
_DIGITS: dict[int, str] = {}
_DIGITS_RANGE = range(-999, 10_000)


def integer_texts(values: list[int]) -> list[str]:
    """``[str(i) for i in values]`` for a list of Python ``int`` (exactly ``int``, not bool)."""
    if not _DIGITS:
        _DIGITS.update(zip(_DIGITS_RANGE, map(str, _DIGITS_RANGE), strict=True))
    try:
        return [*map(_DIGITS.__getitem__, values)]
    except KeyError:  # an integer beyond the table
        return [*map(str, values)]


class IntegerColumn(list):
    """A batch text input given as a column of Python integers, kept as the integers (a copy) for a
    component that compares numbers: read only by components listing the input in
    ``integer_text_inputs`` (every reader of the key), which would otherwise read ``str(i)``."""

    __slots__ = ()

    def texts(self) -> list[str]:
        """The column as any other text input reads it: each integer's digits."""
        return integer_texts(self)


class TextColumn(list):
    """A batch text input its maker has already checked to hold only ``str`` (an integration that
    had to look at every item anyway, to turn chat messages into text): read as it is, without a
    second pass over the items. Build one only from items checked to be ``str``."""

    __slots__ = ()


class TokenIdColumn(list):
    """A batch text input given as token-id sequences standing for their texts (each sequence's
    ids written with ``str`` and joined by spaces, ``"12 7 7"``): read as those texts, or as the
    sequences by components listing the input in ``token_id_inputs`` (every reader of the key)."""

    __slots__ = ()

    def texts(self) -> list[str]:
        """The texts the sequences stand for."""
        return [" ".join(map(str, ids)) for ids in self]


#: Largest step accepted (the int64 range, as step counters elsewhere).
MAX_STEP = 2**63 - 1


def config_path(term_name: str) -> str:
    """The key path of a term in a config: ``components.<group>.components.<term>``."""
    return "components." + ".components.".join(term_name.split("/"))


class Reader(NamedTuple):
    """One term input reading a context key."""

    term: str
    local: str
    ndim: int
    optional: bool
    text: bool


class InputSlot(NamedTuple):
    """One context key the composer reads: per-environment axes, whether every reader is
    optional, whether it is text, and the first term reading it (named in errors)."""

    key: str
    ndim: int
    optional: bool
    text: bool
    first: Reader


class BatchInputs(NamedTuple):
    """A batched call's checked inputs: one value per slot (an array with the environment axis,
    a list of ``str`` for text, ``None`` for an absent optional key), the batch size (``None``
    when nothing had an environment axis) and the call's float dtype."""

    values: list[Any]
    batch: int | None
    dtype: Any


class InputReader:
    """Reads and checks a context for a fixed set of terms.

    ``slots`` lists the context keys in the order the compiled functions take them. Errors name
    the key, the terms reading it and (for a missing key) what the context holds; ``source`` (the
    config file) prefixes missing-key messages.
    """

    def __init__(self, leaves: Iterable[TermNode], *, source: str | None = None, allow_nonfinite: bool = False,
                 check_inputs: bool = True) -> None:
        self.source = source
        self.allow_nonfinite = allow_nonfinite
        self.check_inputs = check_inputs
        leaves = list(leaves)
        self.readers = self._collect_readers(leaves)
        self.slots = [InputSlot(key, rs[0].ndim, all(r.optional for r in rs), rs[0].text, rs[0])
                      for key, rs in self.readers.items()]
        #: text keys read as an :class:`IntegerColumn` when given a column of integers
        self.integer_keys = self._keys_read_as(leaves, "integer_text_inputs")
        #: text keys whose items may be ``None`` (a sample without one; its readers score it themselves)
        self.none_keys = self._keys_read_as(leaves, "none_text_inputs")
        #: text keys read as a :class:`TokenIdColumn`'s sequences when given one
        self.token_id_keys = self._keys_read_as(leaves, "token_id_inputs")
        self._numeric_keys = [slot.key for slot in self.slots if not slot.text]
        self._numeric_slots = [j for j, slot in enumerate(self.slots) if not slot.text]
        self._false_flags: dict[Any, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_false_flags": {}}

    # ---- what is read ---------------------------------------------------------------------------
    def keys(self) -> set[str]:
        """Every context key some term reads (optional ones included)."""
        return set(self.readers)

    def required_keys(self) -> set[str]:
        """Context keys that must be present."""
        return {k for k, rs in self.readers.items() if any(not r.optional for r in rs)}

    @staticmethod
    def _keys_read_as(leaves: list[TermNode], attribute: str) -> set[str]:
        """Text keys whose every reader (applies_to columns included) lists the input in its
        component's ``attribute`` (``integer_text_inputs``, ``token_id_inputs``)."""
        accepting: set[str] = set()
        refusing: set[str] = set()
        for node in leaves:
            comp = node.component
            listed = getattr(comp, attribute, frozenset())
            for local, key in comp.input_keys.items():
                (accepting if local in listed else refusing).add(key)
            refusing.update(node.applies_to or ())
        return accepting - refusing

    def _collect_readers(self, leaves: list[TermNode]) -> dict[str, list[Reader]]:
        readers: dict[str, list[Reader]] = {}
        for node in leaves:
            comp = node.component
            # a term's applies_to columns are read as its text inputs, named "applies_to.<key>"
            read = [(local, key, Reader(node.name, local, comp.inputs[local], local in comp.optional_inputs,
                                        local in comp.text_inputs)) for local, key in comp.input_keys.items()]
            read += [(f"applies_to.{key}", key, Reader(node.name, f"applies_to.{key}", 0, False, True))
                     for key in (node.applies_to or ())]
            for local, key, here in read:
                where = f"{config_path(node.name)}.{local if local.startswith('applies_to.') else 'inputs.' + local}"
                for other in readers.get(key, []):
                    if other.text != here.text:
                        kinds = ("text", "numbers") if here.text else ("numbers", "text")
                        raise ConfigError(
                            f"context key {key!r} is read as {kinds[0]} here but as {kinds[1]} by {other.term} "
                            f"(input {other.local!r}); one key holds one kind of value",
                            source=self.source, path=where)
                    if other.ndim != here.ndim:
                        raise ConfigError(
                            f"context key {key!r} is read with {here.ndim} axes per environment here but with "
                            f"{other.ndim} by {other.term} (input {other.local!r}); one key has one shape",
                            source=self.source, path=where)
                readers.setdefault(key, []).append(here)
        return readers

    def read_by(self, key: str) -> str:
        """The terms reading ``key``, for messages."""
        return ", ".join(sorted({r.term for r in self.readers.get(key, [])}))

    # ---- errors -----------------------------------------------------------------------------------
    def nonfinite(self, key: str, value: Any) -> None:
        """Raise the ``NonFiniteInputError`` of a NaN/inf value of ``key``."""
        raise NonFiniteInputError(
            f"context key {key!r} (read by {self.read_by(key)}) is not finite: {describe(value)}; "
            "pass allow_nonfinite=True to the composer to accept NaN/inf")

    def bad_input(self, key: str, value: Any, expected: str) -> InvalidInputError:
        """The ``InvalidInputError`` of a value of ``key`` that is not what was ``expected``."""
        return InvalidInputError(f"context key {key!r} (read by {self.read_by(key)}): expected {expected}, "
                                 f"got {type(value).__name__} {describe(value)}")

    def raise_missing(self, ctx: Mapping[str, Any], exc: KeyError) -> None:
        """Raise ``MissingInputError`` for the first required key ``ctx`` lacks (else re-raise ``exc``)."""
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        for key, readers in self.readers.items():
            needed_by = [f"{r.term} (input {r.local!r})" for r in readers if not r.optional]
            if needed_by and key not in ctx:
                where = f"{self.source}: " if self.source else ""
                raise MissingInputError(
                    f"{where}context is missing key {key!r}, needed by " + ", ".join(needed_by)
                    + f"; context has: {', '.join(sorted(map(str, ctx))) or 'nothing'}"
                ) from None
        raise exc

    # ---- one environment (called by the compiled single-environment function) -----------------------
    def batch_size(self, ctx: Mapping[str, Any]) -> int | None:
        """The number of environments ``ctx`` holds (its inputs' leading axis), ``None`` for one.

        Reads shapes only: nothing is evaluated and no state changes, so wrappers can check a
        context before the call. Values whose shape cannot be read (ragged lists) are left to
        the call's own checks.
        """
        if not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        for slot in self.slots:
            if slot.key in ctx:
                value = ctx[slot.key]
                if slot.text:
                    if isinstance(value, (list, tuple, np.ndarray)):
                        return len(value)
                    continue
                try:
                    shape = np.shape(value)
                except (ValueError, TypeError):
                    continue
                if len(shape) == slot.ndim + 1:
                    return int(shape[0])
        return None

    def scalar_number(self, value: Any, key: str) -> float:
        """A one-environment number as a Python float; arrays and lists mean a batch (``NotScalar``)."""
        if isinstance(value, (bool, np.bool_)):
            raise self.bad_input(key, value, "a number (booleans are not numbers here)")
        if isinstance(value, (int, float, np.integer, np.floating)):
            try:
                return float(value)
            except OverflowError:
                raise self.bad_input(key, value, "a number within the float64 range") from None
        if isinstance(value, (list, tuple)):
            raise NotScalar
        if library_of(value) not in (None, "numpy"):
            raise NotScalar  # another library's array: the batched path names it (and a mixed context)
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "fiu":
                raise self.bad_input(key, value, f"an array of real numbers, not of dtype {value.dtype}")
            if value.ndim == 0:
                return float(value)
            raise NotScalar
        raise self.bad_input(key, value, "a number or an array of numbers")

    def scalar_vector(self, value: Any, key: str, nd: int) -> Any:
        """A one-environment vector input as (nested) lists of floats; more axes mean a batch."""
        arr = self.as_float_array(value, key)
        if arr.ndim != nd:
            raise NotScalar  # a batch, or a shape the batched path reports
        return arr.tolist()

    def scalar_text(self, value: Any, key: str) -> str:
        """A one-environment text input (a ``str``, or a number read as text: see :func:`number_text`);
        a list or array of them means a batch."""
        if isinstance(value, str):
            return str(value)
        if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
            raise NotScalar
        if value is None and key in self.none_keys:
            return None  # type: ignore[return-value] - a sample without this text, read as None
        text = number_text(value)
        if text is None:
            raise self.bad_input(key, value, "text (a str or a number, or a list of them for a batch)")
        return text

    # ---- a batch -----------------------------------------------------------------------------------
    def as_float_array(self, value: Any, key: str) -> Array:
        """``value`` as a float64 array; strings, booleans, None, complex numbers and other
        non-numbers raise ``InvalidInputError`` naming the key and the terms that read it."""
        if value.__class__ is np.ndarray and value.dtype is F64:
            return value
        if isinstance(value, (str, bytes, dict, bool, np.bool_)) or value is None:
            raise self.bad_input(key, value, "a number or an array of numbers")
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            raise self.bad_input(key, value, "a number or a rectangular array of numbers") from None
        kind = arr.dtype.kind
        if kind == "f":  # float32 stays float32 (the dtype policy); other floats compute in float64
            return arr if arr.dtype == F64 or arr.dtype == F32 else arr.astype(np.float64)
        if kind in "iu":
            return arr.astype(np.float64)
        if kind == "O":  # Python ints beyond int64, or mixed objects: each must be a real number
            if any(isinstance(x, (list, tuple, np.ndarray)) for x in arr.reshape(-1)):
                raise self.bad_input(key, value, "a number or a rectangular array of numbers")
            flat = [self.scalar_number(x, key) for x in arr.reshape(-1)]
            return np.array(flat, dtype=np.float64).reshape(arr.shape)
        raise self.bad_input(key, value, f"real numbers, not an array of dtype {arr.dtype}")

    def text_list(self, value: Any, key: str, integers: bool = False) -> list[str] | str:
        """A batch of text as a list of ``str`` (one ``str`` or number stays one, broadcast later);
        with ``integers``, a column of Python integers as an :class:`IntegerColumn`."""
        if value.__class__ is TextColumn:  # checked by its maker: every item a str
            return value
        if isinstance(value, str):
            return value
        if value.__class__ is TokenIdColumn:
            return value if key in self.token_id_keys else value.texts()
        single = number_text(value)
        if single is not None:
            return single
        if isinstance(value, np.ndarray):
            if value.ndim != 1 or value.dtype.kind not in "UOiuf":
                raise self.bad_input(key, value, "text: a 1-D array of str or numbers")
            if value.dtype.kind in "iu":  # integers: their digits
                return [*map(str, value.tolist())]
            value = value.tolist()
        elif isinstance(value, tuple):
            value = list(value)
        elif not isinstance(value, list):
            raise self.bad_input(key, value, "text (a str, or a list of str for a batch)")
        return self._text_items(value, key, integers)

    def _text_items(self, value: list[Any], key: str, integers: bool) -> list[str]:
        """A list of text items checked: each a str, or a number written as text in a copy."""
        kinds = [*map(type, value)]  # one C pass (and a count): the common cases are all str or all int
        n = len(kinds)
        first = kinds[0] if n else str  # (a count of what the first item is not would compare every type)
        if first is str and kinds.count(str) == n:
            return value
        if first is int and kinds.count(int) == n:  # an integer column (answers): digits, or integers for number readers
            return IntegerColumn(value) if integers else integer_texts(value)
        copied = None  # numbers are written as text into a copy, never into the caller's list
        none_ok = key in self.none_keys  # None items kept: samples without this text
        for i, item in enumerate(value):
            if item.__class__ is not str and not isinstance(item, str) and not (item is None and none_ok):
                text = number_text(item)
                if text is None:
                    raise InvalidInputError(f"context key {key!r} (read by {self.read_by(key)}): expected text (a "
                                            f"str or a number) at index {i}, got {type(item).__name__} {describe(item)}")
                if copied is None:
                    copied = list(value)
                copied[i] = text
        return value if copied is None else copied

    def read_batch(self, ctx: Mapping[str, Any]) -> BatchInputs:
        """Each context key as a checked float array of the context's library with a leading
        environment axis (text as a list of ``str``), the batch size and the call's float dtype.

        Dtype policy: float32 if every array input is float32, else float64 (float32 in JAX
        without x64); Python numbers and lists follow the arrays. The only checks that read
        values (and so synchronise with a device) are the NaN/inf check (off with
        ``allow_nonfinite``) and components' domain checks; ``check_inputs=False`` skips them.
        """
        if ctx.__class__ is not dict and not isinstance(ctx, abc.Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got {type(ctx).__name__}")
        raw: list[Any] = []
        all_f64 = True  # the common case: every value a float64 NumPy array, nothing to convert
        for slot in self.slots:
            value = ctx.get(slot.key, ABSENT)
            if value is ABSENT:
                if not slot.optional:
                    self.raise_missing(ctx, KeyError(slot.key))
                value = None
            elif slot.text:
                value = self.text_list(value, slot.key, slot.key in self.integer_keys)
            elif value.__class__ is not np.ndarray or value.dtype is not F64:
                all_f64 = False
            raw.append(value)
        library = "numpy" if all_f64 else check_one_library(ctx, self._numeric_keys)
        if all_f64:
            inputs, dtype = raw, F64
            xp: Any = np
        elif library in (None, "numpy"):
            inputs, dtype = self._host_inputs(raw)
            xp = np
        else:
            xp = array_namespace(*(v for s, v in zip(self.slots, raw, strict=True)
                                   if not s.text and library_of(v) is not None))
            ref = next(v for s, v in zip(self.slots, raw, strict=True) if not s.text and library_of(v) == library)
            inputs, dtype = self._library_inputs(raw, xp, device_of(ref))
        batch = self._check_shapes(inputs, xp)
        n = batch if batch is not None else 1
        for j, (slot, arr) in enumerate(zip(self.slots, inputs, strict=True)):
            if arr is None:
                continue
            if slot.text:
                if isinstance(arr, str):
                    inputs[j] = [arr] * n
            elif arr.ndim == slot.ndim:
                if inputs is raw:
                    inputs = list(raw)
                inputs[j] = xp.broadcast_to(arr, (n,) + tuple(arr.shape))
        return BatchInputs(inputs, batch, dtype)

    def _host_inputs(self, raw: list[Any]) -> tuple[list[Any], Any]:
        """The context's values as NumPy float arrays (float32 kept when every array is float32), and their dtype."""
        inputs = [value if value is None or slot.text else self.as_float_array(value, slot.key)
                  for slot, value in zip(self.slots, raw, strict=True)]
        dtypes = {a.dtype for slot, a, v in zip(self.slots, inputs, raw, strict=True)
                  if a is not None and not slot.text and library_of(v) is not None}
        dtype = F32 if dtypes == {F32} else F64
        if F32 in dtypes or dtype is F32:
            inputs = [a if a is None or s.text or a.dtype == dtype else a.astype(dtype)
                      for s, a in zip(self.slots, inputs, strict=True)]
        return inputs, dtype

    def _library_inputs(self, raw: list[Any], xp: Any, device: Any) -> tuple[list[Any], Any]:
        """The context's values as float arrays of a non-NumPy library on ``device``, and their dtype."""
        wide = wide_float(xp)
        floats = set()
        for slot, value in zip(self.slots, raw, strict=True):
            if value is None or slot.text or library_of(value) is None:
                continue
            if xp.isdtype(value.dtype, "real floating"):
                floats.add(value.dtype)
            elif not xp.isdtype(value.dtype, "integral"):
                raise self.bad_input(slot.key, value, f"an array of real numbers, not of dtype {value.dtype}")
        dtype = xp.float32 if floats == {xp.float32} else wide
        inputs: list[Any] = []
        for slot, value in zip(self.slots, raw, strict=True):
            if value is None or slot.text:
                inputs.append(value)
            elif library_of(value) is None:  # Python numbers and lists: copied to the device each call
                inputs.append(xp.asarray(self.as_float_array(value, slot.key), dtype=dtype, device=device))
            else:
                inputs.append(value if value.dtype == dtype else xp.astype(value, dtype))
        return inputs, dtype

    def _check_shapes(self, inputs: list[Any], xp: Any) -> int | None:
        """Check each input's axes, the batch size they agree on and (unless allowed) finiteness."""
        batch: int | None = None
        check_values = not self.allow_nonfinite and (xp is np or self.check_inputs)
        for slot, arr in zip(self.slots, inputs, strict=True):
            if arr is None or arr.__class__ is str:
                continue
            shape = (len(arr),) if slot.text else tuple(arr.shape)
            nd = slot.ndim
            if len(shape) == nd + 1 and shape[0] and (batch is None or shape[0] == batch):
                batch = shape[0]  # the common case, checked with one comparison chain
                continue
            key, name, local = slot.key, slot.first.term, slot.first.local
            if len(shape) < nd or len(shape) > nd + 1:
                raise InvalidInputError(
                    f"context key {key!r} (read by {name}, input {local!r}): expected {nd} axes per "
                    f"environment plus an optional leading environment axis, got shape {shape}")
            if len(shape) == nd + 1:
                if shape[0] == 0:
                    raise InvalidInputError(f"context key {key!r}: expected at least one environment on the "
                                            f"leading axis, got an empty batch (shape {shape})")
                raise InvalidInputError(f"context key {key!r}: expected {batch} environments on the leading "
                                        f"axis like the other inputs, got shape {shape}")
        if check_values:  # reads one number back from a device: the call's one synchronisation
            present = [a for s, a in zip(self.slots, inputs, strict=True) if a is not None and not s.text]
            if present and not all_finite(*present):
                for slot, arr in zip(self.slots, inputs, strict=True):
                    if arr is not None and not slot.text and not all_finite(arr):
                        self.nonfinite(slot.key, to_numpy(arr))
        return batch

    # ---- episode flags --------------------------------------------------------------------------
    def no_flags(self, n: int, ref: Any = None) -> Any:
        """An all-False flag array of length ``n`` in ``ref``'s library and device, shared between
        calls (read-only for NumPy; never written by rewardkit for the others)."""
        if ref is None or isinstance(ref, np.ndarray):
            key: Any = n
        else:
            key = (n, type(ref), device_of(ref))
        flags = self._false_flags.get(key)
        if flags is None:
            if key is n:
                flags = np.zeros(n, dtype=bool)
                flags.flags.writeable = False
            else:
                xp = array_namespace(ref)
                flags = xp.zeros((n,), dtype=xp.bool, device=device_of(ref))
            self._false_flags[key] = flags
        return flags

    def episode_flags(self, inputs: BatchInputs, terminated: Any, truncated: Any) -> tuple[Any, Any, Any]:
        """``(terminated, truncated, done)`` as boolean arrays over the call's environments, in the
        library and on the device of its first numeric input (NumPy without one)."""
        n = inputs.batch if inputs.batch is not None else 1
        ref = None
        values = inputs.values
        for j in self._numeric_slots:
            if values[j] is not None:
                ref = values[j]
                break
        if (terminated.__class__ is np.ndarray and truncated.__class__ is np.ndarray and terminated.dtype is BOOL
                and truncated.dtype is BOOL and terminated.shape == (n,) and truncated.shape == (n,)
                and (ref is None or ref.__class__ is np.ndarray)):
            return terminated, truncated, terminated | truncated  # NumPy flags and inputs: nothing to convert
        # None and False (what the compiled single-environment path hands over) share one array
        if (terminated is None or terminated is False) and (truncated is None or truncated is False):
            flags = self.no_flags(n, ref)
            return flags, flags, flags
        term = episode_flags(terminated, n, "terminated", ref)
        trunc = episode_flags(truncated, n, "truncated", ref)
        return term, trunc, term | trunc


def check_step(step: Any) -> int:
    """A step is an integer in [0, MAX_STEP] (NumPy integers accepted); refused before anything moves."""
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise InvalidInputError(f"step: expected a non-negative integer, got {type(step).__name__} {describe(step)}")
    step = int(step)
    if not 0 <= step <= MAX_STEP:
        raise InvalidInputError(f"step: expected a non-negative integer up to 2**63-1, got {describe(step)}")
    return step


def plain_floats(value: list[Any]) -> list[float] | None:
    """A flat list of Python floats and ints as a new list of floats, or ``None`` when the list
    needs the full checks (booleans, NumPy scalars, nested lists, ints beyond the float range)."""
    for item in value:
        if item.__class__ is not float and item.__class__ is not int:
            return None
    try:
        return [*map(float, value)]
    except OverflowError:
        return None


def returned_float(value: Any, term: str) -> float:
    """A component's one-environment result as a Python float (NumPy scalars are converted)."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise TypeError(f"{term}: the component's scalar_fn returned {type(value).__name__} {describe(value)}, "
                    "expected a float")


def as_bool_array(value: Any, what: str) -> Any:
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


def scalar_flag(value: Any, what: str) -> bool:
    """An episode flag for the single-environment path; arrays and lists send the call to the batched path."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        raise NotScalar
    if library_of(value) not in (None, "numpy"):
        raise NotScalar  # a torch/JAX flag: the batched path (which checks its dtype)
    return bool(as_bool_array(value, what))


def episode_flags(value: Any, n: int, what: str, ref: Any = None) -> Any:
    """Episode flags as a boolean array of ``n`` environments in the library and on the device of
    ``ref`` (an input array; NumPy when ``None``). Flags from elsewhere are copied there."""
    numpy_ref = ref is None or isinstance(ref, np.ndarray)
    if value is None:
        if numpy_ref:
            return np.zeros(n, dtype=bool)
        xp = array_namespace(ref)
        return xp.zeros((n,), dtype=xp.bool, device=device_of(ref))
    arr = as_bool_array(value, what)
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
