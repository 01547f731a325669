"""Transforms ``scale``, ``clip`` and ``tanh`` on floats and arrays, built from YAML-style specs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.errors import ConfigError
from rewardkit.transforms import Clip, Scale, Tanh, make_transform, make_transforms

FAST = settings(max_examples=60, deadline=None)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def build(spec):
    return make_transform(spec, path="t")


def test_scale_float_and_array():
    t = build({"scale": -0.5})
    assert isinstance(t, Scale)
    assert t(4.0) == -2.0
    np.testing.assert_array_equal(t(np.array([1.0, -2.0, 0.0])), [-0.5, 1.0, -0.0])


def test_clip_asymmetric_with_null_high():
    t = build({"clip": [-1, None]})
    assert isinstance(t, Clip)
    assert (t.low, t.high) == (-1.0, math.inf)
    assert [t(-5.0), t(-1.0), t(0.5), t(1e9)] == [-1.0, -1.0, 0.5, 1e9]
    np.testing.assert_array_equal(t(np.array([-5.0, 0.5, 1e9])), [-1.0, 0.5, 1e9])


def test_clip_asymmetric_with_null_low():
    t = build({"clip": [None, 2.5]})
    assert [t(-1e9), t(2.0), t(3.0)] == [-1e9, 2.0, 2.5]
    np.testing.assert_array_equal(t(np.array([-1e9, 2.0, 3.0])), [-1e9, 2.0, 2.5])


def test_clip_both_bounds_asymmetric():
    t = build({"clip": [-0.2, 3]})
    np.testing.assert_array_equal(t(np.array([-1.0, 0.0, 5.0])), [-0.2, 0.0, 3.0])
    assert t(-1.0) == -0.2


def test_clip_nan_passes_through_on_both_paths():
    t = build({"clip": [-1, 1]})
    assert math.isnan(t(math.nan))
    assert np.isnan(t(np.array([math.nan]))[0])


def test_tanh_float_and_array():
    t = build("tanh")
    assert isinstance(t, Tanh)
    assert t(0.0) == 0.0
    assert t(1.0) == pytest.approx(0.7615941559557649)
    np.testing.assert_allclose(t(np.array([-1.0, 0.0, 50.0])), [-0.7615941559557649, 0.0, 1.0])
    assert isinstance(build({"tanh": None}), Tanh)


def test_list_applies_in_order():
    ts = make_transforms([{"scale": 2}, {"clip": [-1, 1]}, "tanh"], path="transforms")
    x = 0.8
    for t in ts:
        x = t(x)
    assert x == pytest.approx(math.tanh(1.0))
    other_order = make_transforms(["tanh", {"scale": 2}, {"clip": [-1, 1]}], path="transforms")
    y = 0.8
    for t in other_order:
        y = t(y)
    assert y == pytest.approx(1.0)
    assert make_transforms(None, path="transforms") == []


@pytest.mark.parametrize("spec", [{"scale": 3.0}, {"clip": [-1.0, None]}, {"clip": [None, 2.0]}, "tanh"],
                         ids=str)
def test_to_spec_round_trip(spec):
    t = build(spec)
    assert t.to_spec() == spec
    assert build(t.to_spec()).to_spec() == spec


@FAST
@given(spec=st.sampled_from([{"scale": -1.5}, {"scale": 0.25}, {"clip": [-1, None]}, {"clip": [None, 0.3]},
                             {"clip": [-2, 0.5]}, "tanh"]),
       xs=st.lists(finite, min_size=1, max_size=8))
def test_float_path_equals_array_path(spec, xs):
    t = build(spec)
    arr = t(np.array(xs))
    assert arr.shape == (len(xs),)
    for x, a in zip(xs, arr, strict=True):
        assert t(x) == pytest.approx(float(a), rel=1e-15, abs=0.0)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("sqrt", "t: expected a transform among scale, shift, clip, tanh, got 'sqrt'"),
        ({"scale": "big"}, "t.scale: expected a finite number, got 'big'"),
        ({"scale": math.inf}, "t.scale: expected a finite number, got inf"),
        ({"scale": True}, "t.scale: expected a finite number, got True"),
        ({"clip": [1, -1]}, "t.clip: expected a list [low, high] with low < high, got [1, -1]"),
        ({"clip": [1, 1]}, "t.clip: expected a list [low, high] with low < high, got [1, 1]"),
        ({"clip": [1]}, "t.clip: expected a list [low, high] or null, got [1]"),
        ({"clip": ["a", 1]}, "t.clip: expected a list [low, high] of numbers or nulls, got ['a', 1]"),
        ({"clip": None}, "t.clip: expected a list [low, high], got None"),
        ({"tanh": 2}, "t.tanh: expected no argument for tanh, got 2"),
        ({"scale": 1, "clip": [0, 1]},
         "t: expected 'tanh', {scale: number}, {shift: number} or {clip: [low, high]}, got {'scale': 1, 'clip': [0, 1]}"),
        (3, "t: expected 'tanh', {scale: number}, {shift: number} or {clip: [low, high]}, got 3"),
    ],
)
def test_transform_errors(spec, message):
    with pytest.raises(ConfigError) as info:
        build(spec)
    assert str(info.value) == message


def test_transforms_must_be_a_list():
    with pytest.raises(ConfigError) as info:
        make_transforms("tanh", path="components.a.transforms", source="r.yaml")
    assert str(info.value) == "r.yaml: components.a.transforms: expected a list of transforms, got 'tanh'"
    with pytest.raises(ConfigError) as info:
        make_transforms(["tanh", "relu"], path="components.a.transforms", source="r.yaml")
    assert str(info.value) == ("r.yaml: components.a.transforms[1]: expected a transform among scale, shift, clip, "
                               "tanh, got 'relu'")
