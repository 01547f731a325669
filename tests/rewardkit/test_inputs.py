"""Numbers reaching the composer: context values of any NumPy dtype compute in float64
and state stays plain Python numbers; non-numbers get an error naming the key and the term;
episode flags are booleans; weights are finite and the compiled path agrees with
``shaper.weight()`` on every schedule; ``allow_nonfinite`` gives the same numbers on both paths;
copies and pickles are independent; one composer serves one environment wrapper."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import ConfigError, RewardComposer, RewardKitError
from rewardkit.errors import InvalidInputError
from rewardkit.schedules import SCHEDULES

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "configs" / "rewards").glob("*.yaml"))
FLOAT_MAX = sys.float_info.max

STATEFUL: dict[str, Any] = {
    "version": 1,
    "components": {
        "value": {"type": "linear", "inputs": {"value": "x"}, "normalize": "running_zscore"},
        "range": {"type": "linear", "inputs": {"value": "x"}, "normalize": "running_minmax"},
        "shaping": {"type": "potential_shaping", "inputs": {"potential": "x"}, "normalize": "return_std"},
        "delta": {"type": "ema_delta", "params": {"signal": "x"}},
        "balance": {"type": "load_imbalance", "params": {"statistic": "std"}},
    },
}


def plain(value: Any) -> bool:
    """Whether ``value`` is built only of dicts, lists, str, bool, None and plain int/float."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or type(value) in (str, bool, int, float)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble, np.int8, np.int32,
                                   np.int64, np.uint16, np.uint64])
@pytest.mark.parametrize("form", ["scalar", "0-d array"])
def test_numpy_numbers_compute_like_python_floats_and_state_stays_plain(dtype, form):
    values = [1.0, 3.0, 2.0, 7.0, 5.0]
    loads = [1.0, 2.0, 4.0]
    reference, subject = RewardComposer.from_dict(STATEFUL), RewardComposer.from_dict(STATEFUL)
    for v in values:
        x = dtype(v) if form == "scalar" else np.array(v, dtype=dtype)
        got = subject({"x": x, "replica_loads": np.array(loads, dtype=dtype)})
        want = reference({"x": float(dtype(v)), "replica_loads": [float(dtype(q)) for q in loads]})
        assert got.as_dict() == want.as_dict()
        assert type(got.total) is float
    state = subject.state_dict()
    assert state == reference.state_dict()
    assert plain(state)
    json.dumps(state)
    yaml.safe_dump(state)


def test_float32_batches_compute_in_float32_and_state_passes_json_and_yaml():
    """Dtype policy: float32 in, float32 out; the state still saves as plain floats."""
    c32, c64 = RewardComposer.from_dict(STATEFUL), RewardComposer.from_dict(STATEFUL)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.normal(size=3).astype(np.float32)
        loads = rng.uniform(0, 5, (3, 4)).astype(np.float32)
        a = c32({"x": x, "replica_loads": loads})
        b = c64({"x": x.astype(np.float64), "replica_loads": loads.astype(np.float64)})
        np.testing.assert_allclose(a.total, b.total, rtol=1e-5, atol=1e-6)
        assert a.total.dtype == np.float32 and b.total.dtype == np.float64
        assert all(v.dtype == np.float32 for k, v in a.as_dict().items() if not k.endswith("/weight"))
    s32, s64 = c32.state_dict(), c64.state_dict()
    assert s32.keys() == s64.keys() and s32["step"] == s64["step"]
    assert all(type(v) is float for values in s32["components"].values() for vs in values.values() for v in vs)
    json.dumps(c32.state_dict())
    yaml.safe_dump(c32.state_dict())


@pytest.mark.parametrize("bad, expected", [
    ("3.5", "a number"), ([[1.0, 2.0], [3.0]], "rectangular"), (b"3", "a number"), (True, "booleans are not numbers"),
    (np.bool_(False), "a number"),
    (None, "a number"), (1 + 2j, "a number"), ({"v": 1}, "a number"), (10**400, "within the float64 range"),
    (np.array(["a"]), "dtype"), (np.array([1 + 1j]), "dtype"), (np.array([True, False]), "dtype"),
    ([10**400, 1.0], "within the float64 range"),
])
def test_non_numbers_are_refused_naming_the_key_and_the_term(bad, expected):
    c = RewardComposer.from_dict({"version": 1, "components": {
        "scaled": {"type": "linear", "inputs": {"value": "x"}, "normalize": "running_zscore"},
        "also": {"type": "linear", "inputs": {"value": "x"}}}})
    c({"x": 1.0})
    before = c.state_dict()
    with pytest.raises(InvalidInputError) as info:
        c({"x": bad})
    message = str(info.value)
    assert "context key 'x' (read by also, scaled)" in message and expected in message
    assert len(message) < 300  # never the full repr of a large value
    assert c.state_dict() == before


def test_vector_inputs_refuse_non_numbers_too():
    c = RewardComposer.from_dict({"version": 1, "components": {"balance": {"type": "load_imbalance"}}})
    for bad in (["1", 2.0], [True, False], [None, 1.0], "1,2", {"a": 1.0}):
        with pytest.raises(InvalidInputError, match="context key 'replica_loads' \\(read by balance\\)"):
            c({"replica_loads": bad})
    assert c.step == 0


def test_a_nested_python_list_is_a_batch():
    c = RewardComposer.from_dict({"version": 1, "components": {
        "scaled": {"type": "linear", "inputs": {"value": "x"}, "weight": 2.0},
        "balance": {"type": "load_imbalance", "params": {"statistic": "range"}}}})
    out = c({"x": [1.0, 2.0], "replica_loads": [[1.0, 3.0], [2.0, 2.0]]})
    np.testing.assert_array_equal(out.total, [2.0 + 2.0, 4.0 + 0.0])
    assert c.step == 2
    one = c({"x": 1, "replica_loads": [1, 3]}, step=0)  # a flat list is one environment's vector
    assert one.total == 4.0 and type(one.total) is float


@pytest.mark.parametrize("flag", [1, 0, 1.0, "yes", None.__class__, np.int64(1), np.array([1, 0])])
def test_episode_flags_accept_only_booleans(flag):
    c = RewardComposer.from_dict(STATEFUL)
    ctx = {"x": np.array([1.0, 2.0]), "replica_loads": np.ones((2, 3))} if isinstance(flag, np.ndarray) \
        else {"x": 1.0, "replica_loads": [1.0, 2.0]}
    with pytest.raises(InvalidInputError, match="terminated: expected a boolean or an array of booleans"):
        c(ctx, terminated=flag)
    assert c.step == 0
    c(ctx, terminated=np.bool_(True) if not isinstance(flag, np.ndarray) else np.array([True, False]))
    assert c.step >= 1


# ---- weights: finite, and the compiled paths agree with shaper.weight() ----------------------------
def test_min_inf_on_a_constant_weight_is_refused_with_the_key_path():
    with pytest.raises(ConfigError, match=r"components\.a\.weight\.min: expected a number below infinity"):
        RewardComposer.from_dict({"version": 1, "components": {"a": {
            "type": "linear", "inputs": {"value": "x"}, "weight": {"schedule": "constant", "value": 1.0,
                                                                   "min": math.inf}}}})
    with pytest.raises(ConfigError, match=r"weight\.max: expected a number above -infinity"):
        RewardComposer.from_dict({"version": 1, "components": {"a": {
            "type": "linear", "inputs": {"value": "x"}, "weight": {"schedule": "linear", "start": 1.0,
                                                                   "end": 0.0, "steps": 5, "max": -math.inf}}}})


def test_a_step_schedule_with_a_tiny_every_does_not_overflow():
    c = RewardComposer.from_dict({"version": 1, "components": {"a": {
        "type": "linear", "inputs": {"value": "x"},
        "weight": {"schedule": "step", "start": 1.0, "factor": 0.5, "every": 5e-324}}}})
    assert c({"x": 2.0}, step=0).total == 2.0
    assert c({"x": 2.0}, step=1).total == 0.0
    assert c.shaper.weight("a", 1) == 0.0


def test_a_saturating_exponential_weight_never_gives_nan_from_finite_inputs():
    c = RewardComposer.from_dict({"version": 1, "components": {"a": {
        "type": "linear", "inputs": {"value": "x"}, "weight": {"schedule": "exponential", "start": 1.0,
                                                               "rate": 10.0}}}})
    out = c({"x": 0.0}, step=10**6)
    assert out.total == 0.0 and out.terms["a"].weight == FLOAT_MAX
    batched = c({"x": np.array([0.0, 0.0])}, step=10**6)
    np.testing.assert_array_equal(batched.total, [0.0, 0.0])


bound = st.one_of(st.none(), st.floats(-50, 50), st.sampled_from([-math.inf, math.inf]))
SCHEDULE_SPECS = st.one_of(
    st.builds(lambda v: {"schedule": "constant", "value": v}, st.floats(-1e6, 1e6)),
    st.builds(lambda a, b, n, s: {"schedule": "linear", "start": a, "end": b, "steps": n, "start_step": s},
              st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.integers(1, 100), st.integers(0, 50)),
    st.builds(lambda a, b, n: {"schedule": "cosine", "start": a, "end": b, "steps": n},
              st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.integers(1, 100)),
    st.builds(lambda a, r: {"schedule": "exponential", "start": a, "rate": r},
              st.floats(-1e3, 1e3), st.sampled_from([0.5, 0.99, 1.0, 1.5, 1e10])),
    st.builds(lambda a, f, e: {"schedule": "step", "start": a, "factor": f, "every": e},
              st.floats(-1e3, 1e3), st.sampled_from([-2.0, 0.0, 0.5, 3.0]), st.sampled_from([5e-324, 0.5, 3.0])),
    st.builds(lambda p: {"schedule": "piecewise", "points": [[0, p], [10, -p], [20, 2 * p]]}, st.floats(-1e6, 1e6)),
)


@settings(max_examples=150, deadline=None)
@given(spec=SCHEDULE_SPECS, low=bound, high=bound, steps=st.lists(st.integers(0, 10**7), min_size=1, max_size=4))
def test_compiled_weights_equal_shaper_weight_on_every_schedule(spec, low, high, steps):
    spec = {**spec, "min": low, "max": high}
    try:
        c = RewardComposer.from_dict({"version": 1, "components": {"a": {
            "type": "info_value", "params": {"key": "x"}, "weight": spec}}})
    except ConfigError as exc:  # min > max, min: inf or max: -inf
        refused = low == math.inf or high == -math.inf or (low is not None and high is not None and low > high)
        assert refused, exc
        return
    assert spec["schedule"] in SCHEDULES
    for step in steps:
        want = c.shaper.weight("a", step)
        assert math.isfinite(want)
        assert c({"x": 1.0}, step=step).terms["a"].weight == want
        assert c({"x": np.array([1.0])}, step=step).terms["a"].weight[0] == want


# ---- allow_nonfinite: the same numbers on both paths ----------------------------------------------
special = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0, -3.0, 1e308])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy notes the NaN arithmetic it was asked for
@pytest.mark.parametrize("preset", [p.name for p in PRESETS])
@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.tuples(special, special, special), min_size=1, max_size=4))
def test_allow_nonfinite_gives_the_same_numbers_on_both_paths(preset, values):
    scalar = RewardComposer.from_yaml(ROOT / "configs" / "rewards" / preset, allow_nonfinite=True)
    batched = RewardComposer.from_yaml(ROOT / "configs" / "rewards" / preset, allow_nonfinite=True)
    for a, b, c in values:
        ctx = {key: a for key in scalar.context_keys()}
        ctx.update({"latency": b, "throughput": c, "replica_loads": [abs(a), abs(b), 1.0]})
        ctx_b = {k: np.array([v], dtype=np.float64) for k, v in ctx.items()}
        try:
            one = scalar(ctx)
        except ValueError as exc:  # a component refusing a negative value refuses it on both paths
            with pytest.raises(ValueError, match=re.escape(str(exc)[:30])):
                batched(ctx_b)
            continue
        many = batched(ctx_b)
        for key, value in one.as_dict().items():
            np.testing.assert_array_equal(np.asarray(value), np.asarray(many.as_dict()[key])[0], err_msg=key)
    assert json.dumps(scalar.step) == json.dumps(batched.step)


# ---- copying, pickling, sharing --------------------------------------------------------------------
def test_deepcopy_gives_an_independent_composer():
    c = RewardComposer.from_dict(STATEFUL)
    c({"x": 1.0, "replica_loads": [1.0, 2.0]})
    before = c.state_dict()
    twin = copy.deepcopy(c)
    for v in (2.0, 5.0, -1.0):
        twin({"x": v, "replica_loads": [v, 2.0]})
    twin.shaper.set_weight("value", 3.0)
    assert c.state_dict() == before and c.step == 1
    assert c.shaper.weight("value", 0) == 1.0
    # and the copy goes on exactly like the original would have
    again = copy.deepcopy(c)
    assert c({"x": 4.0, "replica_loads": [1.0, 3.0]}).as_dict() == again({"x": 4.0, "replica_loads": [1.0, 3.0]}).as_dict()


def test_pickle_round_trips_a_composer_with_its_state():
    c = RewardComposer.from_dict(STATEFUL)
    for v in (1.0, 2.0, 0.5):
        c({"x": np.array([v, v + 1]), "replica_loads": np.ones((2, 3)) * v})
    c.shaper.set_weight("delta", {"schedule": "linear", "start": 1.0, "end": 0.0, "steps": 10})
    restored = pickle.loads(pickle.dumps(c))
    assert restored.state_dict() == c.state_dict()
    ctx = {"x": np.array([3.0, 1.0]), "replica_loads": np.arange(6.0).reshape(2, 3)}
    a, b = c(ctx), restored(ctx)
    for key, value in a.as_dict().items():
        np.testing.assert_array_equal(value, b.as_dict()[key])
    assert "delta_weight" in restored.generated_code()


def test_one_composer_cannot_serve_two_single_env_wrappers():
    gym = pytest.importorskip("gymnasium")
    from rewardkit.gym import ComposedReward

    c = RewardComposer.from_dict({"version": 1, "components": {
        "shaping": {"type": "potential_shaping", "inputs": {"potential": "phi"}}}})

    def ctx(t):
        return {"phi": float(t.obs[0])}

    first = ComposedReward(gym.make("CartPole-v1"), c, ctx)
    with pytest.raises(ValueError, match="cannot serve a second environment.*copy.deepcopy"):
        ComposedReward(gym.make("CartPole-v1"), c, ctx)
    ComposedReward(gym.make("CartPole-v1"), copy.deepcopy(c), ctx)  # a copy is fine
    assert first.composer is c


def test_errors_are_rewardkit_errors():
    assert issubclass(InvalidInputError, RewardKitError) and issubclass(InvalidInputError, ValueError)
