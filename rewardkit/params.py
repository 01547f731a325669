"""Declarative parameter specifications, so that every component validates its params the same way.

A component declares ``params = {"sigma": Param.positive(1.0, "width of the ramp")}``; the
composer validates a config's ``params`` mapping against it and reports bad values with the key
path (``components.latency.params.sigma``) through :class:`~rewardkit.errors.ConfigError`.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import reprlib
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
    def between(low: float, high: float, default: Any = _REQUIRED, doc: str = "") -> "Param":
        """A finite number in ``[low, high]``: for settings whose extremes cannot run (a replica
        slowed to 5e-324 of its speed never finishes a batch)."""
        expected = f"a number >= {low:g}" if math.isinf(high) else f"a number from {low:g} to {high:g}"

        def check(v: Any) -> float:
            if not is_finite_number(v) or not low <= v <= high:
                raise ValueError(expected)
            return float(v)

        return Param(default, doc, expected, check)

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

    @staticmethod
    def integer(default: Any = _REQUIRED, doc: str = "", *, minimum: int | None = None,
                maximum: int | None = None) -> "Param":
        """An integer (not a bool), at least ``minimum`` and at most ``maximum`` when given."""
        if maximum is None:
            expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        else:
            expected = f"an integer <= {maximum}" if minimum is None else f"an integer from {minimum} to {maximum}"

        def check(v: Any) -> int:
            if (isinstance(v, bool) or not isinstance(v, int) or (minimum is not None and v < minimum)
                    or (maximum is not None and v > maximum)):
                raise ValueError(expected)
            return int(v)

        return Param(default, doc, expected, check)

    @staticmethod
    def boolean(default: Any = _REQUIRED, doc: str = "") -> "Param":
        """``true`` or ``false`` (not 0/1, not a string)."""

        def check(v: Any) -> bool:
            if not isinstance(v, bool):
                raise ValueError("true or false")
            return v

        return Param(default, doc, "true or false", check)

    def or_null(self, default: Any = None) -> "Param":
        """This parameter, or ``null`` (``None``), with ``default`` (``None`` unless given)."""
        check = self.check
        return Param(default, self.doc, f"{self.expected} or null", lambda v: None if v is None else check(v))


class _ShortRepr(reprlib.Repr):
    """``repr`` that stops after a few levels and items, so its cost is bounded whatever the value.

    A YAML alias bomb or a cyclic dict renders in microseconds instead of expanding in full.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4
        self.maxtuple = self.maxlist = self.maxarray = self.maxset = self.maxfrozenset = self.maxdeque = 8
        self.maxdict = 8
        self.maxstring = 80
        self.maxlong = 4300  # ints beyond str()'s digit limit are handled in repr_int
        self.maxother = 80

    def repr_int(self, x: int, level: int) -> str:
        try:
            return repr(x)
        except ValueError:  # more digits than sys.get_int_max_str_digits()
            return "<int>"

    def repr_dict(self, x: Any, level: int) -> str:  # insertion order, as repr() shows it
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = repr(x)
        except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
            return f"<{type(x).__name__}>"
        return text if len(text) <= self.maxother else text[: self.maxother - 3] + "..."


_SHORT_REPR = _ShortRepr()


def describe(value: Any) -> str:
    """Short, readable rendering of a bad value for error messages (at most 60 characters).

    Its cost is bounded: only the first few levels and items of a container are rendered.
    """
    try:
        text = _SHORT_REPR.repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


# ---- validating mappings against declared specs --------------------------------------------------
Schema = Mapping[str, "Param | Schema"]


def validate_params(
    spec: Mapping[str, Param], given: Any, *, path: str = "params", source: str | None = None
) -> dict[str, Any]:
    """Check ``given`` against ``spec``; return the cleaned params with defaults filled in.

    Raises one ``ConfigError`` listing every problem (``.errors``), each naming its key path: an
    unknown name, a missing required one or a value of the wrong kind.
    """
    return validate_schema(spec, given, path=path, source=source, unknown_noun="parameter")


def validate_schema(
    schema: Schema, given: Any, *, path: str = "", source: str | None = None, unknown_noun: str = "key"
) -> dict[str, Any]:
    """Check a (nested) mapping against ``schema`` and return it cleaned, with defaults filled in.

    ``schema`` maps each key to a :class:`Param` or to a nested schema (a section, which may be
    absent or null: its defaults apply). Every problem is collected and raised at once as a
    ``ConfigError`` whose ``.errors`` list each one located at ``<path>.<key>``; an unknown key
    suggests the closest known one. Defaults are deep-copied, so callers may mutate the result.
    """
    errors: list[ConfigError] = []
    out = _validate_section(schema, given, path, source, unknown_noun, errors)
    if errors:
        raise ConfigError.combine(errors)
    return out


def _validate_section(schema: Schema, given: Any, path: str, source: str | None, noun: str,
                      errors: list[ConfigError]) -> dict[str, Any]:
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        what = "parameters" if noun == "parameter" else "settings"
        errors.append(ConfigError(f"expected a mapping of {what}, got {describe(given)}", source=source,
                                  path=path or None))
        given = {}
    known = [str(k) for k in schema]
    for key in given:
        if key in schema:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listing = ", ".join(sorted(known)) or "none"
        if noun == "parameter":  # reported at the params mapping, as components have always done
            errors.append(ConfigError(f"unknown parameter {describe(key)}{hint}; expected one of: {listing}",
                                      source=source, path=path or None))
        else:
            errors.append(ConfigError(f"unknown {noun}{hint}; expected one of: {listing}", source=source,
                                      path=_join(path, key)))
    cleaned: dict[str, Any] = {}
    for name, item in schema.items():
        where = _join(path, name)
        if not isinstance(item, Param):
            cleaned[name] = _validate_section(item, given.get(name), where, source, noun, errors)
        elif name not in given:
            if item.required:
                errors.append(ConfigError(f"missing required {noun} ({item.expected})", source=source, path=where))
            else:
                cleaned[name] = copy.deepcopy(item.default)
        else:
            value = given[name]
            try:
                cleaned[name] = item.check(value)
            except ConfigError as exc:  # a check that validates a nested structure itself
                errors.extend(exc.within(source, where).errors)
            except ValueError as exc:
                errors.append(ConfigError(f"expected {exc}, got {describe(value)}", source=source, path=where))
    return cleaned


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
