"""The ``expect:`` section of a reward config: promises that ``rewardkit check`` verifies.

Written in YAML as::

    expect:
      monotone: {latency: decreasing, throughput: increasing}   # context key -> direction
      range: [-10, 1]            # the total stays in [low, high]; either end may be null
      finite: true               # the total is finite for finite contexts
      inputs:                    # sampling ranges of context keys (default: the components' domains)
        latency: [0, 600]
      steps: [0, 200000]         # training steps to sample (default: around the schedules' breakpoints)

Parsing needs only the context keys the config reads, so this module imports nothing heavy;
the checks themselves live in :mod:`rewardkit.testing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping

from .errors import ConfigError
from .params import Param, describe, is_finite_number

EXPECT_KEYS = {"monotone", "range", "finite", "inputs", "steps"}
DIRECTIONS = ("increasing", "decreasing")


@dataclass(frozen=True)
class Expectations:
    """Validated ``expect:`` section: what the total promises and where to sample contexts."""

    monotone: dict[str, str] = field(default_factory=dict)
    range: tuple[float, float] | None = None
    finite: bool = False
    inputs: dict[str, tuple[float, float]] = field(default_factory=dict)
    steps: tuple[int, int] | None = None

    def is_empty(self) -> bool:
        """True when nothing is promised (sampling ranges alone promise nothing)."""
        return not self.monotone and self.range is None and not self.finite

    def to_dict(self) -> dict[str, Any]:
        """YAML-ready mapping that :func:`parse_expectations` turns back into this object."""
        out: dict[str, Any] = {}
        if self.monotone:
            out["monotone"] = dict(self.monotone)
        if self.range is not None:
            out["range"] = [_plain_bound(v) for v in self.range]
        if self.finite:
            out["finite"] = True
        if self.inputs:
            out["inputs"] = {k: [_plain_bound(v) for v in r] for k, r in self.inputs.items()}
        if self.steps is not None:
            out["steps"] = list(self.steps)
        return out


def _plain_bound(v: float) -> float | None:
    return None if math.isinf(v) else v


def parse_expectations(spec: Any, context_keys: Collection[str], *, source: str | None = None,
                       path: str = "expect") -> Expectations | None:
    """Validate an ``expect:`` mapping against the context keys the config reads.

    Returns ``None`` for an absent (null) section; errors are ``ConfigError`` located at
    ``source`` and the key path (``expect.monotone.latency``).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"expected a mapping with any of: {', '.join(sorted(EXPECT_KEYS))}, got {describe(spec)}",
                          source=source, path=path)
    for key in spec:
        if key not in EXPECT_KEYS:
            raise ConfigError(f"unknown key; expected one of: {', '.join(sorted(EXPECT_KEYS))}",
                              source=source, path=f"{path}.{key}")
    monotone = _monotone(spec.get("monotone"), context_keys, f"{path}.monotone", source)
    bounds = _bounds(spec.get("range"), f"{path}.range", source)

    finite = spec.get("finite", False)
    if finite is None:
        finite = False
    if not isinstance(finite, bool):
        raise ConfigError(f"expected true or false, got {describe(finite)}", source=source, path=f"{path}.finite")

    inputs = _input_ranges(spec.get("inputs"), context_keys, f"{path}.inputs", source)
    steps = _steps(spec.get("steps"), f"{path}.steps", source)
    return Expectations(monotone, bounds, finite, inputs, steps)


def _context_key(key: Any, context_keys: Collection[str], where: str, source: str | None) -> str:
    """``key`` itself when the config reads it; otherwise a ``ConfigError`` at ``where.key``."""
    if not isinstance(key, str) or key not in context_keys:
        raise ConfigError(f"expected a context key the config reads ({', '.join(sorted(context_keys))}), "
                          f"got {describe(key)}", source=source, path=f"{where}.{key}")
    return key


def _per_context_key(given: Any, context_keys: Collection[str], where: str, source: str | None, what: str,
                     parse: Callable[[Any, str], Any]) -> dict[str, Any]:
    """A mapping of context key -> ``parse(value, key path)``; ``what`` describes the values in errors."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"expected a mapping of context key to {what}, got {describe(given)}",
                          source=source, path=where)
    out: dict[str, Any] = {}
    for key, value in given.items():
        _context_key(key, context_keys, where, source)
        out[key] = parse(value, f"{where}.{key}")
    return out


def _monotone(given: Any, context_keys: Collection[str], where: str, source: str | None) -> dict[str, str]:
    """``expect.monotone``: context key -> 'increasing' or 'decreasing'."""

    def direction(value: Any, at: str) -> str:
        if value not in DIRECTIONS:
            raise ConfigError(f"expected 'increasing' or 'decreasing', got {describe(value)}", source=source, path=at)
        return value

    return _per_context_key(given, context_keys, where, source, "'increasing' or 'decreasing'", direction)


def _input_ranges(given: Any, context_keys: Collection[str], where: str,
                  source: str | None) -> dict[str, tuple[float, float]]:
    """``expect.inputs``: context key -> [low, high] sampling range."""

    def sampling_range(value: Any, at: str) -> tuple[float, float]:
        bounds_of_key = _bounds(value, at, source)
        if bounds_of_key is None:
            raise ConfigError("expected a list [low, high], got None", source=source, path=at)
        return bounds_of_key

    return _per_context_key(given, context_keys, where, source, "[low, high]", sampling_range)


def _bounds(value: Any, where: str, source: str | None) -> tuple[float, float] | None:
    """``[low, high]`` with null ends meaning unbounded (the same rule as ``Param.bounds``)."""
    try:
        return Param.bounds().check(value)
    except ValueError as exc:
        raise ConfigError(f"expected {exc}, got {describe(value)}", source=source, path=where) from None


def _steps(value: Any, where: str, source: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(is_finite_number(v) and float(v).is_integer() and v >= 0 for v in value)
            or value[0] > value[1]):
        raise ConfigError(f"expected a list [first, last] of non-negative whole step numbers with first <= last, "
                          f"got {describe(value)}", source=source, path=where)
    return (int(value[0]), int(value[1]))
