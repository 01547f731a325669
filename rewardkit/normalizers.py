"""Per-term normalizers with running statistics that freeze in ``eval()`` mode.

- ``running_zscore``: ``(x - mean) / sqrt(var + eps)`` over every value seen so far.
- ``running_minmax``: ``(x - min) / (max - min)``; 0 while max equals min.
- ``return_std``: ``x / sqrt(var(G) + eps)`` where ``G`` is each environment's discounted
  return, reset at episode end, without subtracting a mean (as Stable-Baselines3's VecNormalize
  scales rewards), so the sign and the optimum of the reward are kept.

Statistics are updated before the value is normalized (so the first value of a zscore is 0).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np

from .errors import ConfigError
from .params import Param, describe, validate_params

Array = np.ndarray


class RunningMoments:
    """Mean and variance of a stream of batches (Chan et al.'s parallel update)."""

    def __init__(self) -> None:
        self.count = 0.0
        self.mean = 0.0
        self.m2 = 0.0

    def update(self, x: Array) -> None:
        n = x.size
        if n == 0:
            return
        if n == 1:
            v = float(x.reshape(-1)[0])
            self.count += 1.0
            d = v - self.mean
            self.mean += d / self.count
            self.m2 += d * (v - self.mean)
            return
        bmean = float(x.mean())
        bm2 = float(((x - bmean) ** 2).sum())
        total = self.count + n
        d = bmean - self.mean
        self.mean += d * n / total
        self.m2 += bm2 + d * d * self.count * n / total
        self.count = total

    def update_scalar(self, v: float) -> None:
        self.count += 1.0
        d = v - self.mean
        self.mean += d / self.count
        self.m2 += d * (v - self.mean)

    @property
    def var(self) -> float:
        return self.m2 / self.count if self.count > 0 else 1.0

    def state_dict(self) -> dict[str, float]:
        return {"count": self.count, "mean": self.mean, "m2": self.m2}

    def load_state_dict(self, s: Mapping[str, float]) -> None:
        self.count, self.mean, self.m2 = float(s["count"]), float(s["mean"]), float(s["m2"])


class Normalizer:
    """Base class: ``normalizer(x, done, training) -> normalized`` for arrays of shape (n_envs,)."""

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}

    def __init__(self, **config: Any) -> None:
        self.config = config
        for k, v in config.items():
            setattr(self, k, v)

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        raise NotImplementedError

    def scalar(self, x: float, done: bool, training: bool) -> float:
        """Single-environment path on floats (same numbers as the array path)."""
        return float(self(np.array([x]), np.array([done]), training)[0])

    def reset(self, mask: Array | None = None) -> None:
        """Forget per-environment state (not the statistics), where ``mask`` is true or everywhere."""

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def to_spec(self) -> dict[str, Any]:
        return {"type": self.name, **self.config}


class RunningZScore(Normalizer):
    """Subtract the running mean and divide by the running standard deviation."""

    name = "running_zscore"
    params = {"eps": Param.positive(1e-8, "added to the variance"),
              "clip": Param(None, "clip the result to [-clip, clip]", "a positive number or null",
                            lambda v: None if v is None else Param.positive().check(v))}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.moments = RunningMoments()

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        if training:
            self.moments.update(x)
        out = (x - self.moments.mean) / math.sqrt(self.moments.var + self.eps)
        return np.clip(out, -self.clip, self.clip) if self.clip is not None else out

    def scalar(self, x: float, done: bool, training: bool) -> float:
        m = self.moments
        if training:
            m.update_scalar(x)
        out = (x - m.mean) / math.sqrt(m.var + self.eps)
        if self.clip is not None:
            out = min(self.clip, max(-self.clip, out))
        return out

    def state_dict(self) -> dict[str, Any]:
        return self.moments.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.moments.load_state_dict(state)


class RunningMinMax(Normalizer):
    """Rescale by the running minimum and maximum into [0, 1] (0 while they are equal)."""

    name = "running_minmax"
    params: ClassVar[dict[str, Param]] = {}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.low, self.high = math.inf, -math.inf

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        if training and x.size:
            self.low = min(self.low, float(x.min()))
            self.high = max(self.high, float(x.max()))
        span = self.high - self.low
        if not span > 0:
            return np.zeros_like(x)
        return (x - self.low) / span

    def scalar(self, x: float, done: bool, training: bool) -> float:
        if training:
            if x < self.low:
                self.low = x
            if x > self.high:
                self.high = x
        span = self.high - self.low
        return (x - self.low) / span if span > 0 else 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"low": _enc(self.low), "high": _enc(self.high)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.low, self.high = float(state["low"]), float(state["high"])


class ReturnStd(Normalizer):
    """Divide by the running std of each environment's discounted return (no mean subtraction)."""

    name = "return_std"
    params = {"gamma": Param.fraction(0.99, "discount of the tracked return"),
              "eps": Param.positive(1e-8, "added to the variance"),
              "clip": Param(None, "clip the result to [-clip, clip]", "a positive number or null",
                            lambda v: None if v is None else Param.positive().check(v))}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.moments = RunningMoments()
        self.returns: Array | None = None

    def __call__(self, x: Array, done: Array | None, training: bool) -> Array:
        if training:
            if self.returns is None or self.returns.shape != x.shape:
                self.returns = np.zeros_like(x)
            self.returns = self.returns * self.gamma + x
            self.moments.update(self.returns)
            if done is not None:
                self.returns[done] = 0.0
        out = x / math.sqrt(self.moments.var + self.eps)
        return np.clip(out, -self.clip, self.clip) if self.clip is not None else out

    def scalar(self, x: float, done: bool, training: bool) -> float:
        if training:
            if self.returns is None or self.returns.shape != (1,):
                self.returns = np.zeros(1)
            g = float(self.returns[0]) * self.gamma + x
            self.moments.update_scalar(g)
            self.returns[0] = 0.0 if done else g
        out = x / math.sqrt(self.moments.var + self.eps)
        if self.clip is not None:
            out = min(self.clip, max(-self.clip, out))
        return out

    def reset(self, mask: Array | None = None) -> None:
        if mask is None or self.returns is None:
            self.returns = None
        elif self.returns.shape == mask.shape:
            self.returns[mask] = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"moments": self.moments.state_dict(),
                "returns": None if self.returns is None else self.returns.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.moments.load_state_dict(state["moments"])
        r = state.get("returns")
        self.returns = None if r is None else np.asarray(r, dtype=np.float64)


def _enc(v: float) -> float | str:
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


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
    return cls(**validate_params(cls.params, given, path=path, source=source))
