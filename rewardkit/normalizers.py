"""Per-term normalizers with running statistics that freeze in ``eval()`` mode.

- ``running_zscore``: ``(x - mean) / sqrt(var + eps)`` over every value seen so far.
- ``running_minmax``: ``(x - min) / (max - min)``; 0 while max equals min.
- ``return_std``: ``x / sqrt(var(G) + eps)`` clipped to [-10, 10], where ``G`` is each
  environment's discounted return, reset at episode end, without subtracting a mean (as
  Stable-Baselines3's VecNormalize scales rewards), so the sign and the optimum of the reward are
  kept. Its statistics start at variance 1, as VecNormalize's do.

Statistics are updated before the value is normalized (so the first value of a zscore is 0).
Every running mean and variance here (and the trainer's reward scaling) is one
:class:`RunningMeanStd`. Statistics stay finite: a value whose update would overflow them (values
more than about 1e154 apart have no float64 variance) raises ``InvalidInputError`` and changes
nothing, and results beyond the float64 range saturate at its largest finite float.
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar, Mapping

import numpy as np

from .backend import array_namespace, checking, copy_array, detached, kind, library_of, like, quiet, saturate, to_numpy
from .errors import ConfigError, InvalidInputError
from .params import Param, describe, is_finite_number, validate_params

Array = np.ndarray
#: Largest finite float64: normalized values saturate here instead of overflowing.
FLOAT_MAX = float(np.finfo(np.float64).max)


class RunningMeanStd:
    """Running mean and variance of a stream of numbers (Chan et al.'s parallel update).

    The same statistics as Stable-Baselines3's ``RunningMeanStd``: before any data the mean is 0
    and the variance 1, weighted as ``epsilon`` pseudo-observations, so the first few updates are
    not divided by a near-zero spread. ``epsilon=0`` gives the plain sample moments (the variance
    reads 1 until the first value arrives). ``mean``, ``var`` and ``count`` are plain floats.
    """

    def __init__(self, epsilon: float = 1e-4) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon: expected a non-negative number, got {describe(epsilon)}")
        self.mean = 0.0
        self.var = 1.0
        self.count = float(epsilon)

    def update(self, batch: Any) -> None:
        """Fold in every value of ``batch`` (flattened). An empty batch changes nothing.

        NumPy arrays and array-likes keep ``mean`` and ``var`` as Python floats; another
        library's array (torch, JAX) keeps them as 0-d arrays of its dtype on its device, so the
        update never reads values back to the host. ``count`` is always a Python float.
        """
        if library_of(batch) in (None, "numpy"):
            x = np.asarray(batch, dtype=np.float64).reshape(-1)
            n = x.size
            if n == 0:
                return
            if n == 1 and self.mean.__class__ is float:
                self.update_scalar(float(x[0]))
                return
            with quiet():  # an overflow is refused below
                batch_mean = float(x.mean())
                batch_var = float(x.var())
            self._to_host()
        else:
            xp = array_namespace(batch)
            x = xp.reshape(detached(batch), (-1,))  # the statistics never hold an autograd graph
            n = int(x.shape[0])
            if n == 0:
                return
            if self.mean.__class__ is not float and kind(self.mean) != kind(x):
                self._to_host()  # held by another library's arrays
            batch_mean = xp.mean(x)
            batch_var = xp.var(x)
        total = self.count + n
        delta = batch_mean - self.mean  # Python floats (host) or 0-d arrays (no NumPy warnings)
        m2 = self.var * self.count + batch_var * n + delta * delta * self.count * n / total
        mean = self.mean + delta * n / total
        var = m2 / total
        # An overflow anywhere above ends in inf or NaN here (nothing brings an inf back to finite).
        if mean.__class__ is float:
            if not (math.isfinite(mean) and math.isfinite(var)):
                raise self._overflow(x)
        else:  # on a device: checked when input checks may synchronise, else the update is skipped
            finite = xp.isfinite(mean) & xp.isfinite(var)
            if checking():
                if not bool(finite):
                    raise self._overflow(x)
            else:
                mean, var = xp.where(finite, mean, self.mean), xp.where(finite, var, self.var)
        self.mean, self.var, self.count = mean, var, total

    def update_scalar(self, value: float) -> None:
        """Fold in one float (the composer's single-environment path; same numbers as ``update``)."""
        self._to_host()
        total = self.count + 1.0
        delta = value - self.mean
        mean = self.mean + delta / total
        var = (self.var * self.count + delta * delta * self.count / total) / total
        if not (math.isfinite(mean) and math.isfinite(var)):
            raise self._overflow(np.array([value]))
        self.mean, self.var, self.count = mean, var, total

    def _overflow(self, values: Any) -> InvalidInputError:
        """The error of an update whose mean or variance would leave the float64 range."""
        values = to_numpy(values)
        largest = float(values[np.argmax(np.abs(values))]) if values.size else math.nan
        return InvalidInputError(
            f"the running mean and variance would overflow float64 (a value of {largest!r} against a running "
            f"mean of {_host(self.mean)!r}); values more than about 1e154 apart have no finite variance: scale or "
            "clip the values before normalizing them (the statistics are unchanged)")

    def state_dict(self) -> dict[str, float]:
        """``{"mean", "var", "count"}`` as plain floats (read back from a device if held there)."""
        return {"mean": _host(self.mean), "var": _host(self.var), "count": float(self.count)}

    def _to_host(self) -> None:
        """Statistics that batched calls left as 0-d arrays (on a device) become Python floats."""
        if self.mean.__class__ is not float:
            self.mean, self.var = _host(self.mean), _host(self.var)

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        """Restore :meth:`state_dict` output; validated first (``ConfigError`` naming the key)."""
        values = _check_mapping(state, ("mean", "var", "count"), path)
        mean, var, count = (_finite(values[k], _join(path, k)) for k in ("mean", "var", "count"))
        if var < 0:
            raise ConfigError(f"expected a non-negative number, got {var!r}", path=_join(path, "var"))
        if count < 0:
            raise ConfigError(f"expected a non-negative number, got {count!r}", path=_join(path, "count"))
        self.mean, self.var, self.count = mean, var, count

    def snapshot(self) -> tuple[float, float, float]:
        return self.mean, self.var, self.count

    def restore(self, saved: tuple[float, float, float]) -> None:
        self.mean, self.var, self.count = saved


class Normalizer:
    """Base class: ``normalizer(x, done, training) -> normalized`` for arrays of shape (n_envs,).

    The composer keeps calls transactional with :meth:`snapshot` and :meth:`restore`: a call that
    fails anywhere leaves the statistics as they were before it.
    """

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    #: whether a call can raise at all (on float or float64-array input), and whether it then
    #: raises before changing any statistic: the composer snapshots only what it must.
    can_fail: ClassVar[bool] = False
    atomic_update: ClassVar[bool] = True
    #: where the normalizer was configured (``file: components.x.normalize``), for error messages
    where: str = ""

    def __init__(self, **config: Any) -> None:
        self.config = config
        for k, v in config.items():
            setattr(self, k, v)

    def _located(self, exc: InvalidInputError) -> InvalidInputError:
        """``exc`` with this normalizer's place in the config (and its type) in front."""
        label = f"{self.where} ({self.name})" if self.where else self.name
        return InvalidInputError(f"{label}: {exc}")

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        raise NotImplementedError

    def scalar(self, x: float, done: bool, training: bool) -> float:
        """Single-environment path on floats (same numbers as the array path)."""
        return float(self(np.array([x]), np.array([done]), training)[0])

    def reset(self, mask: Array | None = None) -> None:
        """Forget per-environment state (not the statistics), where ``mask`` is true or everywhere."""

    def n_envs(self) -> int | None:
        """Number of environments the per-environment state holds (None: none held)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        """Restore :meth:`state_dict` output; validates everything before writing anything."""
        raise NotImplementedError

    def snapshot(self) -> Any:
        """Everything a call may change, to hand back to :meth:`restore` if the call fails."""
        return copy.deepcopy(self.state_dict())

    def restore(self, saved: Any) -> None:
        self.load_state_dict(saved)

    def to_spec(self) -> dict[str, Any]:
        return {"type": self.name, **self.config}


def _clip_param(default: float | None) -> Param:
    return Param(default, "clip the result to [-clip, clip] (null: no clip)", "a positive number or null",
                 lambda v: None if v is None else Param.positive().check(v))


class RunningZScore(Normalizer):
    """Subtract the running mean and divide by the running standard deviation."""

    name = "running_zscore"
    params = {"eps": Param.positive(1e-8, "added to the variance"), "clip": _clip_param(None)}
    can_fail = True  # a value that would overflow the statistics (raised before they change)

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.moments = RunningMeanStd(epsilon=0.0)

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        if training:
            try:
                self.moments.update(x)
            except InvalidInputError as exc:
                raise self._located(exc) from None
        with quiet():  # overflows saturate below
            out = (x - self.moments.mean) / (self.moments.var + self.eps) ** 0.5
        if self.clip is not None:
            return array_namespace(out).clip(out, -self.clip, self.clip)
        return saturate(out)  # a value far outside frozen statistics (eval) may overflow

    def scalar(self, x: float, done: bool, training: bool) -> float:
        m = self.moments
        if training:
            try:
                m.update_scalar(x)
            except InvalidInputError as exc:
                raise self._located(exc) from None
        out = (x - m.mean) / math.sqrt(m.var + self.eps)
        if self.clip is not None:
            return -self.clip if out < -self.clip else (self.clip if out > self.clip else out)  # NaN stays NaN
        return -FLOAT_MAX if out < -FLOAT_MAX else (FLOAT_MAX if out > FLOAT_MAX else out)

    def state_dict(self) -> dict[str, Any]:
        return self.moments.state_dict()

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        self.moments.load_state_dict(state, path)

    def snapshot(self) -> Any:
        return self.moments.snapshot()

    def restore(self, saved: Any) -> None:
        self.moments.restore(saved)


class RunningMinMax(Normalizer):
    """Rescale by the running minimum and maximum into [0, 1] (0 while they are equal)."""

    name = "running_minmax"
    params: ClassVar[dict[str, Param]] = {}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.low, self.high = math.inf, -math.inf

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        if isinstance(x, np.ndarray):
            if training and x.size:
                self.low = min(_host(self.low), float(x.min()))
                self.high = max(_host(self.high), float(x.max()))
            low, high = _host(self.low), _host(self.high)
            span = high - low
            if not span > 0:
                return np.zeros_like(x)
            with quiet():  # a value beyond frozen bounds (eval) may overflow: saturated
                if span < math.inf:
                    return saturate((x - low) / span)
                # bounds more than the float64 range apart: halved first (exact), which cannot overflow
                return saturate((x * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5))
        # another library: the bounds stay 0-d arrays on the inputs' device (no read-back)
        xp = array_namespace(x)
        low, high = _on(self.low, x), _on(self.high, x)
        if training and x.shape[0]:
            seen = detached(x)  # the bounds never hold an autograd graph
            low, high = xp.minimum(low, xp.min(seen)), xp.maximum(high, xp.max(seen))
            self.low, self.high = low, high
        span = high - low
        positive = span > 0
        wide = xp.isinf(span)  # bounds more than the float64 range apart: halved first (exact)
        # both denominators guarded: where() passes a zero gradient to the branch it drops, and 0 * inf is NaN
        halved = (x * 0.5 - low * 0.5) / xp.where(positive, high * 0.5 - low * 0.5, 1.0)
        scaled = xp.where(wide, halved, (x - low) / xp.where(positive, span, 1.0))
        return xp.where(positive, saturate(scaled), 0.0)

    def scalar(self, x: float, done: bool, training: bool) -> float:
        if self.low.__class__ is not float or self.high.__class__ is not float:
            self.low, self.high = _host(self.low), _host(self.high)
        if training:
            if x < self.low:
                self.low = x
            if x > self.high:
                self.high = x
        low, high = self.low, self.high
        span = high - low
        if not span > 0:
            return 0.0
        out = (x - low) / span if span < math.inf else (x * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)
        return -FLOAT_MAX if out < -FLOAT_MAX else (FLOAT_MAX if out > FLOAT_MAX else out)

    def state_dict(self) -> dict[str, Any]:
        return {"low": _enc(_host(self.low)), "high": _enc(_host(self.high))}

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        values = _check_mapping(state, ("low", "high"), path)
        low = _dec(values["low"], _join(path, "low"), "inf")
        high = _dec(values["high"], _join(path, "high"), "-inf")
        if (low, high) != (math.inf, -math.inf) and not low <= high:
            raise ConfigError(f"expected low <= high, got low={low!r} and high={high!r}", path=_join(path, "low"))
        self.low, self.high = low, high

    def snapshot(self) -> Any:
        return self.low, self.high

    def restore(self, saved: Any) -> None:
        self.low, self.high = saved


class ReturnStd(Normalizer):
    """Divide by the running std of each environment's discounted return (no mean subtraction).

    Starts like Stable-Baselines3's ``VecNormalize``: the return statistics begin at variance 1
    (weighted as 1e-4 observations) and the result is clipped to [-10, 10] unless ``clip`` says
    otherwise, so the first rewards of a run are not blown up by a near-zero spread.
    """

    name = "return_std"
    params = {"gamma": Param.fraction(0.99, "discount of the tracked return"),
              "eps": Param.positive(1e-8, "added to the variance"),
              "clip": _clip_param(10.0)}
    can_fail = True  # a call with another number of environments than the returns held

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.moments = RunningMeanStd()
        self.returns: Array | None = None

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        xp = array_namespace(x)
        if training:
            returns = self.returns
            if returns is None or tuple(returns.shape) != tuple(x.shape):
                if returns is not None:
                    raise ValueError(f"batch size changed from {returns.shape[0]} to {x.shape[0]}; "
                                     "call reset() before changing the number of environments")
                returns = xp.zeros_like(x)
            elif kind(returns) != kind(x):
                returns = like(returns, x)  # loaded or kept from another library or device
            returns = returns * self.gamma + detached(x)  # the running returns never hold an autograd graph
            try:  # an overflowing return makes the update raise before anything changes
                self.moments.update(returns)
            except InvalidInputError as exc:
                raise self._located(exc) from None
            self.returns = returns if done is None else xp.where(done, 0.0, returns)
        with quiet():
            out = x / (self.moments.var + self.eps) ** 0.5
        return xp.clip(out, -self.clip, self.clip) if self.clip is not None else saturate(out)

    def scalar(self, x: float, done: bool, training: bool) -> float:
        if training:
            returns = self.returns
            if returns is not None and not isinstance(returns, np.ndarray):
                returns = self.returns = to_numpy(returns).astype(np.float64)
            if returns is None or returns.shape != (1,):
                if returns is not None:
                    raise ValueError(f"batch size changed from {returns.shape[0]} to 1; "
                                     "call reset() before changing the number of environments")
                returns = self.returns = np.zeros(1)
            g = float(returns[0]) * self.gamma + x
            try:
                self.moments.update_scalar(g)
            except InvalidInputError as exc:
                raise self._located(exc) from None
            returns[0] = 0.0 if done else g
        out = x / math.sqrt(self.moments.var + self.eps)
        if self.clip is not None:
            return -self.clip if out < -self.clip else (self.clip if out > self.clip else out)  # NaN stays NaN
        return -FLOAT_MAX if out < -FLOAT_MAX else (FLOAT_MAX if out > FLOAT_MAX else out)

    def reset(self, mask: Array | None = None) -> None:
        if mask is None or self.returns is None:
            self.returns = None
        elif tuple(self.returns.shape) == tuple(mask.shape):
            if library_of(mask) != library_of(self.returns) or kind(mask)[2] != kind(self.returns)[2]:
                mask = like(mask, self.returns, dtype=array_namespace(self.returns).bool)
            self.returns = array_namespace(self.returns).where(mask, 0.0, self.returns)
        else:
            raise ValueError(f"reset mask has {mask.shape[0]} environments; the running returns have "
                             f"{self.returns.shape[0]}")

    def n_envs(self) -> int | None:
        return None if self.returns is None else int(self.returns.shape[0])

    def state_dict(self) -> dict[str, Any]:
        return {"moments": self.moments.state_dict(),
                "returns": None if self.returns is None else [float(v) for v in to_numpy(self.returns).tolist()]}

    def load_state_dict(self, state: Mapping[str, Any], path: str = "") -> None:
        values = _check_mapping(state, ("moments", "returns"), path)
        moments = RunningMeanStd()
        moments.load_state_dict(values["moments"], _join(path, "moments"))
        r = values["returns"]
        returns = None if r is None else _finite_list(r, _join(path, "returns"))
        self.moments, self.returns = moments, returns

    def snapshot(self) -> Any:
        return self.moments.snapshot(), None if self.returns is None else copy_array(self.returns)

    def restore(self, saved: Any) -> None:
        moments, returns = saved
        self.moments.restore(moments)
        self.returns = returns


# ---- state validation helpers (shared with rewardkit.base) ------------------------------------
def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_mapping(state: Any, keys: tuple[str, ...], path: str) -> Mapping[str, Any]:
    """``state`` as a mapping with exactly ``keys``; ``ConfigError`` naming the key path otherwise."""
    if not isinstance(state, Mapping):
        raise ConfigError(f"expected a mapping with keys {', '.join(keys)}, got {describe(state)}", path=path or None)
    for key in state:
        if key not in keys:
            raise ConfigError(f"unknown key; expected one of: {', '.join(keys)}", path=_join(path, str(key)))
    for key in keys:
        if key not in state:
            raise ConfigError("missing key", path=_join(path, key))
    return state


def _finite(value: Any, path: str) -> float:
    if not is_finite_number(value) and not (isinstance(value, np.floating) and math.isfinite(value)):
        raise ConfigError(f"expected a finite number, got {describe(value)}", path=path)
    return float(value)


def _finite_list(value: Any, path: str) -> Array:
    """A non-empty list of finite numbers as a float64 array."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"expected a non-empty list of finite numbers, got {describe(value)}", path=path)
    return np.array([_finite(v, f"{path}[{i}]") for i, v in enumerate(value)], dtype=np.float64)


def _host(v: Any) -> float:
    """A statistic as a Python float (read back from a device when a batched call left it there)."""
    return v if v.__class__ is float else float(to_numpy(v))


def _on(v: Any, ref: Any) -> Any:
    """A statistic as a 0-d array of ``ref``'s library, device and dtype."""
    if v.__class__ is not float and kind(v) == kind(ref):
        return v
    return like(_host(v), ref)


def _enc(v: float) -> float | str:
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


def _dec(v: Any, path: str, infinite: str) -> float:
    """A finite number, or the string ``infinite`` ("inf"/"-inf": the bound before any data)."""
    if v == infinite and isinstance(v, str):
        return float(v)
    if isinstance(v, str):
        raise ConfigError(f"expected a finite number or {infinite!r}, got {describe(v)}", path=path)
    return _finite(v, path)


NORMALIZERS: dict[str, type[Normalizer]] = {c.name: c for c in (RunningZScore, RunningMinMax, ReturnStd)}


def make_normalizer(spec: Any, *, path: str, source: str | None = None) -> Normalizer | None:
    """Build a normalizer from ``null``, a name, or ``{type: name, ...params}``."""
    if spec is None or isinstance(spec, Normalizer):
        return spec
    if isinstance(spec, str):
        kind, given = spec, {}
    elif isinstance(spec, Mapping):
        kind = spec.get("type")
        given = {k: v for k, v in spec.items() if k != "type"}
    else:
        raise ConfigError(f"expected a normalizer name or a mapping with 'type', got {describe(spec)}", source=source, path=path)
    if not isinstance(kind, str) or kind not in NORMALIZERS:
        where = path if isinstance(spec, str) else f"{path}.type"
        raise ConfigError(f"expected one of {', '.join(NORMALIZERS)}, got {describe(kind)}", source=source, path=where)
    cls = NORMALIZERS[kind]
    normalizer = cls(**validate_params(cls.params, given, path=path, source=source))
    normalizer.where = f"{source}: {path}" if source else path
    return normalizer
