"""Unannounced replica slowdowns: a seeded process saying how fast each replica runs at time ``t``.

A replica's speed at time ``t`` is its declared (static) speed times :meth:`SlowdownSchedule.factor`.
The schedule comes from :class:`SlowdownConfig` (the env YAML's ``slowdowns`` section) and the
episode seed only, never from routing decisions, so every router meets the same slowdowns for a
seed. Routers never see it; they can only notice that batches take longer
(:mod:`schedulers.routing.speed_estimator`).

The random process, per replica and independently: an alternating renewal process of normal
periods (exponential, mean ``mean_interval_s``) and slowdowns (duration uniform in
``duration_s``, speed multiplier uniform in ``factor``). At ``start_s`` a replica is already slow
with the stationary probability ``E[duration] / (E[duration] + mean_interval_s)`` (then for a
uniformly drawn remainder of a drawn duration), so on average that share of replicas is slow at
any time. Explicit ``events`` are added on top; overlapping slowdowns multiply.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

#: salt mixed into the episode seed so slowdowns and arrivals use unrelated streams.
_SEED_SALT = 0x5D0E


@dataclass(frozen=True)
class SlowdownEvent:
    """One explicit slowdown: ``replica`` runs at ``factor`` of its speed in ``[start_s, start_s + duration_s)``."""

    replica: int
    start_s: float
    duration_s: float
    factor: float


@dataclass(frozen=True)
class SlowdownConfig:
    """The ``slowdowns`` section of an env YAML (see the module docstring)."""

    #: mean normal time (s) between two slowdowns of one replica; ``None``: only explicit events.
    mean_interval_s: float | None = None
    #: range of slowdown durations (s), drawn uniformly.
    duration_s: tuple[float, float] = (30.0, 50.0)
    #: range of the speed multiplier during a slowdown, drawn uniformly, in (0, 1].
    factor: tuple[float, float] = (0.35, 0.45)
    #: no random slowdown is active before this simulated time (s).
    start_s: float = 0.0
    events: tuple[SlowdownEvent, ...] = field(default_factory=tuple)

    @property
    def stationary_slow_share(self) -> float:
        """Long-run share of time a replica spends slowed down by the random process."""
        if self.mean_interval_s is None:
            return 0.0
        mean_duration = 0.5 * (self.duration_s[0] + self.duration_s[1])
        return mean_duration / (mean_duration + self.mean_interval_s)


class _ReplicaIntervals:
    """The random slowdowns of one replica, drawn lazily in time order (so queries never change them)."""

    def __init__(self, cfg: SlowdownConfig, rng: np.random.Generator) -> None:
        self.cfg, self.rng = cfg, rng
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.factors: list[float] = []
        self.horizon = cfg.start_s
        if cfg.mean_interval_s is not None and rng.random() < cfg.stationary_slow_share:
            duration = rng.uniform(*cfg.duration_s)
            self._add(cfg.start_s, cfg.start_s + duration * rng.random(), rng.uniform(*cfg.factor))

    def _add(self, start: float, end: float, factor: float) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.factors.append(factor)
        self.horizon = end

    def extend_to(self, t: float) -> None:
        cfg, rng = self.cfg, self.rng
        if cfg.mean_interval_s is None:
            return
        while self.horizon <= t:
            start = self.horizon + rng.exponential(cfg.mean_interval_s)
            self._add(start, start + rng.uniform(*cfg.duration_s), rng.uniform(*cfg.factor))

    def factor(self, t: float) -> float:
        self.extend_to(t)
        k = bisect.bisect_right(self.starts, t) - 1
        return self.factors[k] if k >= 0 and t < self.ends[k] else 1.0


class SlowdownSchedule:
    """Per-replica speed multipliers over time for one episode (``cfg=None``: never slowed)."""

    def __init__(self, cfg: SlowdownConfig | None, num_replicas: int, seed: int) -> None:
        self.cfg, self.num_replicas, self.seed = cfg, int(num_replicas), int(seed)
        self._replicas = (
            [_ReplicaIntervals(cfg, np.random.default_rng([_SEED_SALT, int(seed), r])) for r in range(num_replicas)]
            if cfg is not None
            else []
        )
        self._events = [e for e in (cfg.events if cfg is not None else ()) if e.replica < num_replicas]

    def factor(self, replica: int, t: float) -> float:
        """Speed multiplier of ``replica`` at simulated time ``t`` (1.0 when not slowed)."""
        if not self._replicas:
            return 1.0
        value = self._replicas[replica].factor(t)
        for e in self._events:
            if e.replica == replica and e.start_s <= t < e.start_s + e.duration_s:
                value *= e.factor
        return value

    def factors(self, t: float) -> np.ndarray:
        """Speed multipliers of every replica at time ``t``."""
        return np.array([self.factor(r, t) for r in range(self.num_replicas)])

    def intervals(self, until: float) -> list[tuple[int, float, float, float]]:
        """``(replica, start, end, factor)`` of random and explicit slowdowns starting before ``until``."""
        out = []
        for r, rep in enumerate(self._replicas):
            rep.extend_to(until)
            out += [(r, s, e, f) for s, e, f in zip(rep.starts, rep.ends, rep.factors, strict=True) if s < until]
        out += [(e.replica, e.start_s, e.start_s + e.duration_s, e.factor) for e in self._events if e.start_s < until]
        return sorted(out, key=lambda x: (x[1], x[0]))

    def slow_share(self, until: float, threshold: float = 0.999) -> float:
        """Share of replica-time in ``[0, until)`` spent below ``threshold`` of declared speed (sampled on a grid)."""
        grid = np.linspace(0.0, until, 2001)[:-1]
        return float(np.mean([[self.factor(r, t) < threshold for t in grid] for r in range(self.num_replicas)]))
