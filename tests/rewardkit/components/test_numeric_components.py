"""Unit tests of the built-in reward components: hand-computed values, edge cases, param errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardkit.components as components
from rewardkit.base import BaseReward
from rewardkit.components import (
    EmaDelta,
    InfoValue,
    Linear,
    LittlesLawLatency,
    LoadImbalance,
    LogisticLatency,
    PotentialShaping,
    ThresholdPenalty,
)
from rewardkit.components._numeric import FLOAT_MAX
from rewardkit.errors import ConfigError
from rewardkit.registry import get_component_class, registered

# Overflow in a component must be handled, not merely warned about.
pytestmark = pytest.mark.filterwarnings("error")

NEW_COMPONENTS = {
    "logistic_latency": LogisticLatency,
    "threshold_penalty": ThresholdPenalty,
    "ema_delta": EmaDelta,
    "load_imbalance": LoadImbalance,
    "linear": Linear,
    "info_value": InfoValue,
    "potential_shaping": PotentialShaping,
    "littles_law_latency": LittlesLawLatency,
}

#: Parameters that make each component constructible (required ones filled in).
MINIMAL_PARAMS = {
    "logistic_latency": {"threshold": 1.0},
    "threshold_penalty": {"threshold": 1.0},
    "ema_delta": {"signal": "throughput"},
    "load_imbalance": {},
    "linear": {},
    "info_value": {"key": "queue_len"},
    "potential_shaping": {},
    "littles_law_latency": {},
}


def flags(n: int, true_at: tuple[int, ...] = ()) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[list(true_at)] = True
    return out


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def run(comp: BaseReward, n: int | None = None, terminated=None, truncated=None, **inputs: np.ndarray) -> np.ndarray:
    n = n if n is not None else len(next(iter(inputs.values())))
    term = flags(n) if terminated is None else terminated
    trunc = flags(n) if truncated is None else truncated
    out = comp.compute(inputs, term, trunc)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (n,)
    return out


# ---- registration and metadata ------------------------------------------------------------


@pytest.mark.parametrize("name, cls", sorted(NEW_COMPONENTS.items()))
def test_registered_exported_and_documented(name: str, cls: type[BaseReward]) -> None:
    assert name in registered()
    assert get_component_class(name) is cls
    assert cls.type_name == name
    assert cls.__name__ in components.__all__
    summary = cls.describe()
    assert summary and "\n" not in summary
    assert "in " in summary or "range" in summary  # the one-liner states the range
    low, high = cls.output_range
    assert low <= high
    assert set(cls.monotone) <= set(cls.inputs)
    assert set(cls.monotone.values()) <= {"increasing", "decreasing"}


@pytest.mark.parametrize("name", sorted(NEW_COMPONENTS))
def test_to_dict_rebuilds_same_config(name: str) -> None:
    cls = NEW_COMPONENTS[name]
    comp = cls(name="x", **MINIMAL_PARAMS[name])
    spec = comp.to_dict()
    assert spec["type"] == name
    json.dumps(spec)  # plain data
    again = cls(name="x", **spec["params"])
    assert again.config == comp.config
    assert again.input_keys == comp.input_keys


def test_stateful_flags() -> None:
    stateful = {name for name, cls in NEW_COMPONENTS.items() if cls.stateful}
    assert stateful == {"ema_delta", "potential_shaping"}


# ---- logistic_latency --------------------------------------------------------------------


def test_logistic_latency_values() -> None:
    comp = LogisticLatency(name="x", threshold=2.0, sigma=0.5)
    out = run(comp, latency=arr(2.0, 2.5, 1.0))
    np.testing.assert_allclose(out, [0.5, 1 / (1 + math.exp(-1)), 1 / (1 + math.exp(2))], rtol=1e-15)


def test_logistic_latency_extreme_inputs_stay_finite_and_in_range() -> None:
    comp = LogisticLatency(name="x", threshold=-1e300, sigma=1e-300)
    out = run(comp, latency=arr(1e300, -1e300, FLOAT_MAX, -FLOAT_MAX))
    assert np.all(np.isfinite(out))
    assert out[0] == 1.0 and out[2] == 1.0
    assert out[1] == 0.5  # exactly at the threshold
    assert 0.0 < out[3] < 1e-300


# ---- threshold_penalty -------------------------------------------------------------------


def test_threshold_penalty_values() -> None:
    comp = ThresholdPenalty(name="x", threshold=1.0, slope=2.0)
    np.testing.assert_array_equal(run(comp, latency=arr(0.5, 1.0, 1.75, -3.0)), [0.0, 0.0, 1.5, 0.0])


def test_threshold_penalty_default_slope_and_zero_slope() -> None:
    assert run(ThresholdPenalty(name="x", threshold=0.0), latency=arr(3.0))[0] == 3.0
    zero = ThresholdPenalty(name="x", threshold=-FLOAT_MAX, slope=0.0)
    np.testing.assert_array_equal(run(zero, latency=arr(FLOAT_MAX, 0.0)), [0.0, 0.0])


def test_threshold_penalty_saturates_instead_of_overflowing() -> None:
    comp = ThresholdPenalty(name="x", threshold=-1e300, slope=1e10)
    assert run(comp, latency=arr(1e300))[0] == FLOAT_MAX


# ---- ema_delta ---------------------------------------------------------------------------


def test_ema_delta_reads_the_key_named_by_signal() -> None:
    comp = EmaDelta(name="x", signal="throughput")
    assert comp.input_keys == {"signal": "throughput"}
    assert EmaDelta(name="x", signal="throughput", inputs={"signal": "tp"}).input_keys == {"signal": "tp"}
    with pytest.raises(ConfigError, match="unknown input 'throughput'"):
        EmaDelta(name="x", signal="throughput", inputs={"throughput": "tp"})


def test_ema_delta_hand_computed_sequence() -> None:
    comp = EmaDelta(name="x", signal="s", ema_alpha=0.5)
    outs = [run(comp, signal=arr(v))[0] for v in (1.0, 3.0, 2.0, 4.0, 1.0)]
    # 1: first step -> 0, mean=1, var=0
    # 3: var == 0 -> 0 (zero-variance rule); then mean=2, var=0.5*0+0.5*2**2=2
    # 2: d=0 -> 0; then mean=2, var=0.5*2=1
    # 4: d=2 -> 2/(1+eps); then mean=3, var=0.5*1+0.5*4=2.5
    # 1: d=-2 -> -2/(sqrt(2.5)+eps)
    assert outs[:3] == [0.0, 0.0, 0.0]
    assert outs[3] == pytest.approx(2.0 / (1.0 + 1e-8), rel=1e-15)
    assert outs[4] == pytest.approx(-2.0 / (math.sqrt(2.5) + 1e-8), rel=1e-15)
    assert comp.state_dict() == {"mean": [2.0], "var": [3.25], "started": [1.0]}


def test_ema_delta_constant_signal_gives_zero_not_a_spike() -> None:
    comp = EmaDelta(name="x", signal="s", eps=1e-6)
    outs = [run(comp, signal=arr(5.0, -2.0))[:] for _ in range(20)]
    np.testing.assert_array_equal(np.array(outs), 0.0)
    # Variance below eps**2 still counts as zero: a jump after tiny jitter gives no spike.
    jitter = EmaDelta(name="x", signal="s", ema_alpha=1.0, eps=1e-3)
    run(jitter, signal=arr(0.0))
    run(jitter, signal=arr(1e-4))  # var becomes 1e-8 -> std 1e-4 <= eps
    assert run(jitter, signal=arr(100.0))[0] == 0.0


def test_ema_delta_reset_mask_restarts_only_masked_envs() -> None:
    comp = EmaDelta(name="x", signal="s", ema_alpha=0.5)
    for values in ((0.0, 0.0), (2.0, 2.0), (0.0, 0.0)):
        run(comp, signal=arr(*values))
    comp.reset(flags(2, (0,)))
    out = run(comp, signal=arr(10.0, 10.0))
    assert out[0] == 0.0  # first step of a new episode
    assert out[1] > 0.0
    assert comp.state_dict()["mean"][0] == 10.0 and comp.state_dict()["var"][0] == 0.0


def test_ema_delta_batch_size_change_needs_reset() -> None:
    comp = EmaDelta(name="x", signal="s")
    run(comp, signal=arr(1.0, 2.0))
    with pytest.raises(ValueError, match="batch size changed from 2 to 3"):
        run(comp, signal=arr(1.0, 2.0, 3.0))
    comp.reset()
    np.testing.assert_array_equal(run(comp, signal=arr(1.0, 2.0, 3.0)), 0.0)


def test_ema_delta_extreme_values_keep_output_and_state_finite() -> None:
    comp = EmaDelta(name="x", signal="s", ema_alpha=0.3)
    for v in (FLOAT_MAX, -FLOAT_MAX, FLOAT_MAX, 1.0, -FLOAT_MAX):
        out = run(comp, signal=arr(v))
        assert np.all(np.isfinite(out))
        state = comp.state_dict()
        assert all(math.isfinite(s) for values in state.values() for s in values)


def test_ema_delta_mean_is_a_convex_combination_even_at_the_float_limits() -> None:
    comp = EmaDelta(name="x", signal="s", ema_alpha=1.0)
    run(comp, signal=arr(-FLOAT_MAX))
    assert run(comp, signal=arr(FLOAT_MAX))[0] == 0.0  # var was 0
    assert comp.state_dict() == {"mean": [FLOAT_MAX], "var": [FLOAT_MAX], "started": [1.0]}


# ---- load_imbalance ----------------------------------------------------------------------


LOADS = np.array([[1.0, 2.0, 3.0, 6.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0], [6.0, 3.0, 1.0, 2.0]])


@pytest.mark.parametrize(
    "statistic, first",
    [
        ("var", 3.5),  # deviations from mean 3: -2, -1, 0, 3 -> (4+1+0+9)/4
        ("std", math.sqrt(3.5)),
        ("cv", math.sqrt(3.5) / 3.0),
        ("range", 5.0),
        ("max_over_mean", 1.0),  # 6/3 - 1
    ],
)
def test_load_imbalance_statistics(statistic: str, first: float) -> None:
    comp = LoadImbalance(name="x", statistic=statistic)
    out = run(comp, replica_loads=LOADS)
    assert out[0] == pytest.approx(first, rel=1e-14)
    assert out[1] == 0.0 and out[2] == 0.0  # equal loads, including all-zero (mean 0)
    assert out[3] == out[0]  # replica order does not matter


def test_load_imbalance_default_is_std_and_single_replica_is_balanced() -> None:
    comp = LoadImbalance(name="x")
    assert comp.statistic == "std"
    np.testing.assert_array_equal(run(comp, replica_loads=np.array([[7.0], [0.0]])), [0.0, 0.0])


def test_load_imbalance_negative_loads() -> None:
    loads = np.array([[-1.0, 1.0]])
    assert run(LoadImbalance(name="x", statistic="std"), replica_loads=loads)[0] == 1.0
    assert run(LoadImbalance(name="x", statistic="var"), replica_loads=loads)[0] == 1.0
    assert run(LoadImbalance(name="x", statistic="range"), replica_loads=loads)[0] == 2.0
    for statistic in ("cv", "max_over_mean"):
        with pytest.raises(ValueError, match=f"lb .load_imbalance.: statistic '{statistic}' needs non-negative"):
            run(LoadImbalance(name="lb", statistic=statistic), replica_loads=loads)


def test_load_imbalance_no_replicas_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        run(LoadImbalance(name="x"), replica_loads=np.zeros((2, 0)))


def test_load_imbalance_huge_loads_saturate() -> None:
    loads = np.array([[0.0, 1e300], [-FLOAT_MAX, FLOAT_MAX]])
    assert run(LoadImbalance(name="x", statistic="std"), replica_loads=loads)[0] == pytest.approx(5e299, rel=1e-14)
    np.testing.assert_array_equal(run(LoadImbalance(name="x", statistic="var"), replica_loads=loads), FLOAT_MAX)
    assert run(LoadImbalance(name="x", statistic="range"), replica_loads=loads)[1] == FLOAT_MAX
    assert run(LoadImbalance(name="x", statistic="cv"), replica_loads=loads[:1])[0] == pytest.approx(1.0)


# ---- linear ------------------------------------------------------------------------------


def test_linear_default_is_identity() -> None:
    comp = Linear(name="x")
    np.testing.assert_array_equal(run(comp, value=arr(-2.5, 0.0, 7.0)), [-2.5, 0.0, 7.0])
    assert comp.monotone == {"value": "increasing"}
    assert comp.output_range == (-math.inf, math.inf)


def test_linear_negative_scale_with_half_open_clip() -> None:
    comp = Linear(name="x", scale=-2.0, clip=[-3.0, None])
    np.testing.assert_array_equal(run(comp, value=arr(1.0, 2.0, 0.5, -4.0)), [-2.0, -3.0, -1.0, 8.0])
    assert comp.monotone == {"value": "decreasing"}
    assert comp.output_range == (-3.0, math.inf)
    assert comp.to_dict()["params"]["clip"] == [-3.0, None]


def test_linear_saturates() -> None:
    np.testing.assert_array_equal(run(Linear(name="x", scale=10.0), value=arr(1e308, -1e308)), [FLOAT_MAX, -FLOAT_MAX])


# ---- info_value --------------------------------------------------------------------------


def test_info_value_passes_value_through() -> None:
    comp = InfoValue(name="x", key="queue_len")
    assert comp.input_keys == {"value": "queue_len"}
    assert "value" in comp.optional_inputs
    ctx_value = arr(3.0, -1.5)
    out = run(comp, value=ctx_value)
    np.testing.assert_array_equal(out, ctx_value)
    out[0] = 99.0
    assert ctx_value[0] == 3.0  # the result is a copy


def test_info_value_missing_key_gives_default_for_every_env() -> None:
    comp = InfoValue(name="x", key="queue_len", default=-1.0)
    np.testing.assert_array_equal(run(comp, n=3), [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(run(InfoValue(name="x", key="k"), n=1), [0.0])


# ---- potential_shaping -------------------------------------------------------------------


def test_potential_shaping_hand_computed() -> None:
    comp = PotentialShaping(name="x", gamma=0.9)
    assert run(comp, potential=arr(1.0))[0] == 0.0  # records phi(s0)
    assert run(comp, potential=arr(2.0))[0] == pytest.approx(0.9 * 2.0 - 1.0)
    assert run(comp, potential=arr(4.0))[0] == pytest.approx(0.9 * 4.0 - 2.0)


def test_potential_shaping_terminal_and_truncated_steps() -> None:
    comp = PotentialShaping(name="x", gamma=0.9)
    run(comp, potential=arr(1.0, 1.0, 1.0))
    run(comp, potential=arr(2.0, 2.0, 2.0))
    term, trunc = flags(3, (0,)), flags(3, (1,))
    out = run(comp, terminated=term, truncated=trunc, potential=arr(4.0, 4.0, 4.0))
    np.testing.assert_allclose(out, [-2.0, 0.9 * 4.0 - 2.0, 0.9 * 4.0 - 2.0])
    comp.reset(term | trunc)  # what the composer does after compute
    out = run(comp, potential=arr(5.0, 5.0, 5.0))
    np.testing.assert_allclose(out, [0.0, 0.0, 0.9 * 5.0 - 4.0])


def test_potential_shaping_default_gamma() -> None:
    assert PotentialShaping(name="x").gamma == 0.99


# ---- littles_law_latency -----------------------------------------------------------------


def test_littles_law_latency_values() -> None:
    comp = LittlesLawLatency(name="x")
    np.testing.assert_array_equal(run(comp, in_system=arr(3.0, 0.0, 2.0), dt=arr(0.5, 2.0, 0.0)), [1.5, 0.0, 0.0])
    assert run(comp, in_system=arr(1e300), dt=arr(1e300))[0] == FLOAT_MAX


@pytest.mark.parametrize("bad", ["in_system", "dt"])
def test_littles_law_latency_rejects_negative_inputs(bad: str) -> None:
    comp = LittlesLawLatency(name="ll", inputs={"dt": "sim_dt"})
    inputs = {"in_system": arr(1.0, 2.0), "dt": arr(1.0, 1.0)}
    inputs[bad] = arr(1.0, -0.5)
    key = "sim_dt" if bad == "dt" else "in_system"
    expected = rf"ll \(littles_law_latency\): input '{bad}' \(context key '{key}'\) must be non-negative, got -0.5"
    with pytest.raises(ValueError, match=expected):
        comp.compute(inputs, flags(2), flags(2))


# ---- parameter validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, params, path, message",
    [
        (LogisticLatency, {"threshold": 1.0, "sigma": -1}, "params.sigma", "expected a positive number, got -1"),
        (LogisticLatency, {"threshold": 1.0, "sigma": 0}, "params.sigma", "expected a positive number, got 0"),
        (LogisticLatency, {}, "params.threshold", "missing required parameter (a finite number)"),
        (LogisticLatency, {"threshold": "high"}, "params.threshold", "expected a finite number, got 'high'"),
        (LogisticLatency, {"threshold": float("nan")}, "params.threshold", "expected a finite number, got nan"),
        (ThresholdPenalty, {"threshold": 1.0, "slope": -0.5}, "params.slope", "expected a non-negative number, got -0.5"),
        (ThresholdPenalty, {"threshold": True}, "params.threshold", "expected a finite number, got True"),
        (EmaDelta, {}, "params.signal", "missing required parameter (a non-empty string)"),
        (EmaDelta, {"signal": ""}, "params.signal", "expected a non-empty string, got ''"),
        (EmaDelta, {"signal": "s", "ema_alpha": 0}, "params.ema_alpha", "expected a number in (0, 1], got 0"),
        (EmaDelta, {"signal": "s", "ema_alpha": 1.5}, "params.ema_alpha", "expected a number in (0, 1], got 1.5"),
        (EmaDelta, {"signal": "s", "eps": 0.0}, "params.eps", "expected a positive number, got 0.0"),
        (LoadImbalance, {"statistic": "mad"}, "params.statistic",
         "expected one of 'var', 'std', 'cv', 'range', 'max_over_mean', got 'mad'"),
        (Linear, {"scale": "2"}, "params.scale", "expected a finite number, got '2'"),
        (Linear, {"clip": [2.0, 1.0]}, "params.clip", "expected a list [low, high] with low < high, got [2.0, 1.0]"),
        (Linear, {"clip": 3.0}, "params.clip", "expected a list [low, high] or null, got 3.0"),
        (InfoValue, {}, "params.key", "missing required parameter (a non-empty string)"),
        (InfoValue, {"key": "k", "default": None}, "params.default", "expected a finite number, got None"),
        (PotentialShaping, {"gamma": 0.0}, "params.gamma", "expected a number in (0, 1], got 0.0"),
        (PotentialShaping, {"gamma": 1.01}, "params.gamma", "expected a number in (0, 1], got 1.01"),
        (LittlesLawLatency, {"scale": 2.0}, "params", "unknown parameter 'scale'; expected one of: none"),
        (LoadImbalance, {"stat": "var"}, "params",
         "unknown parameter 'stat' (did you mean 'statistic'?); expected one of: statistic"),
    ],
)
def test_bad_params_raise_located_config_error(cls: type[BaseReward], params: dict, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        cls(name="x", **params)
    assert info.value.path == path
    assert str(info.value) == f"{path}: {message}"


# ---- inside a composer -------------------------------------------------------------------


ALL_TERMS = {
    "logistic": {"type": "logistic_latency", "params": {"threshold": 5.0, "sigma": 2.0}},
    "hinge": {"type": "threshold_penalty", "params": {"threshold": 5.0}},
    "tp_delta": {"type": "ema_delta", "params": {"signal": "throughput", "ema_alpha": 0.5}},
    "balance": {"type": "load_imbalance", "params": {"statistic": "cv"}},
    "lin": {"type": "linear", "params": {"scale": -1.0, "clip": [-10.0, None]}, "inputs": {"value": "latency"}},
    "queue": {"type": "info_value", "params": {"key": "queue_len", "default": 7.0}},
    "shaping": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "throughput"}},
    "little": {"type": "littles_law_latency"},
}


@pytest.fixture
def vidur_context():
    """Factory of random Vidur-like contexts with a leading environment axis of ``n_envs``."""

    def make(rng: np.random.Generator, n_envs: int) -> dict:
        return {
            "throughput": rng.uniform(0.0, 0.2, n_envs),
            "latency": rng.uniform(0.0, 12.0, n_envs),
            "replica_loads": rng.integers(0, 20, size=(n_envs, 3)).astype(float),
            "in_system": rng.integers(0, 50, n_envs).astype(float),
            "dt": rng.uniform(0.0, 1.0, n_envs),
        }

    return make


def test_new_components_in_a_composer_batched_equals_scalar(vidur_context) -> None:
    """Every new component through the composer: the batched path equals one scalar composer per env."""
    from rewardkit import RewardComposer

    config = {"version": 1, "components": {name: {**spec, "weight": 1.0} for name, spec in ALL_TERMS.items()}}
    batched = RewardComposer.from_dict(config)
    singles = [RewardComposer.from_dict(config) for _ in range(2)]
    assert batched.required_context_keys() == {"latency", "throughput", "replica_loads", "in_system", "dt"}
    assert "queue_len" in batched.context_keys()
    rng = np.random.default_rng(0)
    ended = flags(2, (1,))
    for step in range(6):
        ctx = vidur_context(rng, 2)
        out = batched(ctx, terminated=ended if step == 2 else flags(2))
        for i, single in enumerate(singles):
            one = single({k: (v[i] if k == "replica_loads" else float(v[i])) for k, v in ctx.items()},
                         terminated=bool(ended[i]) if step == 2 else False)
            for name in ALL_TERMS:
                assert one.terms[name].raw == pytest.approx(out.terms[name].raw[i], rel=1e-12, abs=1e-300)
        np.testing.assert_array_equal(out.terms["queue"].raw, [7.0, 7.0])  # key absent -> default
        if step == 0:
            np.testing.assert_array_equal(out.terms["tp_delta"].raw, 0.0)
            np.testing.assert_array_equal(out.terms["shaping"].raw, 0.0)
        if step == 3:  # env 1 restarted after step 2
            assert out.terms["tp_delta"].raw[1] == 0.0 and out.terms["shaping"].raw[1] == 0.0
            assert out.terms["shaping"].raw[0] != 0.0


# ---- inlined scalar expressions -------------------------------------------------------------

INLINE_CASES = {
    "throughput_sigmoid": {"target": 0.05, "scale": 0.05},
    "logistic_latency": {"threshold": 6.0, "sigma": 2.0},
    "threshold_penalty": {"threshold": 6.0, "slope": 0.5},
    "threshold_penalty/negative_threshold_steep": {"threshold": -1e308, "slope": 3.0},
    "threshold_penalty/zero_slope": {"threshold": -5.0, "slope": 0.0},
    "linear": {"scale": -2.0, "clip": [-3.0, None]},
    "info_value": {"key": "q", "default": 4.0},
}


@pytest.mark.parametrize("case", sorted(INLINE_CASES))
@settings(max_examples=60, deadline=None)
@given(value=st.floats(-1.7e308, 1.7e308, allow_nan=False) | st.sampled_from([0.0, 6.0, 0.05, -1e308, 1e308]))
def test_inlined_scalar_source_equals_scalar_fn(case: str, value: float) -> None:
    """The expression the composer inlines computes exactly what scalar_fn computes."""
    from rewardkit.registry import get_component_class

    comp = get_component_class(case.split("/")[0])(name="x", **INLINE_CASES[case])
    env: dict = {}
    source = comp.scalar_source(["v"], env, "_t")
    assert source is not None
    inlined = eval(f"lambda v: {source}", env)  # noqa: S307 - our own generated expression
    assert inlined(value) == comp.scalar_fn()(value, False, False)
    if case == "info_value":
        assert inlined(None) == comp.scalar_fn()(None, False, False) == 4.0


@pytest.mark.parametrize("statistic", ["var", "std", "cv", "range", "max_over_mean"])
@settings(max_examples=60, deadline=None)
@given(loads=st.lists(st.floats(0.0, 1e200) | st.sampled_from([0.0, 1.0, 3.0]), min_size=1, max_size=20))
def test_inlined_blocks_equal_scalar_fn(statistic: str, loads: list) -> None:
    """Components inlined as statement blocks (load_imbalance, ema_delta) match their scalar_fn."""
    comp = LoadImbalance(name="x", statistic=statistic)
    env: dict = {}
    lines, result = comp.scalar_block(["v"], env, "_t")
    namespace: dict = {}
    body = "\n".join("    " + line for line in lines)
    exec(f"def f(v):\n    v_sum = sum(v)\n{body}\n    return {result}", env, namespace)  # noqa: S102 - generated here
    assert namespace["f"](list(loads)) == comp.scalar_fn()(list(loads), False, False)

    ema_block, ema_plain = EmaDelta(name="e", signal="s", ema_alpha=0.3), EmaDelta(name="e", signal="s", ema_alpha=0.3)
    env = {}
    lines, result = ema_block.scalar_block(["v"], env, "_u")
    namespace = {}
    body = "\n".join("    " + line for line in lines)
    exec(f"def g(v):\n{body}\n    return {result}", env, namespace)  # noqa: S102 - generated here
    plain = ema_plain.scalar_fn()
    assert [namespace["g"](v) for v in loads] == [plain(v, False, False) for v in loads]
