"""Which array library a batched context's values come from.

A context's arrays must all come from one library (NumPy, PyTorch, JAX, CuPy ...): a context that
mixes them raises an ``InvalidInputError`` naming one key of each library. Python numbers, lists
and NumPy scalars belong to no library (they go with any). Libraries are recognised by the
module of the value's type, so nothing here imports torch or jax.

This is the first piece of issue 21's array-API backend; today every input is still converted to
float64 NumPy on the host after this check (see docs/concepts.md, "Vectorized evaluation").
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from .errors import InvalidInputError

#: The distribution a type's top-level module belongs to, where the two differ.
_LIBRARY_OF_MODULE = {"jaxlib": "jax"}
_NEUTRAL = (bool, int, float, list, tuple, np.generic)


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
    holds an array); a context mixing libraries raises ``InvalidInputError`` naming a key of each."""
    first: tuple[str, str] | None = None
    for key in keys:
        if key not in ctx:
            continue
        lib = library_of(ctx[key])
        if lib is None:
            continue
        if first is None:
            first = (key, lib)
        elif lib != first[1]:
            raise InvalidInputError(
                f"context mixes array libraries: key {first[0]!r} is a {first[1]} array but key {key!r} is a "
                f"{lib} array; give every context value from one library (or Python numbers)")
    return None if first is None else first[1]
