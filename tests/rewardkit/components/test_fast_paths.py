"""The built-in components' fast paths (``rewardkit/components/_fast/``) give their definitions' numbers:
bit for bit on the batched path, and to the float on the one-environment path, on loads of every
magnitude, with the composer using them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rewardkit import RewardComposer
from rewardkit.components import LoadImbalance
from rewardkit.components._fast import FAST_PATHS
from rewardkit.components._numeric import FEW_COLUMNS
from rewardkit.components.load_imbalance import STATISTICS
from rewardkit.registry import get_component_class

MAGNITUDES = st.sampled_from([1.0, 1e-160, 1e140, 1e200, 1e307])


def test_every_listed_fast_path_is_attached_and_the_definition_stays_compute() -> None:
    for name in FAST_PATHS:
        cls = get_component_class(name)
        assert callable(getattr(cls, "compute_fast", None)), name
        assert cls.compute.__module__ == f"rewardkit.components.{name}"  # the definition is the class's own
        assert cls.compute_fast.__module__ == f"rewardkit.components._fast.{name}"


@settings(max_examples=150, deadline=None)
@given(statistic=st.sampled_from(STATISTICS), n=st.integers(1, 6), k=st.integers(1, FEW_COLUMNS + 3),
       scale=MAGNITUDES, data=st.data())
def test_load_imbalance_fast_paths_give_the_definitions_numbers(statistic: str, n: int, k: int, scale: float,
                                                                data: st.DataObject) -> None:
    low = 0.0 if statistic in ("cv", "max_over_mean") else -1.0
    loads = data.draw(arrays(np.float64, (n, k), elements=st.floats(low, 1.0, allow_nan=False))) * scale
    term = LoadImbalance(name="imbalance", statistic=statistic)
    flags = np.zeros(n, dtype=bool)
    definition = term.compute({"replica_loads": loads}, flags, flags)
    fast = term.compute_fast({"replica_loads": loads}, flags, flags)
    assert np.array_equal(definition, fast), (loads, definition, fast)
    one_env = term.scalar_fn()
    scalar = [one_env(row.tolist(), False, False) for row in loads]
    assert scalar == pytest.approx(definition.tolist(), rel=1e-12, abs=0.0)


def test_the_composer_runs_the_fast_path_and_pays_what_the_definition_does() -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "imbalance": {"type": "load_imbalance", "params": {"statistic": "cv"}, "weight": -1.0}}})
    loads = np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0], [0.0, 0.0, 9.0]])
    calls = []
    original = LoadImbalance.compute_fast

    def counted(self, x, terminated, truncated):
        calls.append(x["replica_loads"].shape)
        return original(self, x, terminated, truncated)

    LoadImbalance.compute_fast = counted
    try:
        composer = RewardComposer.from_dict(composer.to_dict())
        out = composer.evaluate_batch({"replica_loads": loads})
    finally:
        LoadImbalance.compute_fast = original
    assert calls == [(3, 3)]
    flags = np.zeros(3, dtype=bool)
    expected = -LoadImbalance(name="i", statistic="cv").compute({"replica_loads": loads}, flags, flags)
    assert np.array_equal(np.asarray(out.total), expected)
