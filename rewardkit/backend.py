"""Array libraries: which one a context's values come from, its array-API namespace, and helpers.

The batched path computes in the library its inputs come from, on their device, through the
Python array API (``array-api-compat`` wraps NumPy, PyTorch, JAX and CuPy into one namespace).
A context's arrays must all come from one library: a context that mixes them raises an
``InvalidInputError`` naming one key of each. Python numbers, lists and NumPy scalars belong to
no library (they go with any). Libraries are recognised by the module of the value's type, so
nothing here imports torch or jax; ``array_api_compat`` imports them only for their own arrays.

Components write their maths once with :func:`array_namespace` (``xp = array_namespace(x)``) and
the helpers below (:func:`saturate`, :func:`maybe_any`, :func:`to_numpy`); see
docs/writing-components.md. Synchronisation: nothing here forces a device-to-host copy except
:func:`to_numpy` and the ``bool(...)`` of an input check while :func:`checking` is true.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from contextvars import ContextVar
from typing import Any, Iterable, Mapping

import numpy as np

from .errors import InvalidInputError

#: The distribution a type's top-level module belongs to, where the two differ.
_LIBRARY_OF_MODULE = {"jaxlib": "jax"}
_NEUTRAL = (bool, int, float, list, tuple, np.generic)
#: libraries whose arrays live in host memory (a ``bool(...)`` of one costs no device sync)
_HOST = ("numpy",)
_namespaces: dict[type, Any] = {}
_float_max: dict[Any, float] = {}
#: (input checks on, the float dtype of the batched call being evaluated, NumPy warnings silenced)
_call: ContextVar[tuple[bool, Any, bool]] = ContextVar("rewardkit_call", default=(True, None, False))
_NULL = nullcontext()


def library_of(value: Any) -> str | None:
    """The array library of ``value`` (``"numpy"``, ``"torch"``, ``"jax"`` ...), or ``None`` for
    Python numbers, lists and NumPy scalars, which go with any library."""
    if value.__class__ is np.ndarray:
        return "numpy"
    if value is None or isinstance(value, _NEUTRAL):
        return None
    if isinstance(value, np.ndarray):
        return "numpy"
    module = type(value).__module__.partition(".")[0]
    if hasattr(value, "__array_namespace__") or module in ("torch", "jax", "jaxlib", "cupy"):
        return _LIBRARY_OF_MODULE.get(module, module)
    return None


def check_one_library(ctx: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    """The one array library of ``ctx[key]`` for ``keys`` present in ``ctx`` (``None`` if no key
    holds an array); a context mixing libraries raises ``InvalidInputError`` naming a key of each,
    as does a torch tensor without values to compute on (:func:`check_computable`)."""
    first: tuple[str, str] | None = None
    for key in keys:
        if key not in ctx:
            continue
        lib = library_of(ctx[key])
        if lib is None:
            continue
        if lib == "torch":
            check_computable(ctx[key], f"context key {key!r}")
        if first is None:
            first = (key, lib)
        elif lib != first[1]:
            raise InvalidInputError(
                f"context mixes array libraries: key {first[0]!r} is a {first[1]} array but key {key!r} is a "
                f"{lib} array; give every context value from one library (or Python numbers)")
    return None if first is None else first[1]


def check_computable(a: Any, what: str) -> None:
    """A torch tensor rewards can be computed on: dense (strided) and with values (not on the
    ``meta`` device, which has shapes only); ``InvalidInputError`` naming ``what`` otherwise."""
    if getattr(a, "is_meta", False):
        raise InvalidInputError(f"{what}: expected a tensor with values, got one on the 'meta' device (shapes only); "
                                "move it to a real device first")
    layout = str(getattr(a, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise InvalidInputError(f"{what}: expected a dense tensor, got layout {layout}; call .to_dense() first")


def detached(a: Any) -> Any:
    """``a`` without its autograd history (a torch tensor that requires grad), else ``a`` itself.

    What rewardkit keeps between calls (running statistics, per-environment state) is made of
    detached values: state holding a graph would grow with every call and make a second
    ``backward()`` run through freed buffers. Rewards returned by a call keep their gradient."""
    if a.__class__ is np.ndarray or not getattr(a, "requires_grad", False):
        return a
    return a.detach()


def array_namespace(*arrays: Any) -> Any:
    """The array-API namespace (``xp``) of ``arrays``: write a component's maths once with it.

    NumPy arrays get ``numpy`` itself (NumPy 2 follows the standard), torch tensors
    ``array_api_compat.torch``, JAX arrays ``jax.numpy``. Cached per array type (a dict lookup).
    """
    first = arrays[0] if arrays else None
    if first.__class__ is np.ndarray and _namespaces.get(np.ndarray) is np:
        return np  # the hot case, one dict lookup
    for a in arrays:
        if a is None or isinstance(a, _NEUTRAL):
            continue
        xp = _namespaces.get(a.__class__)
        if xp is None:
            xp = _namespaces[a.__class__] = _find_namespace(a)
        return xp
    return _namespaces.get(np.ndarray) or _namespaces.setdefault(np.ndarray, _find_namespace(np.zeros(0)))


def _find_namespace(a: Any) -> Any:
    import array_api_compat

    if isinstance(a, np.ndarray) and hasattr(np, "isdtype"):
        return np  # NumPy >= 2 is an array-API namespace; its functions run without a wrapper
    return array_api_compat.array_namespace(a)


def device_of(a: Any) -> Any:
    """The device ``a`` lives on (``"cpu"`` for NumPy arrays), as the array API names it."""
    if isinstance(a, np.ndarray):
        return "cpu"
    import array_api_compat

    return array_api_compat.device(a)


def is_host(a: Any) -> bool:
    """Whether reading ``a``'s values on the host costs no device synchronisation (NumPy, torch on CPU)."""
    if isinstance(a, np.ndarray):
        return True
    device = getattr(a, "device", None)
    return library_of(a) == "torch" and getattr(device, "type", None) == "cpu"


def maybe_any(mask: Any) -> bool:
    """``bool(any(mask))`` where that is free (host arrays); ``True`` on a device, where asking would
    synchronise: callers then take the branch that is right either way (``where``)."""
    if isinstance(mask, np.ndarray):
        return bool(mask.any())
    if is_host(mask):
        return bool(mask.any())
    return True


def checking() -> bool:
    """Whether input checks that need a device synchronisation run (``check_inputs=False`` turns them off)."""
    return _call.get()[0]


def call_dtype(default: Any = None) -> Any:
    """The float dtype the composer's current batched call computes in (``default`` outside a call);
    a component that makes values from nothing (a constant) uses it to keep the dtype policy."""
    dtype = _call.get()[1]
    return default if dtype is None else dtype


class evaluating:  # noqa: N801 - used as a function: ``with evaluating(check_inputs, dtype):``
    """Run the block as one batched call: input checks on or off, computing in ``dtype``, NumPy's
    overflow/invalid warnings silenced once for every component (see :func:`quiet`). A class
    rather than a generator: it is entered on every batched call."""

    __slots__ = ("_state", "_token", "_errstate")

    def __init__(self, check_inputs: bool, dtype: Any) -> None:
        self._state = (check_inputs, dtype, True)

    def __enter__(self) -> None:
        self._errstate = np.errstate(over="ignore", invalid="ignore")
        self._errstate.__enter__()
        self._token = _call.set(self._state)

    def __exit__(self, *exc: Any) -> None:
        _call.reset(self._token)
        self._errstate.__exit__(*exc)


def quiet() -> Any:
    """Context that silences NumPy's overflow/invalid warnings for arithmetic whose result is then
    saturated or discarded (other libraries do not warn); free inside a composer call, which
    silences them once for all components."""
    if _call.get()[2]:
        return _NULL
    return np.errstate(over="ignore", invalid="ignore")


def float_max(a: Any) -> float:
    """The largest finite value of ``a``'s floating dtype (results saturate there instead of overflowing)."""
    dtype = a.dtype
    value = _float_max.get(dtype)
    if value is None:
        value = _float_max[dtype] = float(array_namespace(a).finfo(dtype).max)
    return value


def clip(x: Any, low: float | None = None, high: float | None = None) -> Any:
    """``xp.clip(x, low, high)`` (a bound of None is open; NaN stays NaN), without the Python
    layers of ``numpy.clip`` on NumPy arrays (two ufunc calls instead)."""
    if x.__class__ is np.ndarray:
        if low is not None:
            x = np.maximum(x, low)
        if high is not None:
            x = np.minimum(x, high)
        return x
    return array_namespace(x).clip(x, low, high)


def saturate(x: Any) -> Any:
    """``x`` clamped to the finite range of its dtype (``+-inf`` become the largest finite float; NaN stays)."""
    big = float_max(x)
    return clip(x, -big, big)


def all_finite(*arrays: Any) -> bool:
    """Whether every value of ``arrays`` is finite, read on the host (a synchronisation on a device).

    One read of one number for all arrays: a finite sum of their sums means finite values; an
    infinite or NaN one (possibly an overflow of finite values) is settled array by array.
    """
    if not arrays:
        return True
    if arrays[0].__class__ is not np.ndarray:  # reading a value of a tensor with a graph makes torch warn
        arrays = tuple(detached(a) for a in arrays)
    total = arrays[0].sum()  # the method: NumPy's np.sum adds a Python wrapper per call
    for a in arrays[1:]:
        total = total + a.sum()
    if math.isfinite(float(total)):
        return True
    xp = array_namespace(arrays[0])
    return all(bool(xp.all(xp.isfinite(a))) for a in arrays)


def wide_float(xp: Any) -> Any:
    """float64 in ``xp``, or float32 where the library has no float64 enabled (JAX without x64)."""
    if xp.__name__.startswith("jax"):
        return xp.zeros(0).dtype  # float64 when jax_enable_x64 is on, else float32
    return xp.float64


def to_numpy(a: Any) -> np.ndarray:
    """``a`` as a NumPy array on the host (a device-to-host copy for device arrays: error messages,
    ``state_dict``; never the hot path)."""
    if isinstance(a, np.ndarray):
        return a
    if library_of(a) == "torch":
        return a.detach().cpu().numpy()
    if library_of(a) == "cupy":
        return a.get()
    return np.asarray(a)


def like(values: Any, ref: Any, dtype: Any = None) -> Any:
    """``values`` (host data or another library's array) as an array of ``ref``'s library, on its
    device, with ``dtype`` (default ``ref.dtype``)."""
    xp = array_namespace(ref)
    dtype = ref.dtype if dtype is None else dtype
    if library_of(values) not in (None, library_of(ref)):
        values = to_numpy(values)
    if isinstance(ref, np.ndarray):
        return np.asarray(values, dtype=dtype)
    return xp.asarray(values, dtype=dtype, device=device_of(ref))


def kind(a: Any) -> tuple[Any, Any, Any]:
    """What an array's state must match: (type, dtype, device)."""
    if a.__class__ is np.ndarray:
        return (np.ndarray, a.dtype, None)
    return (a.__class__, a.dtype, device_of(a))


def copy_array(a: Any) -> Any:
    """An independent copy of ``a`` (immutable JAX arrays are returned as they are)."""
    if isinstance(a, np.ndarray):
        return a.copy()
    clone = getattr(a, "clone", None)
    if clone is not None:
        return clone()
    copy = getattr(a, "copy", None)
    return copy() if copy is not None and library_of(a) != "jax" else a
