"""``applies_to``: a term that gives a value only for the samples whose columns hold given values.

A term's ``applies_to: {COLUMN: VALUE or [VALUES], ...}`` makes it apply to a sample when every
named context key holds one of its values (compared as text: ``3``, ``3.0`` and ``"3"`` are one
value). Elsewhere the term gives no value: its ``raw``, ``normalized`` and ``contribution`` are 0,
the breakdown's ``TermOutput.applies`` says where it applied (a bool, or a boolean array over the
batch), the total adds only the terms that apply, and TRL receives ``None`` from the term's
function. The component still runs on every sample (its inputs must be valid everywhere); only
its value is dropped. The columns are read as text inputs of the term (a missing one is a
``MissingInputError`` naming the term).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from .backend import array_namespace, like
from .errors import ConfigError
from .params import describe

#: a term's conditions: context key -> the values (as text) under which the term applies
Conditions = dict[str, frozenset[str]]


def number_text(value: Any) -> str | None:
    """A number read as text, or ``None`` for anything else: an integer as its digits (``72``), a
    finite float as Python writes it, integral floats without ``.0`` (``72.0`` -> ``"72"``: an
    integer column that passed through a float array reads as its integers). Booleans, NaN and
    infinities are not numbers here."""
    if value.__class__ is int:  # the common case first
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return None


def _value_text(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    text = number_text(value)
    if text is None:
        raise ConfigError(f"expected a string or a finite number (not a boolean), got {describe(value)}", path=path)
    return text


def parse_applies_to(spec: Any, path: str) -> Conditions:
    """Validate ``applies_to`` (a non-empty mapping of context key to a value or a non-empty list
    of values) into :data:`Conditions`; a located ``ConfigError`` otherwise."""
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(f"expected a non-empty mapping of context key to a value or a list of values, got "
                          f"{describe(spec)}", path=path)
    conditions: Conditions = {}
    for key, values in spec.items():
        if not isinstance(key, str) or not key or not key.isprintable() or key != key.strip():
            raise ConfigError(f"expected context keys (non-empty strings without control characters or "
                              f"surrounding spaces), got {describe(key)}", path=path)
        where = f"{path}.{key}"
        if isinstance(values, (list, tuple)):
            if not values:
                raise ConfigError("expected a value or a non-empty list of values, got an empty list", path=where)
            conditions[key] = frozenset(_value_text(v, f"{where}[{i}]") for i, v in enumerate(values))
        else:
            conditions[key] = frozenset({_value_text(values, where)})
    return conditions


def conditions_to_spec(conditions: Conditions) -> dict[str, Any]:
    """``applies_to`` as plain config data (one value, or a sorted list)."""
    return {k: next(iter(v)) if len(v) == 1 else sorted(v) for k, v in conditions.items()}


def batch_mask(columns: list[list[str]], allowed: list[frozenset[str]]) -> np.ndarray:
    """Where a batch's columns (lists of text) all hold an allowed value: a boolean array."""
    first, *rest = zip(columns, allowed, strict=True)
    mask = np.fromiter(map(first[1].__contains__, first[0]), dtype=bool, count=len(first[0]))
    for column, values in rest:
        mask &= np.fromiter(map(values.__contains__, column), dtype=bool, count=len(column))
    return mask


def masked(values: Any, mask: np.ndarray) -> Any:
    """``values`` (a term's batched array, or a float) with 0 where ``mask`` is false, in its library and dtype."""
    if isinstance(values, np.ndarray):
        return np.where(mask, values, values.dtype.type(0))
    if isinstance(values, (int, float)):
        return np.where(mask, float(values), 0.0)
    xp = array_namespace(values)
    return xp.where(like(mask, values, dtype=xp.bool), values, xp.zeros_like(values))
