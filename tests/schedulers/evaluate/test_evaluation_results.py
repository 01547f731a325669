"""The evaluation's ratios, best heuristic and paired wins (the README's headline table), on crafted episodes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from schedulers.evaluate.evaluation_results import EvaluationResults
from schedulers.evaluate.tables import METRICS, format_results

SEEDS = [101, 102, 103]
#: router -> per-seed (e2e_mean, ttft_p99, throughput)
CRAFTED = {
    "round_robin": [(10.0, 4.0, 9.0), (12.0, 5.0, 9.5), (11.0, 6.0, 9.2)],
    "least_prefill": [(9.0, 2.0, 9.1), (13.0, 2.5, 9.4), (10.0, 3.0, 9.3)],
    "jsq": [(9.5, 3.0, 9.0), (11.0, 3.5, 9.6), (10.5, 3.5, 9.1)],
    "ppo": [(8.0, 1.0, 9.2), (13.5, 3.0, 9.5), (10.0, 2.0, 9.4)],
}


def crafted_results() -> EvaluationResults:
    results = EvaluationResults("crafted", SEEDS, list(CRAFTED), ["round_robin", "least_prefill", "jsq"], "round_robin")
    for router, per_seed in CRAFTED.items():
        for seed, (e2e, ttft, tput) in zip(SEEDS, per_seed, strict=True):
            row = {key: 1.0 for key, _, _ in METRICS}
            row.update(router=router, seed=seed, e2e_mean=e2e, ttft_p99=ttft, throughput=tput)
            results.episodes.append(row)
    results.samples = {r: {"e2e": np.array([1.0, 2.0]), "ttft": np.array([0.1, 0.2])} for r in CRAFTED}
    return results


def row_of(results: EvaluationResults, router: str) -> dict:
    return next(r for r in results.table() if r["router"] == router)


def test_values_follow_seed_order() -> None:
    np.testing.assert_array_equal(crafted_results().values("ppo", "ttft_p99"), [1.0, 3.0, 2.0])


def test_best_heuristic_respects_direction() -> None:
    results = crafted_results()
    assert results.best_heuristic("ttft_p99") == "least_prefill"  # means 2.5 < 3.33 < 5.0
    assert results.best_heuristic("e2e_mean") == "jsq"  # 10.33 < 10.67 < 11.0
    assert results.best_heuristic("throughput") == "least_prefill"  # higher is better: 9.267 > 9.233 > 9.233
    assert EvaluationResults("x", SEEDS, ["ppo"], [], "round_robin").best_heuristic("ttft_p99") is None


def test_ratios_to_baseline_and_best_heuristic() -> None:
    ppo = row_of(crafted_results(), "ppo")
    assert ppo["ttft_p99"] == pytest.approx(2.0)
    assert ppo["ttft_p99_vs_round_robin"] == pytest.approx(2.0 / 5.0)
    assert ppo["ttft_p99_vs_best_heuristic"] == pytest.approx(2.0 / 2.5)
    assert ppo["ttft_p99_best_heuristic"] == "least_prefill"
    assert ppo["e2e_mean_vs_best_heuristic"] == pytest.approx((31.5 / 3) / 31.0 * 3)


def test_paired_wins_count_strictly_better_seeds() -> None:
    ppo = row_of(crafted_results(), "ppo")
    # TTFT p99 vs round_robin: 1<4, 3<5, 2<6 -> 3; vs least_prefill: 1<2, 3>2.5, 2<3 -> 2
    assert ppo["ttft_p99_wins_vs_baseline"] == 3
    assert ppo["ttft_p99_wins_vs_best_heuristic"] == 2
    # e2e vs round_robin: 8<10, 13.5>12, 10<11 -> 2; vs jsq: 8<9.5, 13.5>11, 10<10.5 -> 2
    assert ppo["e2e_mean_wins_vs_baseline"] == 2
    assert ppo["e2e_mean_wins_vs_best_heuristic"] == 2
    # a tie is not a win
    assert row_of(crafted_results(), "round_robin")["ttft_p99_wins_vs_baseline"] == 0


def test_zero_baseline_gives_nan_ratio_not_an_error() -> None:
    results = crafted_results()
    for row in results.episodes:
        if row["router"] == "round_robin":
            row["sched_delay_mean"] = 0.0
    assert math.isnan(row_of(results, "ppo")["sched_delay_mean_vs_round_robin"])


def test_format_and_save(tmp_path) -> None:
    results = crafted_results()
    text = format_results(results)
    assert text == results.format_table()
    assert "TTFT p99 (s)" in text and "0.400" in text and "3/3" in text and "2/3" in text
    paths = results.save(tmp_path)
    data = json.loads(paths["json"].read_text())
    assert {r["router"] for r in data["table"]} == set(CRAFTED)
    assert paths["plot"].stat().st_size > 10_000
    assert paths["summary_csv"].read_text().splitlines()[0].startswith("router,episodes,")


def test_paired_ratio_interval_brackets_the_ratio_and_narrows_with_consistent_seeds() -> None:
    from schedulers.evaluate.evaluation_results import paired_ratio_interval

    theirs = [1.0, 4.0, 2.0, 8.0, 3.0]
    steady = [0.9 * x for x in theirs]  # 10% better on every seed
    low, high = paired_ratio_interval(steady, theirs)
    assert low == pytest.approx(0.9) and high == pytest.approx(0.9)
    noisy = [0.7, 4.8, 1.6, 8.4, 3.3]  # better on some seeds, worse on others
    low, high = paired_ratio_interval(noisy, theirs)
    ratio = sum(noisy) / sum(theirs)
    assert low < ratio < high and high - low > 0.05
    assert paired_ratio_interval(noisy, theirs) == (low, high)  # seeded
    with pytest.raises(ValueError, match="equally long"):
        paired_ratio_interval([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="level"):
        paired_ratio_interval(noisy, theirs, level=1.0)
