"""Normalizer statistics stay finite: a value that would overflow them raises and changes nothing,
and normalized values beyond the float64 range saturate (the scalar and batched paths alike)."""

from __future__ import annotations

import copy
import math
import sys

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError
from rewardkit.normalizers import RunningMeanStd, make_normalizer

FLOAT_MAX = sys.float_info.max

HUGE = [1e200, 1e308, -1e308]


def norm(spec):
    return make_normalizer(spec, path="components.x.normalize", source="reward.yaml")


def composer(kind: str) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": {
        "x": {"type": "info_value", "params": {"key": "x"}, "normalize": kind}}})


@pytest.mark.parametrize("value", HUGE)
def test_running_mean_std_refuses_an_update_that_overflows(value):
    for batched in (False, True):
        m = RunningMeanStd(epsilon=0.0)
        m.update(np.array([0.5, 1.0]))
        before = m.state_dict()
        with pytest.raises(InvalidInputError, match="overflow float64"):
            m.update(np.array([value])) if batched else m.update_scalar(value)
        assert m.state_dict() == before
        m.update_scalar(2.0)
        assert all(math.isfinite(v) for v in m.state_dict().values())


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize("kind", ["running_zscore", "return_std"])
def test_an_outlier_raises_names_the_normalizer_and_leaves_later_values_intact(kind, value):
    a, b = norm(kind), norm(kind)
    for v in (0.5, 1.0, 0.75):
        a.scalar(v, False, True)
        b(np.array([v]), None, True)
    for call in (lambda: a.scalar(value, False, True), lambda: b(np.array([value]), None, True)):
        saved = copy.deepcopy((a.state_dict(), b.state_dict()))
        with pytest.raises(InvalidInputError, match=rf"reward.yaml: components.x.normalize \({kind}\): the running"):
            call()
        assert (a.state_dict(), b.state_dict()) == saved
    # the statistics still work: a later ordinary value is normalized, not flattened to 0 or NaN
    later = a.scalar(2.0, False, True)
    assert later == pytest.approx(float(b(np.array([2.0]), None, True)[0]), rel=1e-12)
    assert math.isfinite(later) and later != 0.0


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("value", HUGE)
def test_composer_call_with_an_overflowing_value_raises_and_changes_nothing(batched, value):
    c = composer("running_zscore")
    ctxs = [{"x": v} for v in (0.5, 1.0)] if not batched else [{"x": np.array([0.5, 1.0])}]
    for ctx in ctxs:
        c(ctx)
    saved = copy.deepcopy(c.state_dict())
    bad = {"x": value} if not batched else {"x": np.array([value, 1.0])}
    with pytest.raises(InvalidInputError, match="overflow"):
        c(bad)
    assert c.state_dict() == saved
    out = c({"x": 2.0})
    assert math.isfinite(out.total) and out.total > 0.0


@pytest.mark.parametrize("kind", ["running_zscore", "return_std", "running_minmax"])
def test_eval_outputs_far_outside_frozen_statistics_saturate(kind):
    spec = {"type": kind, "clip": None} if kind != "running_minmax" else kind
    a, b = norm(spec), norm(spec)
    for v in (0.0, 1e-3):  # a small spread: 1e308 away from it overflows
        a.scalar(v, False, True)
        b(np.array([v]), None, True)
    for x in (1e308, -1e308):
        scalar = a.scalar(x, False, False)
        array = float(b(np.array([x]), None, False)[0])
        assert scalar == array and math.isfinite(scalar) and abs(scalar) == FLOAT_MAX


def test_minmax_bounds_wider_than_the_float_range_stay_finite():
    a, b = norm("running_minmax"), norm("running_minmax")
    for v in (-1e308, 1e308):
        a.scalar(v, False, True)
    out = b(np.array([-1e308, 0.0, 1e308]), None, True)
    np.testing.assert_array_equal(out, [0.0, 0.5, 1.0])
    assert [a.scalar(v, False, True) for v in (-1e308, 0.0, 1e308)] == [0.0, 0.5, 1.0]


def test_torch_statistics_raise_when_checking_and_stay_finite_when_not():
    torch = pytest.importorskip("torch", reason="pip install torch (the torch extra)")
    c = composer("running_zscore")
    c({"x": torch.tensor([0.5, 1.0], dtype=torch.float64)})
    saved = copy.deepcopy(c.state_dict())
    with pytest.raises(InvalidInputError, match="overflow"):
        c({"x": torch.tensor([1e200, 1.0], dtype=torch.float64)})
    assert c.state_dict() == saved
    unchecked = RewardComposer.from_dict(c.to_dict(), check_inputs=False)
    unchecked({"x": torch.tensor([0.5, 1.0], dtype=torch.float64)})
    unchecked({"x": torch.tensor([1e200, 1.0], dtype=torch.float64)})
    state = unchecked.state_dict()["normalizers"]["x"]
    assert math.isfinite(state["mean"]) and math.isfinite(state["var"])
