"""Weight schedules: hand-computed values, start_step, bounds, end_step, and the compiled source."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.errors import ConfigError
from rewardkit.schedules import SCHEDULES, Constant, Linear, make_schedule

FAST = settings(max_examples=60, deadline=None)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
steps_st = st.integers(min_value=0, max_value=100_000)

FLOAT_MAX = sys.float_info.max


def evaluate_source(schedule, step: int) -> float:
    """Value of the compiled expression ``schedule.source("step")`` at ``step``."""
    src = schedule.source("step")
    assert src is not None
    return eval(src, {"__builtins__": {"min": min, "max": max}}, {"step": step})  # noqa: S307


# ---- constant -------------------------------------------------------------------------------
def test_number_is_a_constant_schedule():
    s = make_schedule(2.5)
    assert isinstance(s, Constant)
    assert [s(0), s(1), s(10**9)] == [2.5, 2.5, 2.5]


def test_constant_mapping_with_bounds():
    assert make_schedule({"schedule": "constant", "value": 5, "max": 2})(100) == 2.0
    assert make_schedule({"schedule": "constant", "value": -5, "min": -1})(0) == -1.0


def test_negative_constant_weight():
    assert make_schedule(-0.9)(123) == -0.9


# ---- linear ---------------------------------------------------------------------------------
def test_linear_hand_values():
    s = make_schedule({"schedule": "linear", "start": 1.0, "end": 0.0, "steps": 10})
    assert [s(0), s(5), s(10), s(11), s(10**6)] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert s(2) == pytest.approx(0.8)


def test_linear_holds_start_before_start_step():
    s = make_schedule({"schedule": "linear", "start": 2.0, "end": 4.0, "steps": 100, "start_step": 1000})
    assert s(0) == 2.0
    assert s(999) == 2.0
    assert s(1000) == 2.0
    assert s(1050) == pytest.approx(3.0)
    assert s(1100) == 4.0
    assert s(5000) == 4.0


def test_linear_end_step_equals_steps_from_start_step():
    a = make_schedule({"schedule": "linear", "start": 1.0, "end": -1.0, "start_step": 100, "end_step": 300})
    b = make_schedule({"schedule": "linear", "start": 1.0, "end": -1.0, "start_step": 100, "steps": 200})
    for step in (0, 100, 150, 200, 299, 300, 301, 1000):
        assert a(step) == b(step)
    assert a(200) == pytest.approx(0.0)


def test_linear_with_negative_weights():
    s = make_schedule({"schedule": "linear", "start": -1.0, "end": -3.0, "steps": 4})
    assert [s(0), s(2), s(4), s(8)] == [-1.0, pytest.approx(-2.0), -3.0, -3.0]


def test_linear_min_max_bounds():
    s = make_schedule({"schedule": "linear", "start": 1.0, "end": -1.0, "steps": 10, "min": -0.5, "max": 0.8})
    assert s(0) == 0.8
    assert s(5) == pytest.approx(0.0)
    assert s(10) == -0.5
    assert s(100) == -0.5


@FAST
@given(start=finite, end=finite, span=st.integers(1, 10_000), start_step=st.integers(0, 1000))
def test_linear_ends_are_exact(start, end, span, start_step):
    s = make_schedule({"schedule": "linear", "start": start, "end": end, "steps": span, "start_step": start_step})
    assert s(start_step) == start
    assert s(start_step + span) == end
    assert s(start_step + 2 * span) == end
    mid = s(start_step + span / 2)
    assert min(start, end) - 1e-9 <= mid <= max(start, end) + 1e-9


def test_linear_with_huge_opposite_ends_stays_finite():
    s = make_schedule({"schedule": "linear", "start": -1e308, "end": 1e308, "steps": 2})
    assert s(0) == -1e308
    assert s(1) == 0.0
    assert s(2) == 1e308


# ---- exponential ----------------------------------------------------------------------------
def test_exponential_hand_values():
    s = make_schedule({"schedule": "exponential", "start": 2.0, "rate": 0.5})
    assert [s(0), s(1), s(3)] == [2.0, 1.0, 0.25]


def test_exponential_start_step_and_bounds():
    s = make_schedule({"schedule": "exponential", "start": 1.0, "rate": 2.0, "start_step": 10, "max": 5.0})
    assert s(0) == 1.0
    assert s(10) == 1.0
    assert s(12) == 4.0
    assert s(13) == 5.0
    s = make_schedule({"schedule": "exponential", "start": 1.0, "rate": 0.1, "min": 0.05})
    assert s(1) == pytest.approx(0.1)
    assert s(2) == 0.05


def test_exponential_overflow_saturates_with_the_right_sign():
    grow = {"schedule": "exponential", "rate": 10.0}
    assert make_schedule({**grow, "start": 1.0})(10**6) == FLOAT_MAX  # saturates: weights stay finite
    assert make_schedule({**grow, "start": -1.0})(10**6) == -FLOAT_MAX
    assert make_schedule({**grow, "start": 0.0})(10**6) == 0.0
    assert make_schedule({**grow, "start": 1.0, "max": 3.0})(10**6) == 3.0


# ---- cosine ---------------------------------------------------------------------------------
def test_cosine_hand_values():
    s = make_schedule({"schedule": "cosine", "start": 1.0, "end": 0.0, "steps": 10})
    assert s(0) == 1.0
    assert s(5) == pytest.approx(0.5)
    assert s(2.5) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert s(10) == 0.0
    assert s(50) == 0.0


def test_cosine_start_step_and_end_step():
    s = make_schedule({"schedule": "cosine", "start": -2.0, "end": 2.0, "start_step": 100, "end_step": 200})
    assert s(0) == -2.0
    assert s(100) == -2.0
    assert s(150) == pytest.approx(0.0, abs=1e-12)
    assert s(200) == 2.0


@FAST
@given(start=finite, end=finite, span=st.integers(1, 10_000))
def test_cosine_ends_are_exact(start, end, span):
    s = make_schedule({"schedule": "cosine", "start": start, "end": end, "steps": span})
    assert s(0) == start
    assert s(span) == end


# ---- step -----------------------------------------------------------------------------------
def test_step_hand_values():
    s = make_schedule({"schedule": "step", "start": 1.0, "factor": 0.5, "every": 10})
    assert [s(0), s(9), s(10), s(19), s(20), s(35)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.125]


def test_step_start_step_negative_factor_and_bounds():
    s = make_schedule({"schedule": "step", "start": 1.0, "factor": -2.0, "every": 5, "start_step": 100,
                       "min": -3.0})
    assert s(50) == 1.0
    assert s(104) == 1.0
    assert s(105) == -2.0
    assert s(110) == 4.0
    assert s(115) == -3.0  # -8 clipped to min


def test_step_overflow_sign_follows_parity():
    base = {"schedule": "step", "start": 1.0, "factor": -10.0, "every": 1}
    assert make_schedule(base)(10_000) == FLOAT_MAX
    assert make_schedule(base)(10_001) == -FLOAT_MAX


# ---- piecewise ------------------------------------------------------------------------------
def test_piecewise_hand_values():
    s = make_schedule({"schedule": "piecewise", "points": [[0, 0.0], [10, 1.0], [20, -1.0]]})
    assert [s(-5), s(0), s(5), s(10), s(15), s(20), s(30)] == [0.0, 0.0, 0.5, 1.0, 0.0, -1.0, -1.0]


def test_piecewise_flat_before_first_point_and_bounded():
    s = make_schedule({"schedule": "piecewise", "points": [[100, 2.0], [200, 4.0]], "max": 3.0})
    assert s(0) == 2.0
    assert s(150) == 3.0
    assert s(125) == 2.5


# ---- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, message",
    [
        ({"schedule": "linear", "start": 1, "end": 0},
         "weight.steps: expected a positive number (or end_step), got nothing"),
        ({"schedule": "linear", "start": 1, "end": 0, "steps": 5, "end_step": 5},
         "weight.end_step: expected only one of steps and end_step, got both"),
        ({"schedule": "linear", "start": 1, "end": 0, "start_step": 10, "end_step": 10},
         "weight.end_step: expected end_step > start_step, got end_step=10.0 and start_step=10.0"),
        ({"schedule": "linear", "start": 1, "end": 0, "steps": 5, "min": 1, "max": 0},
         "weight.min: expected min <= max, got min=1.0 and max=0.0"),
        ({"schedule": "linear", "start": 1, "end": 0, "steps": -5},
         "weight.steps: expected a positive number, got -5"),
        ({"schedule": "wobbly"},
         "weight.schedule: expected one of constant, linear, exponential, cosine, step, piecewise, got 'wobbly'"),
        ({"schedule": ["linear"]},
         "weight.schedule: expected one of constant, linear, exponential, cosine, step, piecewise, got ['linear']"),
        ({"schedule": "piecewise", "points": [[0, 1], [0, 2]]},
         "weight.points: expected [step, value] pairs with strictly increasing steps, got [[0, 1], [0, 2]]"),
        ({"schedule": "exponential", "start": 1, "rate": 0},
         "weight.rate: expected a positive number, got 0"),
        ({"schedule": "constant"},
         "weight.value: missing required parameter (a finite number)"),
        ("fast", "weight: expected a number or a mapping with 'schedule', got 'fast'"),
        (float("nan"), "weight: expected a finite number or a schedule, got nan"),
        (True, "weight: expected a number or a mapping with 'schedule', got True"),
    ],
)
def test_schedule_errors(spec, message):
    with pytest.raises(ConfigError) as info:
        make_schedule(spec)
    assert str(info.value) == message


def test_schedule_error_carries_source_and_path():
    with pytest.raises(ConfigError) as info:
        make_schedule({"schedule": "linear", "start": 1, "end": 0, "steps": 10, "min": 3, "max": 2},
                      path="components.a.weight", source="x.yaml")
    assert str(info.value) == "x.yaml: components.a.weight.min: expected min <= max, got min=3.0 and max=2.0"


def test_huge_integer_is_rejected_not_overflowing():
    with pytest.raises(ConfigError, match="expected a finite number or a schedule"):
        make_schedule(10**400)
    with pytest.raises(ConfigError, match=r"weight\.start: expected a finite number"):
        make_schedule({"schedule": "linear", "start": 10**400, "end": 0, "steps": 1})


# ---- round trip and compiled source ----------------------------------------------------------
ALL_SPECS = [
    {"schedule": "constant", "value": 0.3, "min": 0.0},
    {"schedule": "linear", "start": 1.0, "end": 0.0, "steps": 10, "start_step": 5},
    {"schedule": "linear", "start": 1.0, "end": 0.0, "end_step": 50, "start_step": 5, "max": 0.9},
    {"schedule": "exponential", "start": 1.0, "rate": 0.9, "start_step": 3},
    {"schedule": "cosine", "start": 0.0, "end": 1.0, "steps": 7},
    {"schedule": "step", "start": 2.0, "factor": 0.5, "every": 3},
    {"schedule": "piecewise", "points": [[0, 1.0], [5, 3.0]], "min": 1.5},
]


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s["schedule"])
def test_to_dict_rebuilds_the_same_schedule(spec):
    s = make_schedule(spec)
    again = make_schedule(s.to_dict())
    assert again.to_dict() == s.to_dict()
    assert type(again) is type(s)
    assert [again(k) for k in range(0, 60, 3)] == [s(k) for k in range(0, 60, 3)]


def test_every_schedule_name_is_covered():
    assert {s["schedule"] for s in ALL_SPECS} == set(SCHEDULES)


@FAST
@given(start=finite, end=finite, span=st.integers(1, 50_000), start_step=st.integers(0, 5000),
       bounds=st.tuples(st.none() | finite, st.none() | finite), step=steps_st)
def test_linear_source_matches_call(start, end, span, start_step, bounds, step):
    low, high = bounds
    if low is not None and high is not None and low > high:
        low, high = high, low
    s = make_schedule({"schedule": "linear", "start": start, "end": end, "steps": span,
                       "start_step": start_step, "min": low, "max": high})
    assert isinstance(s, Linear)
    assert evaluate_source(s, step) == s(step)


@FAST
@given(value=finite, bounds=st.tuples(st.none() | finite, st.none() | finite), step=steps_st)
def test_constant_source_matches_call(value, bounds, step):
    low, high = bounds
    if low is not None and high is not None and low > high:
        low, high = high, low
    s = make_schedule({"schedule": "constant", "value": value, "min": low, "max": high})
    assert evaluate_source(s, step) == s(step)
    bounded = min(math.inf if high is None else high, max(-math.inf if low is None else low, value))
    assert s(step) == max(-FLOAT_MAX, min(FLOAT_MAX, bounded))
