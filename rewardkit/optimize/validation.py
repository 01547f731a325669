"""After the search: measure the noise, re-run the best configs on validation seeds, give a verdict.

The best of many noisy trials is the luckiest as much as the best. So:

1. **Noise** (:func:`measure_noise`, before the search): the base config runs ``repeats`` times
   on validation seeds; the spread of those repeats is the noise, and from it the smallest
   difference the study can resolve. These runs are also the base's validation runs.
2. **Validation** (:func:`validate`, after the search): a race (as irace's) between the top ``k``
   distinct configs of the search and the base, on the same validation seeds (paired: repeat ``r``
   of every config has the same seeds and training seed). At each look (``repeats``, then about
   half as many again, up to ``max_repeats``, default 4 x ``repeats``: 3, 5, 8, 12), a finalist
   whose interval lies on the improving side of zero is better than the base, one clearly worse
   than the base or than the leader stops, and only those whose interval straddles zero run more
   repeats. The race stops when every finalist is decided, when the leader is reliably better, or
   at the cap, and says which.
3. **Verdict**: each look's intervals are paired Student-t intervals, simultaneous over the
   finalists still racing (:func:`.intervals.paired_t_changes`) at ``1 - (1 - LEVEL) / looks``, so
   that over the whole race a finalist no better than the base is called better at most
   ``1 - LEVEL`` (10%, two-sided: 5% on the improving side) of the time. The best finalist called
   better (by its validation mean, never its search value) is exported; otherwise the base is,
   with ``no reliable improvement over the base``.

Every evaluation is stored in the study as it finishes (:mod:`.evaluations`): a killed run resumes
without recomputing any.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optuna.trial import TrialState

from ..composer import RewardComposer
from ..errors import ConfigError
from .evaluations import Evaluation, EvaluationStore, Job, config_key, run_missing
from .intervals import Change, as_matrix, paired_t_changes, resolvable_difference, safe_mean, safe_stdev
from .optimizer import counted_trials, write_reward_yaml
from .results import format_table
from .trial_context import COST_ATTR, MAX_SEEDS_PER_PHASE, validation_seeds

if TYPE_CHECKING:
    from .optimizer import BayesianRewardOptimizer

PHASE = "validate"
LEVEL = 0.90
NO_IMPROVEMENT = "no reliable improvement over the base"
#: the race's repeat cap, as a multiple of --repeats, when --max-repeats is not given
MAX_REPEATS_FACTOR = 4
BETTER = "better than the base"
DROPPED_BASE = "dropped: worse than the base"
DROPPED_LEADER = "dropped: worse than the leader"
BEHIND_WINNER = "behind the winner"
UNDECIDED = "undecided"


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
        return safe_mean(self.values)

    @property
    def spread(self) -> float:
        return safe_stdev(self.values)

    def describe(self) -> str:
        scale = abs(self.mean) or float("nan")
        one = resolvable_difference(self.spread, 1)
        many = resolvable_difference(self.spread, self.repeats)
        return (f"noise: the base over {self.repeats} repeats (each its own training seed and seeds): mean "
                f"{self.mean:.4g}, sd {self.spread:.3g} ({self.spread / scale:.1%} of the mean); smallest resolvable "
                f"difference ~{one:.3g} ({one / scale:.1%}) between single runs, ~{many:.3g} "
                f"({many / scale:.1%}) with {self.repeats} paired repeats")


@dataclass
class Validation:
    """The race's outcome: each finalist's last interval and status, the winner, what to export."""

    candidates: list[Candidate]
    evaluations: dict[tuple[str, int], Evaluation]
    changes: list[Change]
    seeds: list[list[int]]
    direction: str
    #: one per finalist (candidates[1:]): BETTER, DROPPED_* or UNDECIDED
    statuses: list[str] = field(default_factory=list)
    #: why the race stopped, one sentence
    stop_reason: str = ""
    #: the repeats each look had, and the interval level of one look (LEVEL spread over the looks)
    looks: list[int] = field(default_factory=list)
    look_level: float = LEVEL

    @property
    def base(self) -> Candidate:
        return self.candidates[0]

    def repeats_of(self, cand: Candidate) -> int:
        """How many validation repeats ``cand`` ran (the base runs every look's)."""
        return sum(1 for key, _ in self.evaluations if key == cand.key)

    def means(self, cand: Candidate) -> float:
        return safe_mean([self.evaluations[(cand.key, r)].value for r in range(self.repeats_of(cand))])

    def _status(self, cand: Candidate) -> str:
        return self.statuses[self.candidates.index(cand) - 1] if self.statuses else UNDECIDED

    @property
    def winner(self) -> tuple[Candidate, Change] | None:
        """The finalist to speak of: the best by mean among those reliably better than the base, else
        the best by mean of all (None with no candidate but the base)."""
        pairs = list(zip(self.candidates[1:], self.changes, strict=True))
        if not pairs:
            return None
        better = [p for p in pairs if self._status(p[0]) == BETTER]
        sign = 1 if self.direction == "minimize" else -1
        return min(better or pairs, key=lambda p: sign * p[1].mean)

    @property
    def improved(self) -> bool:
        win = self.winner
        return win is not None and self._status(win[0]) == BETTER

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
        header = ["candidate", "search value", "repeats", "validation mean", "change vs base",
                  f"{LEVEL:.0%} interval{' (simultaneous)' if k > 1 else ''}", "better in", "race"]
        rows = [[self.base.label, _num(self.base.search_value), str(self.repeats_of(self.base)), f"{base_mean:.4g}",
                 "-", "-", "-", "-"]]
        for cand, change, status in zip(self.candidates[1:], self.changes, self.statuses or [UNDECIDED] * k,
                                        strict=True):
            mean, low, high = change.relative(base_mean)
            rows.append([cand.label, _num(cand.search_value), str(change.repeats), f"{self.means(cand):.4g}",
                         f"{mean:+.1%}", f"{low:+.1%} to {high:+.1%}", f"{change.wins}/{change.repeats}", status])
        looks = "/".join(map(str, self.looks)) if self.looks else str(len(self.seeds))
        title = (f"validation: a race over {looks} paired repeats on seeds {self.seeds_text()} (never used by the "
                 f"search), {self.direction}; each look's intervals at {self.look_level:.1%} so that the race as a "
                 f"whole errs at most {1 - LEVEL:.0%}:")
        text = title + "\n" + format_table(header, rows)
        return text + (f"\nthe race stopped: {self.stop_reason}" if self.stop_reason else "")

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
        for cand, change, status in zip(self.candidates[1:], self.changes, self.statuses, strict=True):
            mean, low, high = change.relative(base_mean)
            rows.append({"label": cand.label, "params": cand.params, "search_value": cand.search_value,
                         "validation_mean": self.means(cand), "change": mean, "low": low, "high": high,
                         "wins": change.wins, "repeats": change.repeats, "status": status})
        return {"seeds": self.seeds, "base_mean": base_mean, "candidates": rows, "looks": self.looks,
                "stop_reason": self.stop_reason, "chosen": self.chosen.label, "improved": self.improved,
                "verdict": self.verdict()}


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
    _check_repeats(repeats, minimum=2, n_seeds=opt.settings.n_seeds)
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


def race_looks(repeats: int, max_repeats: int) -> list[int]:
    """The repeats at which the race looks: ``repeats``, then about half as many again each time, up to
    ``max_repeats`` (3, 5, 8, 12 by default)."""
    looks = [repeats]
    while looks[-1] < max_repeats:
        looks.append(min(max_repeats, looks[-1] + max(1, (looks[-1] + 1) // 2)))
    return looks


def validate(opt: "BayesianRewardOptimizer", k: int = 3, repeats: int = 3, workers: int = 1,
             max_repeats: int | None = None) -> Validation:
    """Race the top ``k`` configs against the base on validation seeds, paired (racing, as irace does).

    Each finalist and the base run ``repeats`` times; then, look after look, a finalist whose
    simultaneous interval lies on the improving side of zero is BETTER, one on the other side or
    clearly worse than the leader (the best mean still racing) is dropped, and those whose interval
    still straddles zero get more repeats, up to ``max_repeats`` (default ``4 * repeats``). Each
    look's intervals are at ``1 - (1 - LEVEL) / looks``, so that over the whole race a finalist no
    better than the base is called better at most ``1 - LEVEL`` of the time (Bonferroni over looks).
    """
    if len(opt.settings.directions) != 1:
        raise ConfigError("validation compares candidates on one objective; this study has "
                          f"{len(opt.settings.directions)} (use --validate 0)", path="validate")
    _check_repeats(repeats, minimum=2, n_seeds=opt.settings.n_seeds)
    max_repeats = MAX_REPEATS_FACTOR * repeats if max_repeats is None else max_repeats
    _check_repeats(max_repeats, minimum=repeats, n_seeds=opt.settings.n_seeds, path="max_repeats")
    looks = race_looks(repeats, max_repeats)
    look_level = 1 - (1 - LEVEL) / len(looks)
    direction = opt.settings.directions[0]
    base = Candidate("base", {}, _base_search_value(opt))
    finalists = top_candidates(opt, k)
    status = {c.key: UNDECIDED for c in finalists}
    changes: dict[str, Change] = {}
    done: dict[tuple[str, int], Evaluation] = {}
    store = EvaluationStore(opt.study)
    reason = "no sampled config besides the base to race" if not finalists else ""
    ran: list[int] = []
    for look, n in enumerate(looks):
        racing = [c for c in finalists if status[c.key] == UNDECIDED]
        if not racing:
            break
        ran.append(n)
        jobs = [job for cand in [base] + racing for job in _jobs(opt, cand, n)]
        done.update(run_missing(store, opt.objective, jobs, 1, workers,
                                desc=f"validation (look {look + 1}/{len(looks)}: {n} repeats)",
                                show_progress=opt.show_progress, timeout=opt.trial_timeout))
        leader = _judge_look(_matrices(done, [base] + racing, n), racing, direction, look_level, status, changes)
        still = [c.label for c in finalists if status[c.key] == UNDECIDED]
        if status[leader.key] == BETTER and still:
            reason = (f"after {n} repeats {leader.label} is reliably better than the base and leads the race; "
                      f"{', '.join(still)} (behind it) were not raced further")
            for c in finalists:
                if status[c.key] == UNDECIDED:
                    status[c.key] = BEHIND_WINNER
            break
        if not still:
            counts = [f"{sum(s == BETTER for s in status.values())} reliably better than the base",
                      f"{sum(s.startswith('dropped') for s in status.values())} dropped as clearly worse"]
            reason = f"every finalist was decided after {n} repeats ({', '.join(counts)})"
            break
        if look == len(looks) - 1:
            reason = (f"reached the cap of {n} repeats (--max-repeats) with {', '.join(still)} still undecided "
                      "(the interval straddles zero: any difference is too small to resolve)")
    if not finalists:
        done = run_missing(store, opt.objective, _jobs(opt, base, repeats), 1, workers, desc="validation",
                           show_progress=opt.show_progress, timeout=opt.trial_timeout)
        ran = [repeats]
    seeds = [validation_seeds(opt.settings.n_seeds, r) for r in range(ran[-1])]
    return Validation([base] + finalists, done, [changes[c.key] for c in finalists], seeds, direction,
                      [status[c.key] for c in finalists], reason, ran, look_level)


def _judge_look(matrices: dict[str, Any], racing: list[Candidate], direction: str, level: float,
                status: dict[str, str], changes: dict[str, Change]) -> Candidate:
    """One look of the race: each racing finalist against the base (better, dropped or still
    undecided) and the undecided ones against the leader (dropped when clearly worse); returns the
    leader, the best mean among ``racing``. Updates ``status`` and ``changes`` in place."""
    for cand, change in zip(racing, paired_t_changes([matrices[c.key] for c in racing], matrices["base"],
                                                     direction, level), strict=True):
        changes[cand.key] = change
        if change.improves(direction):
            status[cand.key] = BETTER
        elif change.worsens(direction):
            status[cand.key] = DROPPED_BASE
    sign = 1 if direction == "minimize" else -1
    leader = min(racing, key=lambda c: sign * changes[c.key].mean)
    others = [c for c in racing if c is not leader and status[c.key] == UNDECIDED]
    if others:
        versus = paired_t_changes([matrices[c.key] for c in others], matrices[leader.key], direction, level)
        for cand, change in zip(others, versus, strict=True):
            if change.worsens(direction):
                status[cand.key] = f"{DROPPED_LEADER} ({leader.label})"
    return leader


def _matrices(done: dict[tuple[str, int], Evaluation], cands: list[Candidate], repeats: int) -> dict[str, Any]:
    """Each candidate's (repeat x seed) values over its first ``repeats`` repeats, paired seed by seed
    when every run recorded per-seed values (else on the runs' means)."""
    widths = {len(done[(c.key, r)].per_seed()) for c in cands for r in range(repeats)}
    if len(widths) != 1:  # an objective that records per-seed values for some runs only: pair on the means
        return {c.key: as_matrix([[done[(c.key, r)].value] for r in range(repeats)]) for c in cands}
    return {c.key: as_matrix([done[(c.key, r)].per_seed() for r in range(repeats)]) for c in cands}


def _base_search_value(opt: "BayesianRewardOptimizer") -> float | None:
    """The search value of a trial that ran the base config itself (an enqueued base), if any."""
    for trial in counted_trials(opt.study, (TrialState.COMPLETE,)):
        if opt.config_of(trial) == opt.base_config and not opt.space.training_values(trial.params):
            return float(trial.values[0])
    return None


def max_repeats_for(n_seeds: int) -> int:
    """The most repeats a study with ``n_seeds`` seeds per run may ask for (the validation seed range)."""
    return MAX_SEEDS_PER_PHASE // n_seeds


def _check_repeats(repeats: int, minimum: int, n_seeds: int = 1, path: str = "repeats") -> None:
    top = max_repeats_for(n_seeds)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not minimum <= repeats <= top:
        raise ConfigError(f"expected an integer from {minimum} to {top} (repeats measure the noise; at most "
                          f"{MAX_SEEDS_PER_PHASE} validation seeds with {n_seeds} per run), got {repeats!r}", path=path)


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

