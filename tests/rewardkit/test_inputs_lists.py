"""Flat lists of Python numbers take the single-environment fast path and give the array path's numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rewardkit
from rewardkit.errors import InvalidInputError

HYBRID = Path(__file__).resolve().parents[2] / "configs" / "rewards" / "vidur_hybrid.yaml"


@pytest.fixture
def composer() -> rewardkit.RewardComposer:
    return rewardkit.RewardComposer.from_yaml(HYBRID).eval()


@pytest.mark.parametrize("loads", [[3, 5, 4, 9], [3.0, 5.5, 4.0, 9.0], [0, 0, 0, 0], [2.5]])
def test_a_list_gives_the_same_numbers_as_an_array(composer: rewardkit.RewardComposer, loads: list) -> None:
    base = {"throughput": 0.06, "latency": 7.0}
    from_list = composer({**base, "replica_loads": loads}, step=3)
    from_array = composer({**base, "replica_loads": np.asarray(loads, dtype=float)}, step=3)
    assert from_list.total == from_array.total
    assert from_list.as_dict() == from_array.as_dict()


def test_the_fast_path_does_not_skip_the_checks(composer: rewardkit.RewardComposer) -> None:
    base = {"throughput": 0.06, "latency": 7.0}
    with pytest.raises(InvalidInputError, match="replica_loads"):
        composer({**base, "replica_loads": [1, 10**400, 2, 3]})
    with pytest.raises(rewardkit.errors.NonFiniteInputError, match="replica_loads"):
        composer({**base, "replica_loads": [1.0, float("nan"), 2.0, 3.0]})


def test_the_list_the_caller_passed_is_not_the_one_components_read(composer: rewardkit.RewardComposer) -> None:
    loads = [3, 5, 4, 9]
    composer({"throughput": 0.06, "latency": 7.0, "replica_loads": loads})
    assert loads == [3, 5, 4, 9] and all(type(x) is int for x in loads)


def test_nested_lists_are_still_a_batch(composer: rewardkit.RewardComposer) -> None:
    out = composer({"throughput": [0.06, 0.07], "latency": [7.0, 3.0], "replica_loads": [[3, 5, 4, 9], [1, 1, 1, 1]]})
    assert np.shape(out.total) == (2,)
