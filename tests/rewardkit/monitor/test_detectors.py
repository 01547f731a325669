"""Each detector fires on a series built to show its failure and stays quiet on an honest one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardkit.monitor import (Detector, Disagreement, DiversityCollapse, GoldDivergence, GroupCollapse, LengthDrift,
                               Monitor, PinnedAtBound, RewardStructure, VarianceShare)
from rewardkit.monitor.history import DISTINCT, LENGTH, TOTAL, ZERO_STD, History, term_mean, term_std

N = 20
ONSET = 8  # the synthetic hacks start here


def ramp(start: float, end: float, onset: int = ONSET, n: int = N) -> list[float]:
    """``start`` until ``onset``, then a straight line to ``end`` at the last step."""
    return [start if i < onset else start + (end - start) * (i - onset + 1) / (n - onset) for i in range(n)]


def flat(value: float, n: int = N) -> list[float]:
    return [value] * n


def records(**columns: list[float]) -> list[dict[str, float]]:
    """One record per step (steps 1..n) from columns keyed by log key (``__`` stands for ``/``)."""
    n = len(next(iter(columns.values())))
    return [{"step": i + 1, **{k.replace("__", "/"): v[i] for k, v in columns.items()}} for i in range(n)]


def noisy(values: list[float], seed: int, scale: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return [v + float(e) for v, e in zip(values, rng.normal(0, scale, len(values)), strict=True)]


def run(detector: Detector, reward: RewardStructure, recs: list[dict[str, float]]) -> list:
    return Monitor([detector], reward).run(recs)


TWO = RewardStructure(("proxy", "gold"), weights={"proxy": lambda s: 1.0, "gold": lambda s: 0.0},
                      ranges={"proxy": (0.0, 1.0), "gold": (0.0, 1.0)}, gold="gold")


# ---- proxy/gold divergence ----------------------------------------------------------------------
def test_gold_divergence_fires_when_the_total_rises_and_gold_stays_flat() -> None:
    recs = records(reward=ramp(0.2, 0.9), rewards__proxy__mean=ramp(0.2, 0.9), rewards__gold__mean=flat(0.1))
    (alert,) = run(GoldDivergence(), TWO, recs)
    assert alert.detector == "gold_divergence" and alert.terms == ("gold",)
    assert ONSET < alert.began <= alert.fired <= N
    assert alert.fired - alert.began + 1 == 2  # patience 2
    assert alert.values["gold_now"] == pytest.approx(0.1)


def test_gold_divergence_fires_when_gold_falls() -> None:
    recs = records(reward=ramp(0.2, 0.9), rewards__gold__mean=ramp(0.4, 0.0))
    assert [a.detector for a in run(GoldDivergence(), TWO, recs)] == ["gold_divergence"]


@given(st.floats(0.0, 0.8), st.floats(0.2, 1.0), st.integers(0, 1000))
def test_gold_divergence_is_quiet_when_gold_rises_with_the_total(start: float, rise: float, seed: int) -> None:
    total = noisy(ramp(start, start + rise), seed)
    gold = noisy(ramp(start / 2, start / 2 + rise * 0.8), seed + 1)  # gold earns most of the rise
    assert run(GoldDivergence(), TWO, records(reward=total, rewards__gold__mean=gold)) == []


def test_gold_divergence_is_not_applicable_without_a_gold_term() -> None:
    reward = RewardStructure(("proxy",))
    monitor = Monitor([GoldDivergence()], reward)
    assert monitor.run(records(reward=ramp(0, 1), rewards__proxy__mean=ramp(0, 1))) == []
    assert "monitor.gold" in monitor.not_applicable()["gold_divergence"]


# ---- one term carries the variance --------------------------------------------------------------
BOTH = RewardStructure(("a", "b"), ranges={"a": (0.0, 1.0), "b": (0.0, 1.0)})


def test_variance_share_fires_when_one_term_comes_to_carry_the_variance() -> None:
    recs = records(reward=flat(1.0), rewards__a__std=flat(0.3), rewards__b__std=ramp(0.3, 0.0))
    (alert,) = run(VarianceShare(), BOTH, recs)
    assert alert.terms == ("a",) and alert.values["share_now"] >= 0.9


@given(st.floats(0.05, 0.5), st.floats(0.05, 0.5), st.integers(0, 1000))
def test_variance_share_is_quiet_when_the_terms_share_it(a: float, b: float, seed: int) -> None:
    ratio = max(a, b) / min(a, b)
    if ratio > 2.5:  # one term alone would carry more than ~86%: not a balanced reward
        return
    recs = records(reward=flat(1.0), rewards__a__std=noisy(flat(a), seed, 0.01), rewards__b__std=noisy(flat(b), seed + 1, 0.01))
    assert run(VarianceShare(), BOTH, recs) == []


def test_variance_share_weights_each_term_by_its_weight() -> None:
    # equal spreads, but b weighs ten times less: a carries 99% of the variance from the start (no change, no alert)
    reward = RewardStructure(("a", "b"), weights={"a": lambda s: 1.0, "b": lambda s: 0.1})
    recs = records(reward=flat(1.0), rewards__a__std=flat(0.3), rewards__b__std=flat(0.3))
    assert run(VarianceShare(), reward, recs) == []
    # a's spread of 0.03 balances b's 0.3 at a tenth of the weight; when b stops varying, a carries it all
    (alert,) = run(VarianceShare(), reward, records(reward=flat(1.0), rewards__a__std=flat(0.03),
                                                    rewards__b__std=ramp(0.3, 0.0)))
    assert alert.terms == ("a",) and alert.values["share_start"] == pytest.approx(0.5)


def test_variance_share_needs_two_trained_terms() -> None:
    monitor = Monitor([VarianceShare()], TWO)  # gold has weight 0: one trained term
    monitor.run(records(reward=flat(1.0), rewards__proxy__std=flat(0.3), rewards__gold__std=flat(0.0)))
    assert "fewer than two terms" in monitor.not_applicable()["variance_share"]


# ---- length drift --------------------------------------------------------------------------------
def test_length_drift_fires_when_length_grows_and_gold_does_not_move() -> None:
    recs = records(reward=ramp(0.3, 0.9), **{"completions__mean_length": ramp(6.0, 16.0)},
                   rewards__gold__mean=flat(0.1))
    (alert,) = run(LengthDrift(), TWO, recs)
    assert alert.terms == ("gold",) and alert.values["length_now"] > alert.values["length_start"]


def test_length_drift_is_quiet_when_gold_improves_as_length_changes() -> None:
    recs = records(reward=ramp(0.3, 0.9), completions__mean_length=ramp(16.0, 6.0), rewards__gold__mean=ramp(0.1, 0.6))
    assert run(LengthDrift(), TWO, recs) == []


@given(st.floats(3.0, 30.0), st.integers(0, 1000))
def test_length_drift_is_quiet_on_a_steady_length(length: float, seed: int) -> None:
    recs = records(reward=flat(0.5), completions__mean_length=noisy(flat(length), seed, 0.05 * length),
                   rewards__gold__mean=flat(0.2))
    assert run(LengthDrift(), TWO, recs) == []


# ---- GRPO groups collapse ------------------------------------------------------------------------
def test_group_collapse_fires_when_zero_spread_groups_take_over() -> None:
    (alert,) = run(GroupCollapse(), TWO, records(reward=flat(1.0), frac_reward_zero_std=ramp(0.0, 1.0)))
    assert alert.detector == "group_collapse" and alert.values["zero_std_now"] >= 0.5


def test_group_collapse_is_quiet_when_groups_were_flat_from_the_start() -> None:
    # a sparse reward: most groups score all zeros from step 1; nothing changed
    assert run(GroupCollapse(), TWO, records(reward=flat(0.1), frac_reward_zero_std=noisy(flat(0.7), 3))) == []


@given(st.floats(0.0, 0.4), st.integers(0, 1000))
def test_group_collapse_is_quiet_on_healthy_groups(level: float, seed: int) -> None:
    assert run(GroupCollapse(), TWO, records(reward=flat(0.5), frac_reward_zero_std=noisy(flat(level), seed, 0.05))) == []


# ---- diversity collapse --------------------------------------------------------------------------
def test_diversity_collapse_fires_when_a_group_repeats_one_completion() -> None:
    (alert,) = run(DiversityCollapse(), TWO, records(reward=flat(1.0), monitor__distinct_frac=ramp(1.0, 0.125)))
    assert alert.values["distinct_now"] <= 0.5


@given(st.floats(0.6, 1.0), st.integers(0, 1000))
def test_diversity_collapse_is_quiet_while_completions_differ(level: float, seed: int) -> None:
    recs = records(reward=flat(0.5), monitor__distinct_frac=noisy(flat(level), seed, 0.05))
    assert run(DiversityCollapse(), TWO, recs) == []


def test_distinct_fraction_counts_distinct_texts_per_group() -> None:
    from rewardkit.monitor.trl_callback import distinct_fraction

    assert distinct_fraction(["a", "a ", "b", "c"], 2) == pytest.approx((0.5 + 1.0) / 2)
    assert distinct_fraction(["x"] * 8, 8) == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="group_size"):
        distinct_fraction(["a"], 0)


# ---- pinned at a bound ---------------------------------------------------------------------------
def test_pinned_at_bound_fires_when_a_term_reaches_the_end_of_its_range() -> None:
    pinned = ramp(0.4, 1.0, n=14) + flat(1.0, 6)  # climbs to the top, then stays there
    (alert,) = run(PinnedAtBound(), TWO, records(reward=pinned, rewards__proxy__mean=pinned, rewards__gold__mean=flat(1.0)))
    assert alert.terms == ("proxy",) and alert.values["bound"] == 1.0  # gold at its bound is success: not watched


def test_pinned_at_bound_fires_at_the_low_end_too() -> None:
    pinned = ramp(0.4, 0.0, n=14) + flat(0.0, 6)
    (alert,) = run(PinnedAtBound(), TWO, records(reward=pinned, rewards__proxy__mean=pinned))
    assert alert.values["bound"] == 0.0


def test_pinned_at_bound_ignores_terms_without_a_finite_range_or_pinned_from_the_start() -> None:
    open_range = RewardStructure(("proxy",), ranges={"proxy": (-math.inf, 0.0)})
    monitor = Monitor([PinnedAtBound()], open_range)
    assert monitor.run(records(reward=ramp(-3, 0), rewards__proxy__mean=ramp(-3.0, 0.0))) == []
    assert "finite output range" in monitor.not_applicable()["pinned_at_bound"]
    assert run(PinnedAtBound(), TWO, records(reward=flat(1.0), rewards__proxy__mean=flat(1.0))) == []


def test_pinned_at_bound_watches_a_term_whose_piecewise_weight_is_zero_at_the_start_and_the_end() -> None:
    from rewardkit.schedules import make_schedule

    bump = make_schedule({"schedule": "piecewise", "points": [[0, 0.0], [5, 1.0], [15, 0.0]]})
    assert bump(0) == 0.0 and bump(10**6) == 0.0 and bump(5) == 1.0  # sampled at 0 and 10**6 it looked untrained
    reward = RewardStructure(("proxy", "gold"), weights={"proxy": bump, "gold": lambda s: 0.0},
                             ranges={"proxy": (0.0, 1.0), "gold": (0.0, 1.0)}, gold="gold")
    pinned = ramp(0.4, 1.0, n=14) + flat(1.0, 6)
    (alert,) = run(PinnedAtBound(), reward, records(reward=pinned, rewards__proxy__mean=pinned,
                                                    rewards__gold__mean=flat(1.0)))
    assert alert.terms == ("proxy",) and alert.values["bound"] == 1.0
    never = make_schedule({"schedule": "piecewise", "points": [[0, 0.0], [5, 0.0]]})
    assert not RewardStructure(("proxy",), weights={"proxy": never}).ever_trained("proxy")
    ramp_up = make_schedule({"schedule": "linear", "start": 0.0, "end": 0.0, "steps": 10, "start_step": 3, "max": 1.0})
    assert not ramp_up.ever_nonzero() and make_schedule(0.5).ever_nonzero()


@given(st.floats(0.1, 0.9), st.integers(0, 1000))
def test_pinned_at_bound_is_quiet_inside_the_range(level: float, seed: int) -> None:
    values = [min(0.95, max(0.05, v)) for v in noisy(flat(level), seed, 0.03)]
    assert run(PinnedAtBound(), TWO, records(reward=values, rewards__proxy__mean=values)) == []


# ---- declared agreement ----------------------------------------------------------------------------
JUDGED = RewardStructure(("judge", "verifier"), ranges={"judge": (0.0, 1.0), "verifier": (0.0, 2.0)},
                         agree=(("judge", "verifier"),))


def test_disagreement_fires_when_the_judge_rises_and_the_verifier_does_not() -> None:
    recs = records(reward=ramp(0.3, 0.9), rewards__judge__mean=ramp(0.3, 0.9), rewards__verifier__mean=flat(0.2))
    (alert,) = run(Disagreement(), JUDGED, recs)
    assert alert.terms == ("judge", "verifier")


@given(st.floats(0.0, 0.6), st.integers(0, 1000))
def test_disagreement_is_quiet_when_both_move_together_in_range_units(rise: float, seed: int) -> None:
    # the verifier's range is twice as wide: the same progress is twice the value
    recs = records(reward=flat(0.5), rewards__judge__mean=noisy(ramp(0.2, 0.2 + rise), seed),
                   rewards__verifier__mean=noisy(ramp(0.4, 0.4 + 2 * rise), seed + 1, 0.06))
    assert run(Disagreement(), JUDGED, recs) == []


# ---- the monitor ---------------------------------------------------------------------------------
def test_each_alert_fires_once_and_a_streak_restarts_after_a_break() -> None:
    detector = GroupCollapse(window=1, patience=3)
    zero_std = [0.0, 0.0, 0.9, 0.9, 0.0, 0.9, 0.9, 0.9, 0.9, 0.9]  # a streak of 2 (too short), then one of 5
    (alert,) = run(detector, TWO, records(reward=flat(1.0, 10), frac_reward_zero_std=zero_std))
    assert (alert.began, alert.fired) == (6, 8)


def test_a_content_detector_fires_at_two_of_its_last_three_steps_and_not_at_two_far_apart() -> None:
    from rewardkit.monitor.detectors import ExploitSpread

    on_off = [0.1, 0.6, 0.1, 0.9, 0.1, 0.9, 0.9]  # an exploit that comes and goes (steps 1..7)
    (alert,) = run(ExploitSpread(), TWO, records(reward=flat(1.0, 7), monitor__exploit_frac=on_off))
    assert (alert.began, alert.fired) == (2, 4)
    assert run(ExploitSpread(within=2), TWO, records(reward=flat(1.0, 7), monitor__exploit_frac=on_off))[0].fired == 7
    apart = [0.1, 0.6, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1]  # over the level at steps 2 and 5: three steps apart
    assert run(ExploitSpread(), TWO, records(reward=flat(1.0, 8), monitor__exploit_frac=apart)) == []


def test_within_below_patience_is_a_located_error_in_a_detector_and_in_a_config(tmp_path) -> None:
    from rewardkit.config import parse_config, read_yaml
    from rewardkit.errors import ConfigError
    from rewardkit.monitor.detectors import WatchedSpread

    with pytest.raises(ConfigError, match=r"watched_spread.within: expected an integer >= patience \(3\), got 2"):
        WatchedSpread(patience=3, within=2)
    path = tmp_path / "r.yaml"
    path.write_text("version: 1\ncomponents:\n  a: {type: length_penalty, weight: 1.0, params: {max: 10}}\n"
                    "monitor: {exploit_spread: {within: 1}}\n")
    with pytest.raises(ConfigError, match=r"r.yaml: monitor.exploit_spread.within: expected an integer >= patience"):
        doc = read_yaml(path)
        parse_config(doc.data, source=doc.source)


def test_the_monitor_gives_the_same_alerts_fed_step_by_step_or_at_once() -> None:
    recs = records(reward=ramp(0.2, 0.9), rewards__proxy__mean=ramp(0.2, 1.0, n=14) + flat(1.0, 6), rewards__gold__mean=flat(0.1),
                   completions__mean_length=ramp(5, 15), frac_reward_zero_std=ramp(0, 1))
    detectors = [GoldDivergence(), LengthDrift(), GroupCollapse(), PinnedAtBound()]
    whole = Monitor(detectors, TWO).run(recs)
    stepwise = Monitor(detectors, TWO)
    fired = [a for r in recs for a in stepwise.update(r)]
    assert whole == fired and {a.detector for a in whole} == {"gold_divergence", "length_drift", "group_collapse",
                                                               "pinned_at_bound"}


def test_detector_thresholds_are_validated_with_their_names() -> None:
    from rewardkit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"gold_divergence.min_rise: expected a positive number"):
        GoldDivergence(min_rise=-1)
    with pytest.raises(ConfigError, match="window"):
        GroupCollapse(window=0)


def test_history_ignores_non_numbers_and_marks_missing_keys() -> None:
    history = History()
    history.append({"step": 1, TOTAL: 1.0, "note": "x", "flag": True})
    history.append({"step": 2, TOTAL: 3.0, LENGTH: 5.0})
    assert history.recent(TOTAL, 2) == 2.0 and history.baseline(LENGTH, 1) != history.baseline(LENGTH, 1)  # NaN
    assert history.has(LENGTH) and not history.has(ZERO_STD) and not history.has("flag")
    assert history.step == 2 and term_mean("t") == "rewards/t/mean" and term_std("t") == "rewards/t/std"
    assert DISTINCT == "monitor/distinct_frac"
