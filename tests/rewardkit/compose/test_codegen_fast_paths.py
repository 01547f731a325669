"""The fast paths give the same numbers: NumPy-specific batched code against the general
array-API code (run on a NumPy subclass, which takes it), bit for bit, and the compiled
single-environment function's shortcuts (inlined components, one finiteness test, flags read
only when used) against their contracts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.backend import evaluating
from rewardkit.errors import InvalidInputError, NonFiniteInputError
from rewardkit.registry import get_component_class, registered


class General(np.ndarray):
    """A NumPy array that is not exactly ``np.ndarray``: components take their general path."""


def general(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(General)


def same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)), (a, b)


def both(component, inputs: dict, flags: np.ndarray) -> None:
    """``compute_fast`` (what the composer calls, where a component has one) on plain arrays against
    ``compute`` on the subclass, in a composer call and outside one."""
    fast_fn = getattr(component, "compute_fast", component.compute)
    for inside in (True, False):
        fast_in = {k: v.copy() for k, v in inputs.items()}
        slow_in = {k: general(v.copy()) for k, v in inputs.items()}
        if inside:
            with evaluating(True, next(iter(inputs.values())).dtype):
                fast, slow = fast_fn(fast_in, flags, flags), component.compute(slow_in, flags, flags)
        else:
            fast, slow = fast_fn(fast_in, flags, flags), component.compute(slow_in, flags, flags)
        same(fast, slow)
        for k, v in inputs.items():  # the inputs are never written
            same(fast_in[k], v)


EXTREME = [0.0, -0.0, 1e-320, -1e-320, 1.0, -3.5, 6.0, 1e10, -1e10, 1e200, -1e200, 1.7e308, -1.7e308, 710.0, -710.0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,params", [
    ("throughput_sigmoid", {"target": 0.05, "scale": 0.05}), ("throughput_sigmoid", {"target": -1e300, "scale": 1e-300}),
    ("logistic_latency", {"threshold": 6.0, "sigma": 2.0}), ("logistic_latency", {"threshold": 0.0, "sigma": 1e300}),
    ("threshold_penalty", {"threshold": 6.0, "slope": 1.0}), ("threshold_penalty", {"threshold": 0.0, "slope": 0.25}),
    ("threshold_penalty", {"threshold": -5.0, "slope": 3.0}),
])
def test_stateless_numpy_paths_match_the_general_path(name, params, dtype):
    rng = np.random.default_rng(1)
    component = get_component_class(name)(**params)
    key = next(iter(component.inputs))
    with np.errstate(over="ignore"):  # float32: the values beyond its range are left out
        values = np.concatenate([np.array(EXTREME), rng.normal(0, 10, 64)]).astype(dtype)
        values = values[np.isfinite(values)]
    both(component, {key: values}, np.zeros(len(values), bool))


@pytest.mark.parametrize("statistic", ["var", "std", "cv", "range", "max_over_mean"])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_load_imbalance_numpy_columns_match_the_general_path(statistic, replicas, dtype):
    rng = np.random.default_rng(replicas)
    rows = [rng.integers(0, 20, size=replicas).astype(float) for _ in range(40)]
    rows += [np.full(replicas, v) for v in (0.0, 3.0, 0.1 + 0.2, 1e-300, 1e160)]  # equal loads: exactly 0
    rows += [rng.uniform(0, 1, replicas) * 10.0 ** rng.integers(-300, 300) for _ in range(20)]
    if statistic in ("var", "std", "range"):  # any finite loads
        rows += [rng.normal(0, 1, replicas) * 10.0 ** rng.integers(-300, 308) for _ in range(20)]
    with np.errstate(over="ignore"):  # float32: the rows beyond its range are left out
        loads = np.array(rows).astype(dtype)
        loads = loads[np.isfinite(loads).all(axis=1)]
    component = get_component_class("load_imbalance")(statistic=statistic)
    both(component, {"replica_loads": loads}, np.zeros(len(loads), bool))


@pytest.mark.parametrize("statistic", ["cv", "max_over_mean"])
def test_load_imbalance_columns_refuse_negative_loads_alike(statistic):
    component = get_component_class("load_imbalance")(statistic=statistic)
    loads = np.array([[1.0, 2.0], [3.0, -0.5]])
    messages = []
    for given in (loads, general(loads)):
        with pytest.raises(ValueError, match="needs non-negative") as err:
            component.compute({"replica_loads": given}, np.zeros(2, bool), np.zeros(2, bool))
        messages.append(str(err.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("eps", [1e-8, 1e-30, 0.5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ema_delta_numpy_path_matches_the_general_path(eps, dtype):
    rng = np.random.default_rng(4)
    fast = get_component_class("ema_delta")(signal="x", ema_alpha=0.3, eps=eps)
    slow = get_component_class("ema_delta")(signal="x", ema_alpha=0.3, eps=eps)
    steps = [rng.normal(0, 1, 32) for _ in range(6)]
    steps += [rng.normal(0, 1, 32) * 10.0 ** rng.integers(-300, 308, size=32) for _ in range(6)]  # overflows
    steps += [np.full(32, v) for v in (1.7e308, -1.7e308, 0.0, 1e-320)]
    flags = np.zeros(32, bool)
    for values in steps:
        with np.errstate(over="ignore", invalid="ignore"):
            values = np.where(np.isfinite(values.astype(dtype)), values, 1.0).astype(dtype)
        with evaluating(True, values.dtype):
            same(fast.compute_fast({"signal": values.copy()}, flags, flags),
                 slow.compute({"signal": general(values)}, flags, flags))
        for key in ("mean", "var", "started"):
            same(fast._state.arrays[key], slow._state.arrays[key])


# ---- the compiled single-environment function ------------------------------------------------
#: parameters that make each built-in numeric component (a new one must be added here)
NUMERIC = {
    "info_value": {"key": "x"}, "linear": {}, "throughput_sigmoid": {"target": 0.05}, "logistic_latency": {"threshold": 6.0},
    "threshold_penalty": {"threshold": 6.0}, "ema_delta": {"signal": "x"}, "load_imbalance": {},
    "littles_law_latency": {}, "potential_shaping": {},
}


def numeric_built_ins() -> list[str]:
    names = []
    for name in registered():
        cls = get_component_class(name)
        if cls.__module__.startswith("rewardkit.components.") and not cls.text_inputs and not cls.asynchronous:
            names.append(name)
    return names


def test_every_built_in_numeric_component_is_inlined_in_the_single_environment_function():
    assert set(numeric_built_ins()) == set(NUMERIC), "a new built-in numeric component: add it to NUMERIC"
    for name, params in NUMERIC.items():
        composer = RewardComposer.from_dict({"version": 1, "components": {"t": {"type": name, "params": params}}})
        source = composer.plan.sources.single_env
        assert "_t_fn(" not in source and "_returned(" not in source, f"{name} is called, not inlined:\n{source}"


SIX = {"version": 1, "components": {
    f"c{i}": {"type": "info_value", "params": {"key": f"s{i}"},
              "weight": {"schedule": "linear", "start": 1.0, "end": 0.1 * (i + 1), "steps": 1000 + 100 * i}}
    for i in range(6)}}


def test_present_optional_inputs_and_several_numbers_cost_one_test_each_at_most():
    composer = RewardComposer.from_dict(SIX)
    present = composer.plan.sources.single_env  # reads every optional key as present
    body = present.split("# ---- stateless terms")[1]
    assert "is None" not in body  # info_value's absent-key fallback dropped where the key was read
    assert present.count(" - ctx_s") == 6 and "_inputs_sum - _inputs_sum" in present  # checked once, each only then
    assert "done = " not in present and "terminated = False" not in present  # flags nobody reads stay as given
    absent = composer.plan.sources.absent
    assert "is None" in absent.split("# ---- stateless terms")[1]
    ctx = {f"s{i}": float(i) for i in range(6)}
    assert composer(ctx).total == pytest.approx(15.0)
    assert composer({k: v for k, v in ctx.items() if k != "s3"}).total == pytest.approx(sum(
        composer.shaper.weight(f"c{i}", 1) * i for i in range(6) if i != 3))


@pytest.mark.parametrize("bad", [1, 3, 5])
def test_one_finiteness_test_still_names_the_first_bad_key(bad):
    composer = RewardComposer.from_dict(SIX)
    for value in (math.nan, math.inf, -math.inf):
        ctx = {f"s{i}": 1.0 for i in range(6)}
        ctx[f"s{bad}"] = value
        ctx[f"s{bad + 1 if bad < 5 else 0}"] = value if bad < 5 else 1.0
        with pytest.raises(NonFiniteInputError, match=f"'s{bad}'"):
            composer(ctx)
        assert composer.step == 0
    # inputs whose sum overflows, each finite (and a finite total once the ramps have ended)
    values = [1.7e308, 1.7e308, -1.7e308, -1.7e308, 0.0, 0.0]
    total = composer({f"s{i}": v for i, v in enumerate(values)}, step=5000).total
    flags = [np.zeros(1, bool)] * 3
    assert math.isfinite(total) and total == composer.plan.batched(*map(np.array, values), 5000, *flags, None)[0]


def test_unused_flags_are_still_checked():
    composer = RewardComposer.from_dict(SIX)
    with pytest.raises(InvalidInputError, match="terminated"):
        composer({f"s{i}": 1.0 for i in range(6)}, terminated="yes")
    with pytest.raises(InvalidInputError, match="truncated"):
        composer({f"s{i}": 1.0 for i in range(6)}, truncated=[True, False])
    assert composer.step == 0
    composer({f"s{i}": 1.0 for i in range(6)}, terminated=np.bool_(True), truncated=True)
    assert composer.step == 1


def test_inlined_stateful_and_checked_components_keep_their_behaviour():
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "p": {"type": "potential_shaping", "inputs": {"potential": "x"}, "params": {"gamma": 0.5}},
        "l": {"type": "littles_law_latency"}}})
    reference = RewardComposer.from_dict(composer.to_dict())
    steps = [({"x": 1.0, "in_system": 2.0, "dt": 0.5}, False), ({"x": 3.0, "in_system": 1.0, "dt": 2.0}, False),
             ({"x": 4.0, "in_system": 0.0, "dt": 1.0}, True), ({"x": 2.0, "in_system": 1e300, "dt": 1e300}, False)]
    for ctx, terminated in steps:  # the single-environment function against the batched one
        one = composer(ctx, terminated=terminated)
        batch = reference({k: np.array([v]) for k, v in ctx.items()}, terminated=np.array([terminated]))
        assert one.as_dict() == {k: float(np.asarray(v)[0]) for k, v in batch.as_dict().items()}
    saved = composer.state_dict()
    with pytest.raises(ValueError, match="must be non-negative"):
        composer({"x": 1.0, "in_system": -1.0, "dt": 1.0})
    assert composer.state_dict() == saved
