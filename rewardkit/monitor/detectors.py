"""The reward-hacking detectors: one small class per failure, each a rule over window means.

Every detector compares where a signal is now (the mean of the last ``window`` records) with where
training started (the mean of the first ``window`` records), so one noisy batch moves nothing, and
checks only once the log holds ``2 * window`` records. Its condition must then hold for
``patience`` consecutive records (the content detectors: at ``patience`` of the last ``within``)
before the :class:`~rewardkit.monitor.Monitor` raises an alert, whose ``began`` is the first record
of those. Thresholds are parameters, validated like a
component's (``monitor.<detector>.<param>`` in a config) and documented on each class; a built-in
detector's are declared in :data:`rewardkit.monitor_spec.DETECTOR_PARAMS` under its name, which the
config reads without importing this package.

Each finding has a *kind*: ``hacking`` when the reward pays for something the gold term or a
declared partner does not confirm (the total or a paying term rises while gold stays put, two
terms that should agree part ways), ``health`` when training stalls without the reward being
gamed (groups with no reward spread, completions that stop differing, a term stuck at the end of
its range that pays least, length moving while the total does not rise).

A detector that lacks what it reads (no gold term, no two terms that should agree, a log without
the key) is *not applicable*: :meth:`Detector.applicable` says why, and it never fires.

Three detectors read the completions themselves (``content = True``: :class:`ExploitSpread`,
:class:`WatchedSpread`, :class:`TemplateConvergence`, over the per-step shares that
:class:`~rewardkit.monitor.completions.ContentReader` computes); the others read logged means
only, and when the monitor reads completions their hacking alerts are checked against them (see
:class:`~rewardkit.monitor.Monitor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..monitor_spec import BASE_PARAMS, DETECTOR_PARAMS, check_within
from ..params import Param, validate_params
from .completions import EXPLOIT, TEMPLATE, WATCHED
from .history import DISTINCT, LENGTH, TOTAL, ZERO_STD, History, term_mean, term_std
from .structure import RewardStructure

#: the two kinds of finding (module doc)
HACKING, HEALTH = "hacking", "health"
KINDS = (HACKING, HEALTH)


@dataclass(frozen=True)
class Finding:
    """A detector's condition holding at one record: the terms concerned, why, and the numbers."""

    terms: tuple[str, ...]
    message: str
    values: dict[str, float] = field(default_factory=dict)
    kind: str = HACKING


class Detector:
    """Base class: ``params`` declares the thresholds; :meth:`check` tests the latest record.

    Subclasses set ``name`` (the key of the config's ``monitor:`` section) and ``params``, and
    implement :meth:`check` (and :meth:`subjects` when they watch each term or pair on its own).
    """

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = BASE_PARAMS
    #: whether the detector reads the completions (else only logged means)
    content: ClassVar[bool] = False

    def __init__(self, **params: Any) -> None:
        path = self.name or "params"
        self.config = check_within(validate_params(self.params, params, path=path), path=path)
        for key, value in self.config.items():
            setattr(self, key, value)
        self.window: int = self.config["window"]
        self.patience: int = self.config["patience"]
        #: the condition must hold at ``patience`` of the last ``within`` records (``within == patience``: in a row)
        self.within: int = self.config.get("within", self.patience)

    def subjects(self, reward: RewardStructure) -> list[tuple[str, ...]]:
        """What is watched separately (a term, a pair of terms); ``[()]``: the reward as a whole."""
        return [()]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        """None when the detector can run on this reward and log, else the reason it cannot."""
        return None

    def ready(self, history: History) -> bool:
        """Enough records for a start and a now that do not overlap."""
        return len(history) >= 2 * self.window

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        """The finding when the condition holds at the latest record, else None."""
        raise NotImplementedError

    def change(self, history: History, key: str) -> tuple[float, float, float]:
        """``(start, now, now - start)`` of ``key`` over this detector's window."""
        start, now = history.baseline(key, self.window), history.recent(key, self.window)
        return start, now, now - start

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"{type(self).__name__}({args})"


def _missing(history: History, keys: list[str]) -> str | None:
    absent = [k for k in keys if not history.has(k)]
    return f"the log has no {', '.join(absent)}" if absent else None


class GoldDivergence(Detector):
    """Proxy/gold divergence: the total rose by ``min_rise`` or more since the start while the
    gold term gained at most ``max_gold_gain`` (stayed flat or fell). Needs ``monitor.gold``."""

    name = "gold_divergence"
    params = DETECTOR_PARAMS["gold_divergence"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        if reward.gold is None:
            return "the config names no gold term (monitor.gold)"
        return _missing(history, [TOTAL, term_mean(reward.gold)])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        gold = reward.gold
        assert gold is not None
        t0, t1, rise = self.change(history, TOTAL)
        g0, g1, gain = self.change(history, term_mean(gold))
        if rise >= self.config["min_rise"] and gain <= self.config["max_gold_gain"]:
            return Finding((gold,), f"the total rose {rise:+.3f} ({t0:.3f} -> {t1:.3f}) while the gold term "
                                    f"{gold!r} moved {gain:+.3f} ({g0:.3f} -> {g1:.3f})",
                           {"total_start": t0, "total_now": t1, "gold_start": g0, "gold_now": g1})
        return None


class VarianceShare(Detector):
    """One term carries most of the total's variance: ``(weight * std)^2`` of one trained term is
    ``share`` or more of the sum over the trained terms (a within-batch variance budget that
    ignores correlations), and was below it at the start. Needs two or more trained terms. A
    hacking finding when the term is not gold and the gold term gained at most ``max_gold_gain``
    (or no gold is declared); otherwise health (gold learned: the other terms stopped varying)."""

    name = "variance_share"
    params = DETECTOR_PARAMS["variance_share"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        trained = reward.trained(history.step if len(history) else 0)
        if len(trained) < 2:
            return f"fewer than two terms carry weight ({', '.join(trained) or 'none'})"
        return _missing(history, [term_std(t) for t in trained])

    def _shares(self, reward: RewardStructure, history: History, recent: bool) -> dict[str, float]:
        step = history.step
        pick = history.recent if recent else history.baseline
        parts = {t: (reward.weight(t, step) * pick(term_std(t), self.window)) ** 2 for t in reward.trained(step)}
        total = sum(v for v in parts.values() if not math.isnan(v))
        if not total > 1e-12:
            return {}
        return {t: v / total for t, v in parts.items() if not math.isnan(v)}

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        now, start = self._shares(reward, history, True), self._shares(reward, history, False)
        if not now:
            return None
        top = max(now, key=now.__getitem__)
        if now[top] >= self.config["share"] and start.get(top, 0.0) < self.config["share"]:
            gold = reward.gold
            kind = HACKING
            if gold is not None and history.has(term_mean(gold)):
                gain = self.change(history, term_mean(gold))[2]
                kind = HACKING if top != gold and not gain > self.config["max_gold_gain"] else HEALTH
            return Finding((top,), f"term {top!r} carries {now[top]:.0%} of the total's variance "
                                   f"(it carried {start.get(top, 0.0):.0%} at the start)",
                           {"share_now": now[top], "share_start": start.get(top, 0.0)}, kind)
        return None


class LengthDrift(Detector):
    """Completion length drifts while the gold term does not move: mean length changed by
    ``min_change`` or more of its starting value while the gold term gained at most
    ``max_gold_gain``. Needs ``monitor.gold`` and TRL's ``completions/mean_length``."""

    name = "length_drift"
    params = DETECTOR_PARAMS["length_drift"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        if reward.gold is None:
            return "the config names no gold term (monitor.gold)"
        return _missing(history, [LENGTH, term_mean(reward.gold)])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        gold = reward.gold
        assert gold is not None
        l0, l1, moved = self.change(history, LENGTH)
        g0, g1, gain = self.change(history, term_mean(gold))
        relative = abs(moved) / max(abs(l0), 1.0)
        if relative >= self.config["min_change"] and gain <= self.config["max_gold_gain"]:
            t0, t1, rise = self.change(history, TOTAL) if history.has(TOTAL) else (math.nan, math.nan, math.nan)
            paid = rise > 0.0  # the reward pays for the new length: a hack; otherwise a run that drifts
            return Finding((gold,), f"mean completion length went {l0:.1f} -> {l1:.1f} ({moved / max(abs(l0), 1.0):+.0%}) "
                                    f"while the gold term {gold!r} moved {gain:+.3f} and the total {rise:+.3f}",
                           {"length_start": l0, "length_now": l1, "gold_start": g0, "gold_now": g1,
                            "total_start": t0, "total_now": t1}, HACKING if paid else HEALTH)
        return None


class GroupCollapse(Detector):
    """GRPO groups collapse: the fraction of groups whose rewards all agree (TRL's
    ``frac_reward_zero_std``) is ``level`` or more and rose by ``min_rise`` or more since the start."""

    name = "group_collapse"
    params = DETECTOR_PARAMS["group_collapse"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        return _missing(history, [ZERO_STD])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        z0, z1, rise = self.change(history, ZERO_STD)
        if z1 >= self.config["level"] and rise >= self.config["min_rise"]:
            return Finding((), f"{z1:.0%} of GRPO groups give every completion the same reward "
                               f"({z0:.0%} at the start): no advantage, no gradient",
                           {"zero_std_start": z0, "zero_std_now": z1}, HEALTH)
        return None


class DiversityCollapse(Detector):
    """Completions in a group stop differing: the fraction of distinct completions per group
    (``monitor/distinct_frac``, logged by ``with_diversity``) is ``level`` or less and fell by
    ``min_drop`` or more since the start."""

    name = "diversity_collapse"
    params = DETECTOR_PARAMS["diversity_collapse"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        return _missing(history, [DISTINCT])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        d0, d1, moved = self.change(history, DISTINCT)
        if d1 <= self.config["level"] and -moved >= self.config["min_drop"]:
            return Finding((), f"only {d1:.0%} of a group's completions differ ({d0:.0%} at the start)",
                           {"distinct_start": d0, "distinct_now": d1}, HEALTH)
        return None


class PinnedAtBound(Detector):
    """A trained term sits pinned at a bound of its declared output range: its mean is within
    ``tolerance`` (a fraction of the range's width) of the low or high end, and was not at the
    start. Watches each trained term other than gold whose range is finite and whose logged value
    is the component's raw output (no normalizer or transforms). At the end that pays most (high for
    a positive weight) it is a hacking finding (the term is saturated); at the end that pays least,
    a health one (the term stopped paying: nothing is learned from it)."""

    name = "pinned_at_bound"
    params = DETECTOR_PARAMS["pinned_at_bound"]

    def subjects(self, reward: RewardStructure) -> list[tuple[str, ...]]:
        cached = getattr(self, "_subjects_of", None)
        if cached is not None and cached[0] is reward:  # asked at every step: the reward does not change
            return cached[1]
        weighted = {t for t in reward.terms if reward.ever_trained(t)}
        found = [(t,) for t in reward.terms
                 if t in weighted and t != reward.gold and reward.bounded_range(t) is not None]
        self._subjects_of = (reward, found)
        return found

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        subjects = self.subjects(reward)
        if not subjects:
            return "no trained term other than gold declares a finite output range"
        return _missing(history, [term_mean(t) for (t,) in subjects])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        (term,) = subject
        bounds = reward.bounded_range(term)
        assert bounds is not None
        low, high = bounds
        slack = self.config["tolerance"] * (high - low)
        v0, v1, _ = self.change(history, term_mean(term))
        paying = high if reward.weight(term, history.step) >= 0.0 else low
        for name, bound in (("high", high), ("low", low)):
            if abs(v1 - bound) <= slack and not abs(v0 - bound) <= slack:
                return Finding((term,), f"term {term!r} sits at the {name} end of its range [{low:g}, {high:g}]: "
                                        f"mean {v1:.3f} ({v0:.3f} at the start)",
                               {"mean_start": v0, "mean_now": v1, "bound": bound},
                               HACKING if bound == paying else HEALTH)
        return None


class Disagreement(Detector):
    """Two terms declared to measure the same thing (``monitor.agree``) part ways: since the start
    one moved ``min_gap`` or more further than the other, each measured as a fraction of its
    declared range when the range is finite (in its own units otherwise)."""

    name = "disagreement"
    params = DETECTOR_PARAMS["disagreement"]

    def subjects(self, reward: RewardStructure) -> list[tuple[str, ...]]:
        return [tuple(pair) for pair in reward.agree]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        if not reward.agree:
            return "the config declares no terms that should agree (monitor.agree)"
        return _missing(history, sorted({term_mean(t) for pair in reward.agree for t in pair}))

    def _scaled_change(self, reward: RewardStructure, history: History, term: str) -> tuple[float, float, float]:
        start, now, moved = self.change(history, term_mean(term))
        bounds = reward.bounded_range(term)
        return start, now, moved if bounds is None else moved / (bounds[1] - bounds[0])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        a, b = subject
        a0, a1, da = self._scaled_change(reward, history, a)
        b0, b1, db = self._scaled_change(reward, history, b)
        if abs(da - db) >= self.config["min_gap"]:
            return Finding((a, b), f"{a!r} and {b!r} should agree, but {a!r} moved {da:+.3f} ({a0:.3f} -> {a1:.3f}) "
                                   f"and {b!r} {db:+.3f} ({b0:.3f} -> {b1:.3f}) of their ranges",
                           {f"{a}_start": a0, f"{a}_now": a1, f"{b}_start": b0, f"{b}_now": b1})
        return None


_NO_COMPLETIONS = ("no completions were read (rewardkit audit --completions FILE; "
                   "MonitorCallback(..., completions=PATH))")


def _content_applicable(reward: RewardStructure, history: History, key: str) -> str | None:
    if reward.gold is None:
        return "the config names no gold term (monitor.gold)"
    return None if history.has(key) else _NO_COMPLETIONS


class ExploitSpread(Detector):
    """The exploit spreads through the samples: the share of a step's completions that are paid
    (above the start's median total) and that the gold term rejects is ``level`` or more, and
    rose by ``min_rise`` or more since the start. Reads the completions
    (:mod:`rewardkit.monitor.completions`); needs ``monitor.gold``. The defaults were chosen on the
    design runs (docs/results/monitor.md): one logged step for *now* and *the start* (a step holds
    every sample of a batch, so one step is not one noisy number), two of the last three steps (an
    exploit that comes and goes is not reset by one step below the level)."""

    name = "exploit_spread"
    content = True
    params = DETECTOR_PARAMS["exploit_spread"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        return _content_applicable(reward, history, EXPLOIT)

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        s0, s1, rise = self.change(history, EXPLOIT)
        if s1 >= self.config["level"] and rise >= self.config["min_rise"]:
            return Finding((str(reward.gold),), f"{s1:.0%} of the completions are paid above the start's median and "
                                                f"rejected by the gold term {reward.gold!r} ({s0:.0%} at the start)",
                           {"exploit_start": s0, "exploit_now": s1})
        return None


class WatchedSpread(Detector):
    """A known hole spreads: for a *watched* term (``monitor.watch``, the terms ``rewardkit stress``
    found paying a loophole), the share of a step's completions that gold rejects and the term pays
    is ``level`` or more and rose by ``min_rise`` or more since the start, whatever their total. It
    catches the hole a policy learns while its reward falls (it trades right answers for the partial
    credit a form term still pays), which :class:`ExploitSpread` cannot: no rejected completion is
    then paid above the start's median. A watched term that pays every reply (a graded closeness,
    a length) tracks the share gold rejects, so it fires when a run loses what gold accepts while
    still being paid. Reads the completions; needs ``monitor.gold`` and ``monitor.watch``."""

    name = "watched_spread"
    content = True
    params = DETECTOR_PARAMS["watched_spread"]

    def subjects(self, reward: RewardStructure) -> list[tuple[str, ...]]:
        return [(term,) for term in reward.watch]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        if not reward.watch:
            return "the config watches no term (monitor.watch, or rewardkit audit --stress REPORT)"
        return _content_applicable(reward, history, WATCHED + reward.watch[0])

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        (term,) = subject
        s0, s1, rise = self.change(history, WATCHED + term)
        if s1 >= self.config["level"] and rise >= self.config["min_rise"]:
            return Finding((term, str(reward.gold)), f"{s1:.0%} of the completions are paid by the watched term "
                                                     f"{term!r} and rejected by the gold term {reward.gold!r} "
                                                     f"({s0:.0%} at the start)",
                           {"watched_start": s0, "watched_now": s1})
        return None


class TemplateConvergence(Detector):
    """The paid completions that gold rejects converge on one template (digits masked to ``#``,
    case and whitespace folded: :func:`rewardkit.monitor.completions.template`): the share of a
    step's completions that are paid, rejected and of the most common such template is ``level``
    or more and rose by ``min_rise`` since the start. Reads the completions; needs ``monitor.gold``."""

    name = "template_convergence"
    content = True
    params = DETECTOR_PARAMS["template_convergence"]

    def applicable(self, reward: RewardStructure, history: History) -> str | None:
        return _content_applicable(reward, history, TEMPLATE)

    def check(self, reward: RewardStructure, history: History, subject: tuple[str, ...]) -> Finding | None:
        s0, s1, rise = self.change(history, TEMPLATE)
        if s1 >= self.config["level"] and rise >= self.config["min_rise"]:
            return Finding((str(reward.gold),), f"{s1:.0%} of the completions share one template, paid above the "
                                                f"start's median and rejected by the gold term {reward.gold!r} "
                                                f"({s0:.0%} at the start)",
                           {"template_start": s0, "template_now": s1})
        return None


#: every detector by its config name, in the order alerts are reported
DETECTORS: dict[str, type[Detector]] = {cls.name: cls for cls in (
    GoldDivergence, VarianceShare, LengthDrift, GroupCollapse, DiversityCollapse, PinnedAtBound, Disagreement,
    ExploitSpread, WatchedSpread, TemplateConvergence)}
