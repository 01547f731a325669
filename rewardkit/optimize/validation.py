"""After the search: measure the noise, re-run the best configs on validation seeds, give a verdict.

The best of many noisy trials is the luckiest as much as the best. So:

1. **Noise** (:func:`measure_noise`, before the search): the base config runs ``repeats`` times
   on validation seeds; the spread of those repeats is the noise, and from it the smallest
   difference the study can resolve. These runs are also the base's validation runs.
2. **Validation** (:func:`validate`, after the search): the top ``k`` distinct configs of the
   search run ``repeats`` times each on the same validation seeds as the base (paired: repeat
   ``r`` of every config has the same seeds and training seed). The winner is the best by its
   validation mean, never by its search value.
3. **Verdict**: each candidate's change against the base with a 90% paired bootstrap interval,
   simultaneous over the ``k`` candidates (:mod:`.intervals`). The winner is exported only when its
   interval excludes "no improvement"; otherwise the base is, with ``no reliable improvement over
   the base``.

Every evaluation is stored in the study as it finishes (:mod:`.evaluations`): a killed run resumes
without recomputing any.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optuna.trial import TrialState

from ..composer import RewardComposer
from ..errors import ConfigError
from .evaluations import Evaluation, EvaluationStore, Job, config_key, run_missing
from .intervals import Change, as_matrix, paired_changes, resolvable_difference
from .optimizer import counted_trials, write_reward_yaml
from .results import format_table
from .trial_context import COST_ATTR, validation_seeds

if TYPE_CHECKING:
    from .optimizer import BayesianRewardOptimizer

PHASE = "validate"
LEVEL = 0.90
NO_IMPROVEMENT = "no reliable improvement over the base"


@dataclass(frozen=True)
class Candidate:
    """A config re-run in validation: the base, or a trial's sampled values."""

    label: str
    params: dict[str, Any]
    search_value: float | None

    @property
    def key(self) -> str:
        return config_key(self.params)


@dataclass(frozen=True)
class Noise:
    """The base's spread over repeats, and what that lets the study resolve."""

    values: list[float]
    repeats: int

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def spread(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else float("nan")

    def describe(self) -> str:
        rel = self.spread / abs(self.mean) if self.mean else float("nan")
        one = resolvable_difference(self.spread, 1)
        many = resolvable_difference(self.spread, self.repeats)
        return (f"noise: the base over {self.repeats} repeats (each its own training seed and seeds): mean "
                f"{self.mean:.4g}, sd {self.spread:.3g} ({rel:.1%} of the mean); smallest resolvable difference "
                f"~{one:.3g} ({one / abs(self.mean):.1%}) between single runs, ~{many:.3g} "
                f"({many / abs(self.mean):.1%}) with {self.repeats} paired repeats")


@dataclass
class Validation:
    """The validation table's rows, the winner and what to export."""

    candidates: list[Candidate]
    evaluations: dict[tuple[str, int], Evaluation]
    changes: list[Change]
    seeds: list[list[int]]
    direction: str

    @property
    def base(self) -> Candidate:
        return self.candidates[0]

    def means(self, cand: Candidate) -> float:
        return statistics.fmean(self.evaluations[(cand.key, r)].value for r in range(len(self.seeds)))

    @property
    def winner(self) -> tuple[Candidate, Change] | None:
        """The best candidate by validation mean with its change (None with no candidate but the base)."""
        pairs = list(zip(self.candidates[1:], self.changes, strict=True))
        if not pairs:
            return None
        sign = 1 if self.direction == "minimize" else -1
        return min(pairs, key=lambda p: sign * p[1].mean)

    @property
    def improved(self) -> bool:
        win = self.winner
        return win is not None and win[1].improves(self.direction)

    @property
    def chosen(self) -> Candidate:
        """What to export: the winner when its interval excludes no improvement, else the base."""
        win = self.winner
        return win[0] if win is not None and self.improved else self.base

    def seeds_text(self) -> str:
        flat = [s for repeat in self.seeds for s in repeat]
        return f"{min(flat)}-{max(flat)}" if flat == list(range(min(flat), max(flat) + 1)) else str(flat)

    def table(self) -> str:
        base_mean = self.means(self.base)
        k = len(self.candidates) - 1
        header = ["candidate", "search value", "validation mean", "change vs base",
                  f"{LEVEL:.0%} interval{' (simultaneous)' if k > 1 else ''}", "better in"]
        rows = [[self.base.label, _num(self.base.search_value), f"{base_mean:.4g}", "-", "-", "-"]]
        for cand, change in zip(self.candidates[1:], self.changes, strict=True):
            mean, low, high = change.relative(base_mean)
            rows.append([cand.label, _num(cand.search_value), f"{self.means(cand):.4g}", f"{mean:+.1%}",
                         f"{low:+.1%} to {high:+.1%}", f"{change.wins}/{change.repeats}"])
        title = (f"validation: {len(self.seeds)} paired repeats on seeds {self.seeds_text()} (never used by the "
                 f"search), {self.direction}:")
        return title + "\n" + format_table(header, rows)

    def verdict(self, exported: Path | None = None) -> str:
        """One line: ``verdict: ...`` naming what was (or would be) exported and why."""
        win = self.winner
        where = f"; exported {'it' if self.improved else 'the base'} to {exported}" if exported else ""
        if win is None:
            return f"verdict: {NO_IMPROVEMENT} (no sampled config besides the base to validate){where}"
        cand, change = win
        mean, low, high = change.relative(self.means(self.base))
        stats = f"{mean:+.1%} ({LEVEL:.0%} interval {low:+.1%} to {high:+.1%}, {change.wins}/{change.repeats} repeats better)"
        if self.improved:
            return f"verdict: {cand.label} improves on the base by {stats} on validation seeds{where}"
        return f"verdict: {NO_IMPROVEMENT} (best candidate {cand.label}: {stats}){where}"

    def to_dict(self) -> dict[str, Any]:
        base_mean = self.means(self.base)
        rows = []
        for cand, change in zip(self.candidates[1:], self.changes, strict=True):
            mean, low, high = change.relative(base_mean)
            rows.append({"label": cand.label, "params": cand.params, "search_value": cand.search_value,
                         "validation_mean": self.means(cand), "change": mean, "low": low, "high": high,
                         "wins": change.wins})
        return {"seeds": self.seeds, "base_mean": base_mean, "candidates": rows,
                "chosen": self.chosen.label, "improved": self.improved, "verdict": self.verdict()}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def base_jobs(opt: "BayesianRewardOptimizer", repeats: int) -> list[Job]:
    """The base config's validation runs (also the noise measurement)."""
    return _jobs(opt, Candidate("base", {}, None), repeats)


def _jobs(opt: "BayesianRewardOptimizer", cand: Candidate, repeats: int) -> list[Job]:
    config = opt.base_config if not cand.params else opt.space.apply(opt.base_config, cand.params)
    training = opt.space.training_values(cand.params)
    return [Job(PHASE, cand.key, r, validation_seeds(opt.settings.n_seeds, r), config, cand.params, training,
                opt.study_dir / "validation" / cand.key / f"repeat_{r}") for r in range(repeats)]


def measure_noise(opt: "BayesianRewardOptimizer", repeats: int, workers: int = 1) -> Noise:
    """Run the base ``repeats`` times on validation seeds (stored; reused by :func:`validate`)."""
    _check_repeats(repeats, minimum=2)
    done = run_missing(EvaluationStore(opt.study), opt.objective, base_jobs(opt, repeats),
                       len(opt.settings.directions), workers, desc="noise (base repeats)",
                       show_progress=opt.show_progress, timeout=opt.trial_timeout)
    return Noise([done[("base", r)].value for r in range(repeats)], repeats)


def top_candidates(opt: "BayesianRewardOptimizer", k: int) -> list[Candidate]:
    """The ``k`` best complete trials with distinct configs (and training), none equal to the base."""
    seen = {json.dumps({"config": opt.base_config, "training": {}}, sort_keys=True, default=str)}
    out: list[Candidate] = []
    for trial in opt.best_trials():
        ident = json.dumps({"config": opt.config_of(trial), "training": opt.space.training_values(trial.params)},
                           sort_keys=True, default=str)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(Candidate(f"trial {trial.number}", dict(trial.params), float(trial.values[0])))
        if len(out) == k:
            break
    return out


def validate(opt: "BayesianRewardOptimizer", k: int = 3, repeats: int = 3, workers: int = 1) -> Validation:
    """Re-run the base and the top ``k`` configs on validation seeds, ``repeats`` times each, paired."""
    if len(opt.settings.directions) != 1:
        raise ConfigError("validation compares candidates on one objective; this study has "
                          f"{len(opt.settings.directions)} (use --validate 0)", path="validate")
    _check_repeats(repeats, minimum=2)
    candidates = [Candidate("base", {}, _base_search_value(opt))] + top_candidates(opt, k)
    jobs = [job for cand in candidates for job in _jobs(opt, cand, repeats)]
    done = run_missing(EvaluationStore(opt.study), opt.objective, jobs, 1, workers, desc="validation",
                       show_progress=opt.show_progress, timeout=opt.trial_timeout)
    widths = {len(done[(c.key, r)].per_seed()) for c in candidates for r in range(repeats)}
    if len(widths) != 1:  # an objective that records per-seed values for some runs only: pair on the means
        matrices = {c.key: as_matrix([[done[(c.key, r)].value] for r in range(repeats)]) for c in candidates}
    else:
        matrices = {c.key: as_matrix([done[(c.key, r)].per_seed() for r in range(repeats)]) for c in candidates}
    direction = opt.settings.directions[0]
    changes = paired_changes([matrices[c.key] for c in candidates[1:]], matrices["base"], direction, LEVEL)
    seeds = [validation_seeds(opt.settings.n_seeds, r) for r in range(repeats)]
    return Validation(candidates, done, changes, seeds, direction)


def _base_search_value(opt: "BayesianRewardOptimizer") -> float | None:
    """The search value of a trial that ran the base config itself (an enqueued base), if any."""
    for trial in counted_trials(opt.study, (TrialState.COMPLETE,)):
        if opt.config_of(trial) == opt.base_config and not opt.space.training_values(trial.params):
            return float(trial.values[0])
    return None


def _check_repeats(repeats: int, minimum: int) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < minimum:
        raise ConfigError(f"expected an integer >= {minimum} (repeats measure the noise), got {repeats!r}",
                          path="repeats")


def export(opt: "BayesianRewardOptimizer", validation: Validation, path: str | Path) -> Path:
    """Write the chosen config (the validated winner, else the base) and, if any, its training settings."""
    cand = validation.chosen
    config = opt.base_config if not cand.params else opt.space.apply(opt.base_config, cand.params)
    RewardComposer.from_dict(config, source=f"study {opt.study_name} {cand.label}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    why = validation.verdict().removeprefix("verdict: ")
    write_reward_yaml(path, config, f"study {opt.study_name}: {cand.label} exported; {why}")
    training = opt.space.training_values(cand.params)
    side = training_path(path)
    if training:
        side.write_text(f"# training settings of {cand.label} (study {opt.study_name}); dotted keys of the "
                        "objective's training config\n" + json.dumps(training, indent=2) + "\n", encoding="utf-8")
    elif side.exists():
        side.unlink()
    return path


def training_path(reward_path: Path) -> Path:
    """Where :func:`export` writes the chosen config's training settings: ``OUT.training.yaml``."""
    return reward_path.with_name(reward_path.stem + ".training.yaml")


# ---- compute ------------------------------------------------------------------------------------------
def compute_table(opt: "BayesianRewardOptimizer", repeats: int, full_cost: float | None = None) -> str:
    """Cost per phase (the objective's recorded cost, e.g. training decisions) and what fidelity saved.

    The comparison is every search trial run at full budget with all ``repeats`` repeats, which is
    what noise handling without multi-fidelity would cost."""
    search = counted_trials(opt.study)
    search_costs = [t.user_attrs.get(COST_ATTR) for t in search]
    evals = EvaluationStore(opt.study).all()
    val_costs = [e.cost for e in evals.values()]
    if any(c is None for c in search_costs + val_costs):
        unit, search_total = "evaluations", float(len(search))
        val_total = float(len(val_costs))
        full = 1.0
    else:
        unit = "cost units (objective.record_cost)"
        search_total = float(sum(search_costs))
        val_total = float(sum(val_costs))
        complete = [c for t, c in zip(search, search_costs, strict=True) if t.state == TrialState.COMPLETE]
        full = full_cost or (max(complete) if complete else max(search_costs, default=0.0))
    seconds = sum(t.duration.total_seconds() for t in search if t.duration) if search else 0.0
    val_seconds = sum(e.seconds for e in evals.values())
    total = search_total + val_total
    pruned = sum(t.state == TrialState.PRUNED for t in search)
    rows = [["search", str(len(search)), f"{search_total:.6g}", f"{seconds / 60:.1f}"],
            ["noise + validation", str(len(evals)), f"{val_total:.6g}", f"{val_seconds / 60:.1f}"],
            ["total", str(len(search) + len(evals)), f"{total:.6g}", f"{(seconds + val_seconds) / 60:.1f}"]]
    naive = len(search) * repeats * full
    text = f"compute ({unit}; minutes are summed over workers):\n" + format_table(
        ["phase", "runs", "cost", "minutes"], rows)
    if naive > 0:
        unpruned = len(search) * full
        text += (f"\nagainst every one of the {len(search)} search trials at full budget with {repeats} repeats "
                 f"({naive:.6g}): {1 - total / naive:.0%} saved; the search's budget and pruning ({pruned} trials "
                 f"stopped early) saved {unpruned - search_total:.6g}, repeats only for the base and the finalists saved "
                 f"{naive - unpruned - val_total:.6g}")
    return text

