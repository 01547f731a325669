"""Vidur's arrivals without Vidur: the shuffle is pandas' to the element, the length fitting Vidur's."""

from __future__ import annotations

import numpy as np
import pytest

from schedulers.shared.arrivals import fit_lengths, poisson_arrival_times, vidur_shuffle


@pytest.mark.parametrize("n", [1, 2, 17, 1000, 19366])
def test_the_shuffle_is_pandas_sample_for_every_seed(n):
    pd = pytest.importorskip("pandas")
    for seed in (0, 1, 101, 105, 2**32 - 1):
        expected = pd.Series(np.arange(n)).sample(frac=1, random_state=seed).to_numpy()
        np.testing.assert_array_equal(vidur_shuffle(n, seed), expected)


def test_arrivals_are_capped_poisson_intervals():
    times = poisson_arrival_times(5000, 4.0, 7)
    gaps = np.diff(np.concatenate([[0.0], times]))
    assert gaps.min() > 0 and gaps.max() <= 3.0 / 4.0 + 1e-12
    assert abs(gaps.mean() - 0.25) < 0.02  # a little below 1/qps: the cap cuts the tail


def test_lengths_are_scaled_then_shortened_in_proportion():
    prefill, decode = fit_lengths(np.array([1000, 40, 3000]), np.array([200, 8, 1000]), 0.5, 512)
    assert np.all(prefill + decode <= 512) and prefill[1] == 20 and decode[1] == 4
    assert abs(prefill[2] / decode[2] - 3.0) < 0.05
