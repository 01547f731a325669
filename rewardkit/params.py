"""Declarative parameter specifications, so that every component validates its params the same way.

A component declares ``params = {"sigma": Param.positive(1.0, "width of the ramp")}``; the
composer validates a config's ``params`` mapping against it and reports bad values with the key
path (``components.latency.params.sigma``) through :class:`~rewardkit.errors.ConfigError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .errors import ConfigError

_REQUIRED = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """True for an int or float (not a bool) that is finite as a float.

    Integers too large for a float (YAML reads ``1000...0`` with 400 digits as an int) count as
    not finite instead of raising ``OverflowError``.
    """
    if not _is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_number_or_inf(value: Any) -> bool:
    """True for an int or float (not a bool) that is not NaN (infinities allowed)."""
    if not _is_number(value):
        return False
    try:
        return not math.isnan(value)
    except OverflowError:
        return False


@dataclass(frozen=True)
class Param:
    """One parameter: its default (or required), a one-line doc and a checker.

    ``check(value)`` returns the cleaned value or raises ``ValueError`` whose text says what was
    expected; :func:`validate_params` turns that into a located ``ConfigError``.
    """

    default: Any
    doc: str
    expected: str
    check: Callable[[Any], Any] = field(repr=False)

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    # ---- constructors for the kinds of parameter components use -------------------------
    @staticmethod
    def number(default: Any = _REQUIRED, doc: str = "") -> "Param":
        """Any finite real number."""

        def check(v: Any) -> float:
            if not is_finite_number(v):
                raise ValueError("a finite number")
            return float(v)

        return Param(default, doc, "a finite number", check)

    @staticmethod
    def positive(default: Any = _REQUIRED, doc: str = "") -> "Param":
        """A finite number > 0."""

        def check(v: Any) -> float:
            if not is_finite_number(v) or v <= 0:
                raise ValueError("a positive number")
            return float(v)

        return Param(default, doc, "a positive number", check)

    @staticmethod
    def non_negative(default: Any = _REQUIRED, doc: str = "") -> "Param":
        """A finite number >= 0."""

        def check(v: Any) -> float:
            if not is_finite_number(v) or v < 0:
                raise ValueError("a non-negative number")
            return float(v)

        return Param(default, doc, "a non-negative number", check)

    @staticmethod
    def fraction(default: Any = _REQUIRED, doc: str = "", *, open_low: bool = False) -> "Param":
        """A number in [0, 1] (or (0, 1] with ``open_low``)."""
        expected = "a number in (0, 1]" if open_low else "a number in [0, 1]"

        def check(v: Any) -> float:
            if not is_finite_number(v) or v > 1 or v < 0 or (open_low and v == 0):
                raise ValueError(expected)
            return float(v)

        return Param(default, doc, expected, check)

    @staticmethod
    def choice(options: Sequence[str], default: Any = _REQUIRED, doc: str = "") -> "Param":
        """One string among ``options``."""
        expected = "one of " + ", ".join(repr(o) for o in options)

        def check(v: Any) -> str:
            if not isinstance(v, str) or v not in options:
                raise ValueError(expected)
            return v

        return Param(default, doc, expected, check)

    @staticmethod
    def string(default: Any = _REQUIRED, doc: str = "") -> "Param":
        """A non-empty string (a context key, for example)."""

        def check(v: Any) -> str:
            if not isinstance(v, str) or not v:
                raise ValueError("a non-empty string")
            return v

        return Param(default, doc, "a non-empty string", check)

    @staticmethod
    def bounds(default: Any = None, doc: str = "") -> "Param":
        """Optional ``[low, high]`` with low < high; either end may be null (unbounded)."""

        def check(v: Any) -> tuple[float, float] | None:
            if v is None:
                return None
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise ValueError("a list [low, high] or null")
            low, high = v
            low = -math.inf if low is None else low
            high = math.inf if high is None else high
            if not (is_number_or_inf(low) and is_number_or_inf(high)):
                raise ValueError("a list [low, high] of numbers or nulls")
            if not low < high:
                raise ValueError("a list [low, high] with low < high")
            return (float(low), float(high))

        return Param(default, doc, "a list [low, high] or null", check)


def describe(value: Any) -> str:
    """Short, readable rendering of a bad value for error messages."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # ints beyond str()'s digit limit, very deep nesting
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def validate_params(
    spec: Mapping[str, Param], given: Any, *, path: str = "params", source: str | None = None
) -> dict[str, Any]:
    """Check ``given`` against ``spec``; return the cleaned params with defaults filled in.

    Raises ``ConfigError`` naming the key path for an unknown name, a missing required one or a
    value of the wrong kind.
    """
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping of parameters, got {describe(given)}", source=source, path=path)
    unknown = sorted(set(given) - set(spec), key=str)
    if unknown:
        known = ", ".join(sorted(spec)) or "none"
        raise ConfigError(
            f"unknown parameter {unknown[0]!r}; expected one of: {known}", source=source, path=path
        )
    cleaned: dict[str, Any] = {}
    for name, param in spec.items():
        if name not in given:
            if param.required:
                raise ConfigError(f"missing required parameter ({param.expected})", source=source, path=f"{path}.{name}")
            cleaned[name] = param.default
            continue
        value = given[name]
        try:
            cleaned[name] = param.check(value)
        except ValueError as exc:
            raise ConfigError(f"expected {exc}, got {describe(value)}", source=source, path=f"{path}.{name}") from None
    return cleaned
