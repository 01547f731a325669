"""Transforms applied to a term or to the total: ``scale``, ``shift``, ``clip`` and ``tanh``.

Written in YAML as a list applied in order: ``transforms: [{scale: 2}, {shift: -1}, {clip: [-1, null]}, tanh]``.
Each works on floats and on NumPy arrays alike.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar


from .backend import array_namespace
from .errors import ConfigError
from .params import Param, describe


class Transform:
    """A pure elementwise function of a term's value."""

    name: ClassVar[str] = ""

    def __call__(self, x: Any) -> Any:
        raise NotImplementedError

    def to_spec(self) -> Any:
        """YAML-ready spec that rebuilds this transform."""
        raise NotImplementedError


class Scale(Transform):
    """Multiply by a finite factor (may be negative)."""

    name = "scale"

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, x: Any) -> Any:
        return x * self.factor

    def to_spec(self) -> Any:
        return {"scale": self.factor}


class Shift(Transform):
    """Add a finite constant (``{scale: 2}, {shift: -1}`` maps a 0/1 check to -1/+1)."""

    name = "shift"

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def __call__(self, x: Any) -> Any:
        return x + self.offset

    def to_spec(self) -> Any:
        return {"shift": self.offset}


class Clip(Transform):
    """Clip to ``[low, high]``; either end may be null (unbounded), bounds may be asymmetric."""

    name = "clip"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def __call__(self, x: Any) -> Any:
        if not isinstance(x, (int, float)):  # an array of any library
            return array_namespace(x).clip(x, self.low, self.high)
        if x != x:  # NaN passes through, as with np.clip (min/max would turn it into a bound)
            return x
        return min(self.high, max(self.low, x))

    def to_spec(self) -> Any:
        return {"clip": [None if math.isinf(self.low) else self.low, None if math.isinf(self.high) else self.high]}


class Tanh(Transform):
    """Squash into (-1, 1) with the hyperbolic tangent."""

    name = "tanh"

    def __call__(self, x: Any) -> Any:
        return math.tanh(x) if isinstance(x, (int, float)) else array_namespace(x).tanh(x)

    def to_spec(self) -> Any:
        return "tanh"


TRANSFORMS = ("scale", "shift", "clip", "tanh")


def make_transform(spec: Any, *, path: str, source: str | None = None) -> Transform:
    """Build one transform from ``"tanh"``, ``{scale: k}``, ``{shift: c}`` or ``{clip: [low, high]}``."""
    if isinstance(spec, Transform):
        return spec
    if isinstance(spec, str):
        name, arg, has_arg = spec, None, False
    elif isinstance(spec, dict) and len(spec) == 1:
        name, arg = next(iter(spec.items()))
        has_arg = True
    else:
        raise ConfigError(
            f"expected 'tanh', {{scale: number}}, {{shift: number}} or {{clip: [low, high]}}, got {describe(spec)}",
            source=source, path=path
        )
    if name == "tanh":
        if has_arg and arg is not None:
            raise ConfigError(f"expected no argument for tanh, got {describe(arg)}", source=source, path=f"{path}.tanh")
        return Tanh()
    if name == "scale":
        try:
            return Scale(Param.number().check(arg))
        except ValueError:
            raise ConfigError(f"expected a finite number, got {describe(arg)}", source=source, path=f"{path}.scale") from None
    if name == "shift":
        try:
            return Shift(Param.number().check(arg))
        except ValueError:
            raise ConfigError(f"expected a finite number, got {describe(arg)}", source=source, path=f"{path}.shift") from None
    if name == "clip":
        try:
            bounds = Param.bounds().check(arg)
        except ValueError as exc:
            raise ConfigError(f"expected {exc}, got {describe(arg)}", source=source, path=f"{path}.clip") from None
        if bounds is None:
            raise ConfigError("expected a list [low, high], got None", source=source, path=f"{path}.clip")
        return Clip(*bounds)
    raise ConfigError(f"expected a transform among {', '.join(TRANSFORMS)}, got {describe(name)}", source=source, path=path)


def make_transforms(spec: Any, *, path: str, source: str | None = None) -> list[Transform]:
    """Build the ordered list of transforms from a YAML list (or null)."""
    if spec is None:
        return []
    if not isinstance(spec, list):
        raise ConfigError(f"expected a list of transforms, got {describe(spec)}", source=source, path=path)
    return [make_transform(item, path=f"{path}[{i}]", source=source) for i, item in enumerate(spec)]
