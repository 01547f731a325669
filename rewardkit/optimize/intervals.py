"""Paired bootstrap intervals: how much better than the base is each candidate, and how sure are we.

Each candidate and the base are evaluated on the same repeats (same seeds, same training seed per
repeat), so their values pair up, repeat by repeat and seed by seed. The difference of a pair
cancels what the two share (a hard seed, a lucky arrival pattern). The interval is a two-stage
(hierarchical) bootstrap of the mean difference: repeats are resampled first, because seeds of one
repeat share a training run and are not independent, then seeds within each chosen repeat.

Choosing the best of K candidates on the same data biases its interval toward a win, so the
intervals are simultaneous: all K cover together with probability ``level``. All resamples use the
same indices for every candidate, so the joint spread of the K resampled means is known, and the
per-candidate tail is read from it (:func:`joint_tail`, the bootstrap "min-p" adjustment): the
``1 - level`` quantile of the smallest two-sided tail probability any candidate reaches in a
resample. The candidates' differences all contain the base's noise (and finalists are often near
neighbours), so they move together; Bonferroni's ``(1 - level) / K`` ignores that and is the
bound this tail never falls below. With few repeats a percentile bootstrap is
too narrow; each resampled mean is widened around the observed one by ``sqrt(R / (R - 1))``
(the "expanded percentile" correction for R clusters), which keeps the false-alarm rate near its
nominal level at R = 3 (tests/rewardkit/optimize/test_validation.py measures it).

The race of validation (:func:`paired_t_changes`) uses Student-t intervals on the per-repeat paired
differences instead, Bonferroni over the candidates: its looks ask for far tails (1.25% at each of
four looks), where the bootstrap of 3 to 12 repeats is too narrow (2-4% false alarms measured where
1.25% was asked); the t interval is exact for normal noise at any number of repeats.

NumPy only: this module is imported by the optimizer and its tests, not by rewardkit at import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

N_RESAMPLES = 4000


@dataclass(frozen=True)
class Change:
    """A candidate's mean difference to the base (candidate minus base) and its interval."""

    mean: float
    low: float
    high: float
    wins: int          # repeats where the candidate's mean is better than the base's
    repeats: int

    def relative(self, base_mean: float) -> tuple[float, float, float]:
        """(mean, low, high) as fractions of ``|base_mean|`` (NaN when the base's mean is 0)."""
        scale = abs(base_mean) or float("nan")
        return self.mean / scale, self.low / scale, self.high / scale

    def improves(self, direction: str) -> bool:
        """True when the whole interval lies on the improving side of zero."""
        return self.high < 0 if direction == "minimize" else self.low > 0

    def worsens(self, direction: str) -> bool:
        """True when the whole interval lies on the worsening side of zero."""
        return self.low > 0 if direction == "minimize" else self.high < 0


def as_matrix(values: Sequence[Sequence[float]]) -> np.ndarray:
    """Per-repeat lists of per-seed values as an (R, S) array; every repeat must have S values."""
    lengths = {len(v) for v in values}
    if len(values) == 0 or len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"expected the same positive number of values in each repeat, got lengths {sorted(lengths)}")
    out = np.asarray(values, dtype=float)
    if not np.isfinite(out).all():
        raise ValueError("expected finite values")
    return out


def paired_changes(candidates: Sequence[np.ndarray], base: np.ndarray, direction: str = "minimize",
                   level: float = 0.90, seed: int = 0, n_resamples: int = N_RESAMPLES,
                   adjust: str = "joint") -> list[Change]:
    """Simultaneous ``level`` intervals of each candidate's mean paired difference to ``base``.

    ``candidates[k]`` and ``base`` are (R, S) arrays (repeat x seed) measured on the same seeds.
    ``adjust`` is how the K intervals are made simultaneous: ``"joint"`` (from the resamples' joint
    spread, :func:`joint_tail`) or ``"bonferroni"`` (kept to measure the two side by side,
    benchmarks/bench_intervals.py). The resampling is seeded: the same values give the same intervals.
    """
    if adjust not in ("joint", "bonferroni"):
        raise ValueError(f"expected adjust 'joint' or 'bonferroni', got {adjust!r}")
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"expected minimize or maximize, got {direction!r}")
    if not 0 < level < 1:
        raise ValueError(f"expected a level in (0, 1), got {level}")
    scale = _scale([base, *candidates])  # values near the float limit: differences taken at a safe scale
    base = np.asarray(base, float) / scale
    diffs = np.stack([np.asarray(c, float) / scale - base for c in candidates]) if len(candidates) \
        else np.zeros((0,) + base.shape)
    if diffs.shape[1:] != base.shape:
        raise ValueError(f"expected every candidate shaped like the base {base.shape}, got {diffs.shape[1:]}")
    k, n_rep, n_seed = diffs.shape
    rng = np.random.default_rng(seed)
    reps = rng.integers(0, n_rep, size=(n_resamples, n_rep))
    seeds = rng.integers(0, n_seed, size=(n_resamples, n_rep, n_seed))
    # resampled[k, b] = mean over the chosen repeats and, within each, the chosen seeds
    picked = diffs[:, reps[..., None], seeds]            # (K, B, R, S)
    resampled = picked.mean(axis=(2, 3))
    observed = diffs.mean(axis=(1, 2))
    tail = joint_tail(resampled, level) if adjust == "joint" else (1 - level) / max(k, 1) / 2
    if n_rep > 1:
        resampled = observed[:, None] + (resampled - observed[:, None]) * few_repeats_factor(n_rep, tail)
    lows = np.quantile(resampled, tail, axis=1) if k else []
    highs = np.quantile(resampled, 1 - tail, axis=1) if k else []
    per_repeat = diffs.mean(axis=2)
    better = per_repeat < 0 if direction == "minimize" else per_repeat > 0
    with np.errstate(over="ignore"):
        return [Change(float(observed[i] * scale), float(lows[i] * scale), float(highs[i] * scale),
                       int(better[i].sum()), n_rep) for i in range(k)]


def _scale(arrays: Sequence[np.ndarray]) -> float:
    """A power of two at most the largest magnitude (1 for values up to 1): dividing by it is exact
    and leaves values below 2, whose sums and differences stay finite near the float limit."""
    top = max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)
    return math.ldexp(1.0, math.frexp(top)[1] - 1) if top > 1.0 else 1.0


def safe_mean(values: Sequence[float]) -> float:
    """The mean of finite values, also near the float limit (where ``statistics.fmean`` overflows)."""
    arr = np.asarray(values, float)
    scale = _scale([arr])
    return float(np.mean(arr / scale) * scale)


def safe_stdev(values: Sequence[float]) -> float:
    """The sample standard deviation of finite values, also near the float limit (NaN for one value)."""
    arr = np.asarray(values, float)
    if arr.size < 2:
        return float("nan")
    scale = _scale([arr])
    with np.errstate(over="ignore"):
        return float(np.std(arr / scale, ddof=1) * scale)


def paired_t_changes(candidates: Sequence[np.ndarray], base: np.ndarray, direction: str = "minimize",
                     level: float = 0.90) -> list[Change]:
    """Simultaneous ``level`` intervals of each candidate's mean paired difference to ``base``: a
    Student-t interval on the R per-repeat differences (each the mean over the repeat's seeds, paired
    seed by seed), Bonferroni over the K candidates. ``candidates[k]`` and ``base`` are (R, S), R >= 2."""
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"expected minimize or maximize, got {direction!r}")
    if not 0 < level < 1:
        raise ValueError(f"expected a level in (0, 1), got {level}")
    from scipy import stats

    scale = _scale([base, *candidates])
    base = np.asarray(base, float) / scale
    out = []
    tail = (1 - level) / max(len(candidates), 1) / 2
    for cand in candidates:
        cand = np.asarray(cand, float) / scale
        if cand.shape != base.shape or base.shape[0] < 2:
            raise ValueError(f"expected every candidate shaped like the base {base.shape} with 2+ repeats, "
                             f"got {cand.shape}")
        per_repeat = (cand - base).mean(axis=1)
        n = per_repeat.size
        mean = float(per_repeat.mean())
        half = float(stats.t.ppf(1 - tail, n - 1) * per_repeat.std(ddof=1) / np.sqrt(n))
        better = per_repeat < 0 if direction == "minimize" else per_repeat > 0
        with np.errstate(over="ignore"):
            out.append(Change(mean * scale, (mean - half) * scale, (mean + half) * scale, int(better.sum()), n))
    return out


def joint_tail(resampled: np.ndarray, level: float) -> float:
    """The per-candidate tail probability that makes K intervals cover together at ``level``.

    ``resampled`` is (K, B): each candidate's bootstrap means over the same B resamples. Each
    resample's two-sided tail probability is taken within its own candidate (mid-ranks, so a
    candidate without spread never counts); the smallest over candidates is the resample's min-p,
    and its ``1 - level`` quantile is the tail. Between Bonferroni's ``(1 - level) / 2K``
    (independent candidates are close to it) and ``(1 - level) / 2`` (one candidate, or K copies).
    """
    k, b = resampled.shape
    if k == 0:
        return (1 - level) / 2
    ordered = np.sort(resampled, axis=1)
    mid_ranks = np.stack([(np.searchsorted(o, r, "left") + np.searchsorted(o, r, "right")) / (2 * b)
                          for o, r in zip(ordered, resampled, strict=True)])
    min_p = np.minimum(mid_ranks, 1 - mid_ranks).min(axis=0)
    tail = float(np.quantile(min_p, 1 - level))
    return float(np.clip(tail, (1 - level) / (2 * k), (1 - level) / 2))


def few_repeats_factor(n_repeats: int, tail: float) -> float:
    """How much wider than the bootstrap's a ``1 - tail`` quantile must be with ``n_repeats`` clusters.

    The bootstrap of R cluster means is narrow by ``sqrt((R - 1) / R)`` and has normal tails where
    the mean of R noisy runs has Student-t tails with R - 1 degrees of freedom: the factor is
    ``sqrt(R / (R - 1)) * t_{R-1}(1 - tail) / z(1 - tail)``.
    """
    from scipy import stats

    q = 1 - tail
    return float(np.sqrt(n_repeats / (n_repeats - 1)) * stats.t.ppf(q, n_repeats - 1) / stats.norm.ppf(q))


def resolvable_difference(spread: float, repeats: int) -> float:
    """The smallest difference of means that ``repeats`` paired repeats resolve, from one repeat's
    standard deviation ``spread``: ``1.645 * spread * sqrt(2 / repeats)`` (one-sided 5%)."""
    return 1.645 * spread * float(np.sqrt(2.0 / max(repeats, 1)))
