"""``stress()``: score every row's probes with the config, ask the oracle which are wrong, and
collect the loopholes (wrong probes paid about as well as the control) and the unpaid controls.

The oracle is the config's gold term (``stress.gold``, else ``monitor.gold``): a completion is
right when the gold term's raw value is at least the middle of its declared output range (0.5
for a 0/1 check). A probe its family built to be wrong is wrong whatever the gold term says; one
built to keep the control's substance (padding after the control) is wrong only if gold rejects
it. Edits of the adaptive search are judged by gold, or without one by the reference: an edit
that no longer states the reference anywhere cannot be right.

A **loophole**: a wrong probe whose total is at least the control's minus ``margin``, or a probe
that keeps the substance and is paid more than the control. An **unpaid control**: a control
the oracle accepts that is paid less than the best the reward can pay (the sum of each
weighted term's best, when every top-level term declares a bounded range; else the best total
any accepted control of the run reached).

An **inversion** (form over substance): on a row whose control the oracle accepts, a wrong probe
whose text no longer holds the reference anywhere (a wrong answer in the right format, the prompt
echoed, a search edit) paid more than the bare right answer. No margin makes it a loophole, yet a group-relative trainer pushes a
policy that has the answer toward the wrong reply: the hole the GRPO demo's first composed reward
had (``23 + 17 = 45`` 1.52, the bare ``40`` 1.50). Only where the reward pays the bare right
answer something: a reward that pays nothing outside the asked-for form (a format term and a
correctness term that reads only the formatted answer, as veRL's GSM8K scorer does) declares the
form a precondition, and a formatted wrong reply above a bare right one is its design, not a hole.
``stress.inversions`` reports them (``warn``, the default), counts them as findings (``fail``) or
skips the check (``off``).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


from ..composer import RewardComposer
from ..config import TermNode
from ..integrations.text_scoring import TextScorer, as_floats
from ..stress_spec import FAMILY_NAMES, StressSettings
from .families import SEARCH, BareAnswer, Context, row_probes, summary
from .probes import KEEPS, WRONG, Probe, states_reference
from .rows import CONTROL, Row
from .search import RowSearch, search_round, vocabulary

#: probes scored per composer call (one row's at a time)
BATCH = 256
#: search: children per row and round, rounds without a better wrong probe before a row stops
CHILDREN, PATIENCE = 24, 12
#: parameter names whose positive integer values are length limits (padded probes reach them)
LENGTH_PARAMS = ("max", "min", "target", "max_length", "min_length", "max_chars", "max_words", "max_tokens",
                 "limit", "cache", "length", "soft_max", "hard_max", "low", "high", "lower", "upper")
TIE = 1e-9
BARE = BareAnswer.name


@dataclass(frozen=True)
class Scored:
    """One completion's total, each top-level term's contribution and raw value."""

    total: float
    terms: dict[str, float]
    raw: dict[str, float]


@dataclass
class Loophole:
    """A family's best exploit over the rows, and how many rows it held on."""

    family: str
    row: int
    completion: str
    total: float
    control_total: float
    terms: dict[str, float]
    raw: dict[str, float]
    control: str
    rows_held: int = 1
    paid_more: bool = False  # a probe that keeps the substance, paid above the control

    @property
    def share(self) -> float:
        """The exploit's total as a share of the control's (NaN unless the control's total is positive)."""
        return self.total / self.control_total if self.control_total > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "summary": summary(self.family), "row": self.row, "completion": self.completion,
                "total": self.total, "control_total": self.control_total, "share": None if math.isnan(self.share)
                else self.share, "rows_held": self.rows_held, "terms": self.terms, "raw": self.raw,
                "control": self.control, "paid_more_than_control": self.paid_more}


@dataclass
class UnpaidControl:
    """A control the oracle accepts, paid less than the best the reward pays; the terms short of their best."""

    row: int
    total: float
    best: float
    terms: dict[str, float]
    short: list[str]
    control: str

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "total": self.total, "best": self.best, "terms": self.terms, "short": self.short,
                "control": self.control}


@dataclass
class Inversion:
    """A row where a wrong reply that drops the answer out-earns the bare right answer."""

    row: int
    family: str
    completion: str
    total: float
    terms: dict[str, float]
    bare: str
    bare_total: float
    bare_terms: dict[str, float]
    control_total: float

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "family": self.family, "completion": self.completion, "total": self.total,
                "terms": self.terms, "bare": self.bare, "bare_total": self.bare_total, "bare_terms": self.bare_terms,
                "control_total": self.control_total}


@dataclass
class FamilyStats:
    name: str
    tried: int = 0
    held: int = 0  # rows with a loophole of this family

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tried": self.tried, "held": self.held}


@dataclass
class StressReport:
    """What ``rewardkit stress`` found; :meth:`to_dict` is its ``--json`` object."""

    loopholes: list[Loophole]
    unpaid_controls: list[UnpaidControl]
    families: list[FamilyStats]
    rows: int
    evaluations: int
    seconds: float
    gold: str | None
    margin: float
    best: float | None
    requests: int = 0
    complete: bool = True
    rejected_controls: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inversions: list[Inversion] = field(default_factory=list)
    inversion_mode: str = "warn"

    @property
    def watch(self) -> list[str]:
        """The terms that pay some loophole's exploit or inversion's wrong reply (a positive contribution),
        gold aside, in the config's order of first appearance: what ``monitor.watch`` (or ``rewardkit audit
        --stress``) has the audit watch on the completions of a run, since a policy that finds the hole is
        paid through them while gold rejects what it writes."""
        found: dict[str, None] = {}
        for paid in [h.terms for h in self.loopholes] + [i.terms for i in self.inversions]:
            for term, value in paid.items():
                if term != self.gold and value > 0:
                    found.setdefault(term, None)
        return list(found)

    @property
    def clean(self) -> bool:
        """Nothing found: no loophole, no unpaid control, and no inversion when ``stress.inversions`` is ``fail``."""
        return not self.loopholes and not self.unpaid_controls and not (self.inversions and self.inversion_mode == "fail")

    def to_dict(self) -> dict[str, Any]:
        return {"loopholes": [h.to_dict() for h in self.loopholes],
                "unpaid_controls": [u.to_dict() for u in self.unpaid_controls],
                "families": [f.to_dict() for f in self.families], "rows": self.rows, "evaluations": self.evaluations,
                "seconds": self.seconds, "requests": self.requests, "gold": self.gold, "margin": self.margin,
                "best": self.best, "complete": self.complete, "rejected_controls": self.rejected_controls,
                "notes": self.notes, "inversions": [i.to_dict() for i in self.inversions],
                "inversion_mode": self.inversion_mode, "watch": self.watch}


class Oracle:
    """Right or wrong for a scored completion: the gold term, else the construction or the reference."""

    def __init__(self, composer: RewardComposer, gold: str | None) -> None:
        self.gold = gold
        self.threshold = 0.5
        if gold is not None:
            node = next(n for n in composer.spec.nodes if n.name == gold)
            low, high = getattr(node, "component", None).output_range if isinstance(node, TermNode) else (0.0, 1.0)
            if math.isfinite(low) and math.isfinite(high) and high > low:
                self.threshold = (low + high) / 2

    def accepts(self, scored: Scored) -> bool:
        assert self.gold is not None
        return scored.raw[self.gold] >= self.threshold

    def verdict(self, probe: Probe, scored: Scored) -> str:
        """``wrong``, ``keeps`` (must not be paid more than the control) or ``unknown``."""
        if probe.verdict == WRONG:
            return WRONG
        if self.gold is not None:
            return KEEPS if self.accepts(scored) else WRONG
        return probe.verdict

    def edit_is_wrong(self, text: str, scored: Scored, reference: str | None) -> bool:
        if self.gold is not None:
            return not self.accepts(scored)
        return states_reference(text, reference) is False

    def control_ok(self, row: Row, scored: Scored) -> bool:
        if self.gold is not None:
            return self.accepts(scored)
        return states_reference(row.control, row.reference) is not False


class _Evaluator:
    """Scores lists of completions for one row through :class:`TextScorer`, counting calls and requests."""

    def __init__(self, composer: RewardComposer, step: int) -> None:
        composer.eval()
        self.scorer = TextScorer(composer)
        self.names = tuple(n.name for n in composer.spec.nodes)
        self.step = step
        self.evaluations = 0
        self.requests = 0

    def __call__(self, row: Row, texts: Sequence[str]) -> list[Scored]:
        out: list[Scored] = []
        columns = {k: v for k, v in row.columns.items() if k != CONTROL}
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start:start + BATCH])
            n = len(chunk)
            ctx = self.scorer.context(chunk, prompts=[row.prompt] * n if "prompt" in row.columns else None,
                                      references=[row.columns["reference"]] * n if "reference" in row.columns else None,
                                      rows=[columns] * n)
            batch = self.scorer.score(ctx, n, step=self.step)
            raw = {name: as_floats(batch.output.terms[name].raw, n) for name in self.names}
            for name in self.names:
                self.requests += int(batch.output.terms[name].info.get("requests", 0) or 0)
            self.evaluations += n
            out += [Scored(batch.totals[i], {name: batch.terms[name][i] for name in self.names},
                           {name: raw[name][i] for name in self.names}) for i in range(n)]
        return out


def best_total(composer: RewardComposer, step: int) -> float | None:
    """The most the reward can pay: each top-level term's weight times the end of its declared
    range that pays most; None when a weighted term has no bounded raw range (a group, a
    normalizer, a transform)."""
    best = 0.0
    for node in composer.spec.nodes:
        w = float(node.weight(step))
        if w == 0.0:
            continue
        if not isinstance(node, TermNode) or node.normalizer is not None or node.transforms:
            return None
        low, high = node.component.output_range
        end = high if w > 0 else low
        if not math.isfinite(end):
            return None
        best += w * end
    if composer.transforms_total:
        return None
    return best


def length_limits(composer: RewardComposer) -> list[int]:
    """Positive integer parameters that read as length limits (``max``, ``target``, ...)."""
    limits = set()
    for node in composer.leaves():
        for key, value in node.component.config.items():
            if key in LENGTH_PARAMS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and 0 < value <= 100_000 and float(value).is_integer():
                limits.add(int(value))
    return sorted(limits)


def word_sources(composer: RewardComposer) -> tuple[list[str], list[str]]:
    """Columns text terms read besides the completion, prompt and reference (their words are
    what the reward asks for), and the strings of list parameters (word lists)."""
    columns: list[str] = []
    words: list[str] = []
    for node in composer.leaves():
        text_inputs = getattr(node.component, "text_inputs", frozenset())
        for name, key in node.component.input_keys.items():
            if name in text_inputs and key not in ("completion", "prompt", "reference") and key not in columns:
                columns.append(key)
        for value in node.component.config.values():
            if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
                words += [v for v in value if v.strip() and len(v) < 64]
    return columns, list(dict.fromkeys(words))




def gold_term(composer: RewardComposer, settings: StressSettings | None) -> str | None:
    """``stress.gold``, else ``monitor.gold``, else None."""
    if settings is not None and settings.gold is not None:
        return settings.gold
    monitor = composer.spec.monitor
    return None if monitor is None else monitor.gold


def stress(composer: RewardComposer, rows: Sequence[Row], *, seed: int = 0, budget_s: float | None = None,
           step: int = 0, settings: StressSettings | None = None,
           progress: Callable[[str], None] | None = None) -> StressReport:
    """Probe ``composer`` on ``rows`` within ``budget_s`` seconds (default: the config's ``stress.budget_s``)."""
    started = time.perf_counter()
    settings = settings if settings is not None else (composer.spec.stress or StressSettings())
    budget = settings.budget_s if budget_s is None else budget_s
    deadline = started + budget
    rng = random.Random(seed)
    gold = gold_term(composer, settings)
    oracle = Oracle(composer, gold)
    evaluate = _Evaluator(composer, step)
    enabled = [name for name in FAMILY_NAMES if settings.families.get(name, True)]
    stats = {name: FamilyStats(name) for name in enabled}
    limits = length_limits(composer)
    word_columns, word_params = word_sources(composer)
    found: dict[str, list[Loophole]] = {}
    climbs = _Climbs(settings.inversions != "off")
    controls: list[tuple[Row, Scored, bool]] = []
    searches: list[tuple[Row, RowSearch, Scored]] = []
    notes: list[str] = []
    complete = True
    for row in rows:
        if time.perf_counter() > deadline:
            complete = False
            notes.append(f"the budget of {budget:g} s ran out after {len(controls)} of {len(rows)} rows")
            break
        ctx = Context(row, rng, limits, word_columns, word_params)
        probes = row_probes(ctx, enabled)
        scored = evaluate(row, [row.control] + [p.text for p in probes])
        control, results = scored[0], scored[1:]
        accepted = oracle.control_ok(row, control)
        controls.append((row, control, accepted))
        held: set[str] = set()
        wrong_pool: dict[str, float] = {}
        for probe, result in zip(probes, results, strict=True):
            stats[probe.family].tried += 1
            verdict = oracle.verdict(probe, result)
            if verdict == WRONG:
                wrong_pool[probe.text] = result.total
                if accepted:
                    climbs.offer(row, probe.family, probe.text, result)
            hole = _loophole(verdict, result, control, settings.margin)
            if hole is None or not accepted:
                continue
            held.add(probe.family)
            found.setdefault(probe.family, []).append(
                Loophole(probe.family, row.index, probe.text, result.total, control.total, result.terms, result.raw,
                         row.control, paid_more=hole))
        for name in held:
            stats[name].held += 1
        if SEARCH in stats and accepted and (gold is not None or row.reference):
            state = RowSearch(row.index, row.control, vocabulary(row.prompt, row.control, row.reference))
            state.pool[row.control] = control.total
            for text in sorted(wrong_pool, key=lambda t: -wrong_pool[t])[:4]:
                state.pool[text] = wrong_pool[text]
            state.seen.update(p.text for p in probes)
            state.seen.add(row.control)
            searches.append((row, state, control))
        if progress is not None:
            progress(f"probed row {len(controls)}/{len(rows)}")
    rejected = [row.index for row, _, ok in controls if not ok]
    if rejected:
        what = f"the gold term {gold!r}" if gold is not None else "the reference check (the control states no reference)"
        notes.append(f"{len(rejected)} control{'s' if len(rejected) > 1 else ''} rejected by {what}: rows "
                     f"{', '.join(map(str, rejected[:10]))}{' ...' if len(rejected) > 10 else ''} (not checked)")
    if searches and time.perf_counter() < deadline:
        _run_search(searches, evaluate, oracle, settings.margin, rng, deadline, stats, found, progress, climbs)
    best = best_total(composer, step)
    unpaid = _unpaid(controls, best)
    loopholes = [_merge(name, holes) for name, holes in found.items()]
    loopholes.sort(key=lambda h: (-(h.share if not math.isnan(h.share) else h.total), FAMILY_NAMES.index(h.family)))
    if gold is None:
        notes.append("no gold term (stress.gold or monitor.gold): only probes built to be wrong were judged")
    return StressReport(loopholes, unpaid, list(stats.values()), len(rows), evaluate.evaluations,
                        time.perf_counter() - started, gold, settings.margin,
                        best, evaluate.requests, complete, rejected, notes,
                        climbs.inversions({row.index: scored.total for row, scored, _ in controls}), settings.inversions)


class _Climbs:
    """Per row: the best-paid bare right answer and the best-paid wrong reply that no longer states the answer."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.bare: dict[int, tuple[str, Scored]] = {}
        self.climb: dict[int, tuple[str, str, Scored]] = {}

    def offer(self, row: Row, family: str, text: str, result: Scored) -> None:
        """A wrong probe of ``row`` (the row's control accepted)."""
        if not self.on:
            return
        reference = (row.reference or "").strip().lower()
        if family == BARE:
            best = self.bare.get(row.index)
            if best is None or result.total > best[1].total:
                self.bare[row.index] = (text, result)
        elif reference and reference not in text.lower():  # not even inside a word
            best_climb = self.climb.get(row.index)
            if best_climb is None or result.total > best_climb[2].total:
                self.climb[row.index] = (family, text, result)

    def inversions(self, control_totals: dict[int, float]) -> list[Inversion]:
        """Rows whose best wrong reply out-earns the bare right answer, the widest gap first."""
        out = []
        for index, (bare_text, bare) in self.bare.items():
            climb = self.climb.get(index)
            if climb is None:
                continue
            family, text, result = climb
            if bare.total > TIE and result.total > bare.total + max(TIE, 1e-6 * abs(bare.total)):
                out.append(Inversion(index, family, text, result.total, result.terms, bare_text, bare.total,
                                     bare.terms, control_totals[index]))
        out.sort(key=lambda i: (-(i.total - i.bare_total), i.row))
        return out


def _loophole(verdict: str, result: Scored, control: Scored, margin: float) -> bool | None:
    """None when not a loophole; else whether it is one by being paid more than the control."""
    if verdict == WRONG and result.total >= control.total - margin - TIE:
        return False
    if verdict == KEEPS and result.total > control.total + max(TIE, 1e-6 * abs(control.total)):
        return True
    return None


def _run_search(searches: list[tuple[Row, RowSearch, Scored]], evaluate: _Evaluator, oracle: Oracle, margin: float,
                rng: random.Random, deadline: float, stats: dict[str, FamilyStats], found: dict[str, list[Loophole]],
                progress: Callable[[str], None] | None, climbs: "_Climbs") -> None:
    by_state = {id(state): (row, control) for row, state, control in searches}
    held_rows: set[int] = set()

    def score(state: RowSearch, texts: list[str]) -> None:
        row, control = by_state[id(state)]
        for text, result in zip(texts, evaluate(row, texts), strict=True):
            stats[SEARCH].tried += 1
            wrong = oracle.edit_is_wrong(text, result, row.reference)
            state.offer(text, result.total, wrong)
            if wrong:
                climbs.offer(row, SEARCH, text, result)
            if wrong and result.total >= control.total - margin - TIE:
                held_rows.add(row.index)
                found.setdefault(SEARCH, []).append(Loophole(SEARCH, row.index, text, result.total, control.total,
                                                             result.terms, result.raw, row.control))

    rounds = 0
    states = [state for _, state, _ in searches]
    while time.perf_counter() < deadline:
        active = search_round(states, rng, CHILDREN, score, PATIENCE)
        rounds += 1
        if progress is not None and rounds % 10 == 0:
            progress(f"search round {rounds}: {active} row{'s' if active != 1 else ''} still improving")
        if not active:
            break
    stats[SEARCH].held = len(held_rows)


def _merge(family: str, holes: list[Loophole]) -> Loophole:
    """A family's loopholes as one: the best exploit (highest share, then shortest), with the rows it held on."""
    best = max(holes, key=lambda h: (h.total - h.control_total, -len(h.completion)))
    best.rows_held = len({h.row for h in holes})
    return best


def _unpaid(controls: list[tuple[Row, Scored, bool]], best: float | None) -> list[UnpaidControl]:
    accepted = [(row, scored) for row, scored, ok in controls if ok]
    if not accepted:
        return []
    target = best if best is not None else max(s.total for _, s in accepted)
    # each term's best contribution over the accepted controls, once (not once per control)
    term_best = {name: max(s.terms[name] for _, s in accepted) for name in accepted[0][1].terms}
    out = []
    for row, scored in accepted:
        if scored.total < target - max(TIE, 1e-6 * abs(target)):
            short = [name for name, value in scored.terms.items() if value < term_best[name] - TIE]
            out.append(UnpaidControl(row.index, scored.total, target, scored.terms, short, row.control))
    return out


__all__ = ["Inversion", "Loophole", "Oracle", "Scored", "StressReport", "UnpaidControl", "best_total", "stress"]
