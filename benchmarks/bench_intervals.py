"""How often does the validation guard call a win that is not there, and how often does it find one that is?

Simulates the validation table of ``rewardkit optimize`` (the base and K finalists, R paired repeats
of S seeds) with the noise structure the router benchmark measured: a seed effect every config shares,
a training-run effect of each config's own repeat (large for the base, smaller for the finalists), and
per-seed noise. Finalists are either near neighbours (their training effects move together, as the
search's top configs usually do) or independent. For each simultaneous adjustment (the joint
min-p tail the guard uses, Bonferroni for comparison) it prints:

- false alarm: share of null studies (no finalist truly better) where some interval excludes zero
  on the improving side (the guard would export a finalist; nominal at most 5% for 90% intervals);
- coverage: share where every finalist's interval holds its true change (nominal 90%);
- power: share of studies where a finalist truly 20% (or 35%) better is found.

Usage: ``python benchmarks/bench_intervals.py [--studies 1000]`` (about a minute per 1000).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewardkit.optimize.intervals import paired_changes  # noqa: E402

BASE = 0.30          # the base's mean (the hybrid benchmark's validation mean was 0.303)
SEED_SD = 0.05       # shared by every config on a seed
BASE_TRAIN_SD = 0.09  # one training run of the base (measured: sd 0.090 over 5 repeats)
CAND_TRAIN_SD = 0.03  # one training run of a finalist (measured: 0.028-0.032)
NOISE_SD = 0.02      # per seed and run


def simulate(rng: np.random.Generator, k: int, repeats: int, seeds: int, gains: list[float],
             neighbours: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    """One validation table: the base's (R, S) values and each finalist's; ``gains`` are true relative changes."""
    seed_effect = rng.normal(0, SEED_SD, (repeats, seeds))
    base = BASE + seed_effect + rng.normal(0, BASE_TRAIN_SD, (repeats, 1)) + rng.normal(0, NOISE_SD, (repeats, seeds))
    shared = rng.normal(0, CAND_TRAIN_SD, (repeats, 1))
    cands = []
    for gain in gains[:k]:
        if neighbours:  # the finalists' training runs move together
            own = shared + rng.normal(0, CAND_TRAIN_SD * 0.1, (repeats, 1))
        else:
            own = rng.normal(0, CAND_TRAIN_SD, (repeats, 1))
        cands.append(BASE * (1 + gain) + seed_effect + own + rng.normal(0, NOISE_SD, (repeats, seeds)))
    return base, cands


def rates(adjust: str, k: int, repeats: int, neighbours: bool, studies: int, gain: float) -> tuple[float, float]:
    """(share of studies calling some finalist better, share where all intervals cover the truth)."""
    rng = np.random.default_rng(repeats * 1000 + k * 10 + neighbours)
    gains = [gain] + [0.0] * (k - 1)
    called = covered = 0
    for i in range(studies):
        base, cands = simulate(rng, k, repeats, 3, gains, neighbours)
        changes = paired_changes(cands, base, "minimize", 0.90, seed=i, n_resamples=2000, adjust=adjust)
        called += any(c.improves("minimize") for c in changes)
        covered += all(c.low <= BASE * g <= c.high for c, g in zip(changes, gains, strict=True))
    return called / studies, covered / studies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=1000, help="simulated validation tables per row")
    args = parser.parse_args(argv)
    header = (f"{'finalists':<22}{'R':>3}  {'adjust':<11}{'false alarm':>12}{'coverage':>10}"
              f"{'power -20%':>12}{'power -35%':>12}")
    print(f"{args.studies} simulated validations per row, 3 finalists, 3 seeds per repeat, 90% intervals")
    print(header)
    print("-" * len(header))
    for neighbours in (True, False):
        for repeats in (3, 5):
            for adjust in ("joint", "bonferroni"):
                alarm, coverage = rates(adjust, 3, repeats, neighbours, args.studies, 0.0)
                power20, _ = rates(adjust, 3, repeats, neighbours, args.studies, -0.20)
                power35, _ = rates(adjust, 3, repeats, neighbours, args.studies, -0.35)
                kind = "near neighbours" if neighbours else "independent"
                print(f"{kind:<22}{repeats:>3}  {adjust:<11}{alarm:>12.1%}{coverage:>10.1%}{power20:>12.1%}{power35:>12.1%}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
