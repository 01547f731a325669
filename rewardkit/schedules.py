"""Weight schedules: a weight as a function of the global training step.

A schedule is written in YAML as ``{schedule: linear, start: 1.0, end: 0.0, steps: 10000}``.
Every schedule holds ``start`` before ``start_step`` and accepts ``min``/``max`` bounds applied
last. The step is the global training step (never per episode). Every weight is a finite float:
a schedule whose value would overflow (an exponential that grows for long enough) saturates at
the largest finite float, so a weight times a zero term is zero, never NaN.
"""

from __future__ import annotations

import bisect
import math
import sys
from itertools import pairwise
from typing import Any, ClassVar, Mapping

from .errors import ConfigError
from .params import _REQUIRED, Param, describe, is_finite_number, is_number_or_inf, validate_params

#: Largest finite float: weights saturate here instead of overflowing.
FLOAT_MAX = sys.float_info.max


class Schedule:
    """Base class: ``schedule(step) -> float`` plus the config that rebuilds it."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}

    def __init__(self, **config: Any) -> None:
        self.config = config
        for key, value in config.items():
            setattr(self, key, value)
        low = -math.inf if config.get("min") is None else config["min"]
        high = math.inf if config.get("max") is None else config["max"]
        if low == math.inf:
            raise ConfigError("expected a number below infinity (a weight is finite), got inf", path="min")
        if high == -math.inf:
            raise ConfigError("expected a number above -infinity (a weight is finite), got -inf", path="max")
        if low > high:
            raise ConfigError(f"expected min <= max, got min={low} and max={high}", path="min")
        self.low, self.high = max(low, -FLOAT_MAX), min(high, FLOAT_MAX)

    def value(self, t: float) -> float:
        """Unbounded value ``t`` steps after ``start_step`` (t >= 0)."""
        raise NotImplementedError

    def __call__(self, step: int) -> float:
        t = step - self.config.get("start_step", 0)
        v = self.config["start"] if t < 0 and "start" in self.config else self.value(max(t, 0))
        return self._bounded(v)

    def _bounded(self, v: float) -> float:
        """``v`` within ``[min, max]`` and within the finite floats (overflowing values saturate)."""
        return min(self.high, max(self.low, v))

    def key_steps(self) -> tuple[float, ...]:
        """Steps where the schedule's shape changes: between two of them (and past the last) it is
        monotone, so it is zero everywhere exactly when it is zero at each of them and far beyond."""
        return (0.0, float(self.config.get("start_step", 0)))

    def ever_nonzero(self) -> bool:
        """Whether the value is non-zero at some step (a term with this weight is trained at some point)."""
        return any(self(math.ceil(s)) != 0.0 or self(math.floor(s)) != 0.0 for s in (*self.key_steps(), 1e12))

    def source(self, step_var: str) -> str | None:
        """A Python expression of the value at ``step_var`` for compiled paths, or None."""
        return None

    def ramp_source(self, step_var: str) -> tuple[int, str] | None:
        """``(until, expr)``: for steps below ``until`` the value is ``expr`` (simpler than
        :meth:`source`) and from ``until`` on it is constant (the compiled paths test one
        ``step < until`` for several ramps, and one ``step >= until`` once they all ended), or None."""
        return None

    def _bound_source(self, expr: str) -> str:
        # bounds at the largest finite float are no-ops for the finite values the ramps produce
        if self.high < FLOAT_MAX:
            expr = f"min({_literal(self.high)}, {expr})"
        if self.low > -FLOAT_MAX:
            expr = f"max({_literal(self.low)}, {expr})"
        return expr

    def to_dict(self) -> dict[str, Any]:
        """YAML-ready spec: ``{schedule: name, ...params}``."""
        return {"schedule": self.name, **{k: v for k, v in self.config.items() if v is not None}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


_COMMON = {
    "start_step": Param.non_negative(0, "step at which the schedule starts moving"),
    "min": Param(None, "lower bound applied last", "a number or null", lambda v: _opt_number(v)),
    "max": Param(None, "upper bound applied last", "a number or null", lambda v: _opt_number(v)),
}


def _opt_number(v: Any) -> float | None:
    if v is None:
        return None
    if not is_number_or_inf(v):
        raise ValueError("a number or null")
    return float(v)


def _steps_param() -> Param:
    return Param(None, "length of the ramp in steps (or give end_step)", "a positive number",
                 lambda v: None if v is None else Param.positive().check(v))


def _end_step_param() -> Param:
    return Param(None, "step at which the ramp ends (alternative to steps)", "a positive number",
                 lambda v: None if v is None else Param.positive().check(v))


class Constant(Schedule):
    """``value`` at every step."""

    name = "constant"
    params = {"value": Param.number(doc="the weight"), **_COMMON}

    def value(self, t: float) -> float:  # type: ignore[override]
        return self.config["value"]

    def __call__(self, step: int) -> float:
        return self._bounded(self.config["value"])

    def source(self, step_var: str) -> str | None:
        return _literal(self(0))


class _Ramp(Schedule):
    """Shared handling of ``steps`` / ``end_step`` for schedules that go from start to end."""

    def __init__(self, **config: Any) -> None:
        steps, end_step = config.get("steps"), config.get("end_step")
        if steps is None and end_step is None:
            raise ConfigError("expected a positive number (or end_step), got nothing", path="steps")
        if steps is not None and end_step is not None:
            raise ConfigError("expected only one of steps and end_step, got both", path="end_step")
        if steps is None:
            start_step = config.get("start_step", 0)
            steps = end_step - start_step
            if steps <= 0:
                raise ConfigError(f"expected end_step > start_step, got end_step={end_step} and "
                                  f"start_step={start_step}", path="end_step")
        super().__init__(**config)
        self.span = float(steps)

    def progress(self, t: float) -> float:
        return min(1.0, t / self.span)

    def key_steps(self) -> tuple[float, ...]:
        return (*super().key_steps(), self.config.get("start_step", 0) + self.span)


class Linear(_Ramp):
    """From ``start`` to ``end`` linearly over ``steps``, then ``end``."""

    name = "linear"
    params = {"start": Param.number(doc="value at start_step"), "end": Param.number(doc="value after the ramp"),
              "steps": _steps_param(), "end_step": _end_step_param(), **_COMMON}

    # On the ramp the value is start + t * slope: exactly ``start`` at t = 0, ``end`` from the
    # end of the ramp on, one multiply-add per step. When end - start overflows (ends near the
    # float64 limits) it interpolates as (1 - p) * start + p * end instead, which cannot.
    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        start, end = float(config["start"]), float(config["end"])
        slope = (end - start) / self.span  # Python floats: inf on overflow, never an exception
        self.slope = slope if math.isfinite(slope) else None

    def value(self, t: float) -> float:
        start, end = self.config["start"], self.config["end"]
        if self.slope is None:
            p = min(1.0, max(0.0, t) / self.span)
            return (1.0 - p) * start + p * end
        t = max(0.0, t)
        return float(end) if t >= self.span else start + t * self.slope

    def source(self, step_var: str) -> str | None:
        start_step = self.config.get("start_step", 0)
        span = int(self.span) if self.span == int(self.span) else self.span  # int compares are faster
        start, end = _literal(self.config["start"]), _literal(self.config["end"])
        t = step_var if start_step == 0 else f"({step_var} - {start_step!r})"
        if self.slope is None:  # same arithmetic as value(), with comparisons instead of min/max calls
            p = f"(1.0 if {t} >= {span!r} else {t} / {float(self.span)!r})"
            if start_step != 0:
                p = f"(0.0 if {t} <= 0 else {p})"
            expr = f"((1.0 - (_p := {p})) * {start} + _p * {end})"
        else:  # the step is a non-negative int: max(0.0, t) is t when start_step is 0
            ramp = f"{t} * {self.slope!r}" if start == "0.0" else f"{start} + {t} * {self.slope!r}"
            if start_step != 0:
                ramp = f"({start} if {t} <= 0 else {ramp})"
            expr = f"({end} if {t} >= {span!r} else {ramp})"
        return self._bound_source(expr)

    def ramp_source(self, step_var: str) -> tuple[int, str] | None:
        if self.config.get("start_step", 0) != 0 or self.slope is None:
            return None
        start = _literal(self.config["start"])
        ramp = f"{step_var} * {self.slope!r}" if start == "0.0" else f"{start} + {step_var} * {self.slope!r}"
        return math.ceil(self.span), self._bound_source(ramp)


class Cosine(_Ramp):
    """From ``start`` to ``end`` along half a cosine over ``steps``, then ``end``."""

    name = "cosine"
    params = {"start": Param.number(doc="value at start_step"), "end": Param.number(doc="value after the ramp"),
              "steps": _steps_param(), "end_step": _end_step_param(), **_COMMON}

    def value(self, t: float) -> float:
        # c goes from exactly 1 (p = 0) to exactly 0 (p = 1, cos(pi) == -1.0), so the ends are exact.
        c = 0.5 * (1.0 + math.cos(math.pi * self.progress(t)))
        return c * self.config["start"] + (1.0 - c) * self.config["end"]


class Exponential(Schedule):
    """``start * rate ** t``: multiplies by ``rate`` every step after ``start_step``."""

    name = "exponential"
    params = {"start": Param.number(doc="value at start_step"),
              "rate": Param.positive(doc="factor per step (below 1 decays)"), **_COMMON}

    def value(self, t: float) -> float:
        return _times_power(self.config["start"], self.config["rate"], t)


class Step(Schedule):
    """``start * factor ** floor(t / every)``: a staircase."""

    name = "step"
    params = {"start": Param.number(doc="value at start_step"),
              "factor": Param.number(doc="multiplier at each stair"),
              "every": Param.positive(doc="steps between stairs"), **_COMMON}

    def value(self, t: float) -> float:
        # t / every overflows to inf for a tiny ``every``; past 2**62 stairs every power has saturated
        stairs = min(t / self.config["every"], _MANY_STAIRS)
        return _times_power(self.config["start"], self.config["factor"], math.floor(stairs))


_MANY_STAIRS = float(2**62)


def _literal(value: float) -> str:
    """A finite float as Python source for the compiled paths (non-finite numbers never get there)."""
    if not math.isfinite(value):
        raise ValueError(f"a weight literal must be finite, got {value!r}")
    return repr(float(value))


def _times_power(start: float, base: float, exponent: float) -> float:
    """``start * base ** exponent``, saturating at the largest finite float of the right sign."""
    if start == 0.0:
        return 0.0
    try:
        value = start * base ** exponent
    except OverflowError:
        # Only |base| > 1 overflows; a negative base comes with an integer exponent (Step).
        negative = (start < 0) != (base < 0 and int(exponent) % 2 == 1)
        return -FLOAT_MAX if negative else FLOAT_MAX
    return max(-FLOAT_MAX, min(FLOAT_MAX, value))


def _check_points(v: Any) -> list[list[float]]:
    if not isinstance(v, (list, tuple)) or not v:
        raise ValueError("a non-empty list of [step, value] pairs")
    points = []
    for p in v:
        if not isinstance(p, (list, tuple)) or len(p) != 2 or not all(is_finite_number(x) for x in p):
            raise ValueError("a non-empty list of [step, value] pairs of finite numbers")
        points.append([float(p[0]), float(p[1])])
    steps = [p[0] for p in points]
    if any(b <= a for a, b in pairwise(steps)):
        raise ValueError("[step, value] pairs with strictly increasing steps")
    return points


class Piecewise(Schedule):
    """Linear between ``points`` ``[[step, value], ...]``; flat before the first and after the last."""

    name = "piecewise"
    params = {"points": Param(_REQUIRED, "[[step, value], ...]", "a list of [step, value] pairs", _check_points),
              "min": _COMMON["min"], "max": _COMMON["max"]}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._steps = [p[0] for p in self.config["points"]]
        self._values = [p[1] for p in self.config["points"]]

    def key_steps(self) -> tuple[float, ...]:
        return (0.0, *(max(0.0, step) for step in self._steps))

    def __call__(self, step: int) -> float:
        steps, values = self._steps, self._values
        i = bisect.bisect_right(steps, step)
        if i == 0:
            v = values[0]
        elif i == len(steps):
            v = values[-1]
        else:
            s0, s1 = steps[i - 1], steps[i]
            p = (step - s0) / (s1 - s0)
            v = (1.0 - p) * values[i - 1] + p * values[i]  # cannot overflow between finite values
        return self._bounded(v)


SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (Constant, Linear, Exponential, Cosine, Step, Piecewise)
}


def make_schedule(spec: Any, *, path: str = "weight", source: str | None = None) -> Schedule:
    """Build a schedule from a number (constant) or a ``{schedule: name, ...}`` mapping.

    Errors are ``ConfigError`` located at ``source`` and ``path``.
    """
    if isinstance(spec, Schedule):
        return spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        if not is_finite_number(spec):
            raise ConfigError(f"expected a finite number or a schedule, got {describe(spec)}", source=source, path=path)
        return Constant(value=float(spec), start_step=0, min=None, max=None)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"expected a number or a mapping with 'schedule', got {describe(spec)}", source=source, path=path)
    kind = spec.get("schedule")
    if not isinstance(kind, str) or kind not in SCHEDULES:
        raise ConfigError(
            f"expected one of {', '.join(SCHEDULES)}, got {describe(kind)}", source=source, path=f"{path}.schedule"
        )
    cls = SCHEDULES[kind]
    given = {k: v for k, v in spec.items() if k != "schedule"}
    try:
        config = validate_params(cls.params, given, path=path, source=source)
        return cls(**config)
    except ConfigError as exc:
        if exc.source is None:
            raise exc.within(source, path if not (exc.path or "").startswith(path) else None) from None
        raise


