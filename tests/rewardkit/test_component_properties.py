"""Property tests of the built-in components: documented range and direction, finiteness,
vectorized == per-env loop, state round trips, load-balance invariances, PBRS telescoping and
Little's law."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    ThroughputSigmoid,
)

# A RuntimeWarning (overflow, invalid value) fails the test: components must handle extremes.
pytestmark = pytest.mark.filterwarnings("error")

FAST = settings(max_examples=40, deadline=None)

FINITE = st.floats(allow_nan=False, allow_infinity=False)  # the whole float64 range, subnormals too
NON_NEGATIVE = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
POSITIVE = st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False)
UNIT_OPEN_LOW = st.floats(min_value=0.0, max_value=1.0, exclude_min=True)
MODERATE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@st.composite
def clip_bounds(draw: st.DrawFn) -> list[float | None] | None:
    if draw(st.booleans()):
        return None
    low, high = sorted(draw(st.lists(FINITE, min_size=2, max_size=2, unique=True)))
    return [draw(st.sampled_from([low, None])), draw(st.sampled_from([high, None]))]


@dataclass(frozen=True)
class Case:
    """How to build a component and draw its inputs: params strategy, element strategy per input."""

    cls: type[BaseReward]
    params: st.SearchStrategy[dict[str, Any]]
    values: dict[str, st.SearchStrategy[float]]


CASES: dict[str, Case] = {
    "logistic_latency": Case(
        LogisticLatency, st.fixed_dictionaries({"threshold": FINITE, "sigma": POSITIVE}), {"latency": FINITE}
    ),
    "threshold_penalty": Case(
        ThresholdPenalty, st.fixed_dictionaries({"threshold": FINITE, "slope": NON_NEGATIVE}), {"latency": FINITE}
    ),
    "ema_delta": Case(
        EmaDelta,
        st.fixed_dictionaries({"signal": st.just("s"), "ema_alpha": UNIT_OPEN_LOW, "eps": POSITIVE}),
        {"signal": FINITE},
    ),
    "load_imbalance": Case(
        LoadImbalance,
        st.fixed_dictionaries({"statistic": st.sampled_from(["var", "std", "cv", "range", "max_over_mean"])}),
        {"replica_loads": NON_NEGATIVE},
    ),
    "linear": Case(Linear, st.fixed_dictionaries({"scale": FINITE, "clip": clip_bounds()}), {"value": FINITE}),
    "info_value": Case(InfoValue, st.fixed_dictionaries({"key": st.just("k"), "default": FINITE}), {"value": FINITE}),
    "potential_shaping": Case(
        PotentialShaping, st.fixed_dictionaries({"gamma": UNIT_OPEN_LOW}), {"potential": FINITE}
    ),
    "littles_law_latency": Case(
        LittlesLawLatency, st.just({}), {"in_system": NON_NEGATIVE, "dt": NON_NEGATIVE}
    ),
    # Moderate values only: its subtraction warns on overflow (result still correct); see report.
    "throughput_sigmoid": Case(
        ThroughputSigmoid,
        st.fixed_dictionaries({"target": MODERATE, "scale": st.floats(min_value=1e-6, max_value=1e6)}),
        {"throughput": MODERATE},
    ),
}
STATEFUL = sorted(name for name, case in CASES.items() if case.cls.stateful)
MONOTONE = sorted(name for name, case in CASES.items() if case.cls.monotone)


def draw_inputs(draw: st.DrawFn, case: Case, n_envs: int, n_replicas: int) -> dict[str, np.ndarray]:
    """One step's inputs, keyed by local input name, shaped (n_envs,) or (n_envs, n_replicas)."""
    out = {}
    for local, ndim in case.cls.inputs.items():
        shape = (n_envs,) if ndim == 0 else (n_envs, n_replicas)
        size = int(np.prod(shape))
        values = draw(st.lists(case.values[local], min_size=size, max_size=size))
        out[local] = np.array(values, dtype=np.float64).reshape(shape)
    return out


Step = tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]

#: Episode ends are rarer than continuations, so episodes span several steps.
END = st.sampled_from([False, False, False, True])


@st.composite
def episodes(draw: st.DrawFn, name: str, max_envs: int = 3, max_steps: int = 6) -> tuple[dict, list[Step]]:
    """Params and a sequence of (inputs, terminated, truncated) steps with episode ends mid-way."""
    case = CASES[name]
    params = draw(case.params)
    n_envs = draw(st.integers(1, max_envs))
    n_replicas = draw(st.integers(1, 5))
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        inputs = draw_inputs(draw, case, n_envs, n_replicas)
        if case.cls.optional_inputs and draw(st.booleans()):
            for local in case.cls.optional_inputs:
                del inputs[local]
        term = np.array(draw(st.lists(END, min_size=n_envs, max_size=n_envs)), dtype=bool)
        trunc = np.array(draw(st.lists(END, min_size=n_envs, max_size=n_envs)), dtype=bool)
        steps.append((inputs, term, trunc))
    return params, steps


def play(comp: BaseReward, steps: list[Step]) -> list[np.ndarray]:
    """Feed steps as the composer does: compute, then reset where an episode ended."""
    outs = []
    for inputs, term, trunc in steps:
        out = comp.compute(inputs, term, trunc)
        assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == term.shape
        outs.append(out)
        comp.reset(term | trunc)
    return outs


def env_slice(steps: list[Step], i: int) -> list[Step]:
    return [({k: v[i : i + 1] for k, v in inputs.items()}, term[i : i + 1], trunc[i : i + 1]) for inputs, term, trunc in steps]


# ---- every component: range, finiteness, vectorization -------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
@FAST
@given(data=st.data())
def test_outputs_finite_and_within_documented_range(name: str, data: st.DataObject) -> None:
    params, steps = data.draw(episodes(name))
    comp = CASES[name].cls(name="x", **params)
    low, high = comp.output_range  # instance value: linear narrows it to its clip bounds
    for out in play(comp, steps):
        assert np.all(np.isfinite(out)), out
        assert np.all((out >= low) & (out <= high)), (out, comp.output_range)


@pytest.mark.parametrize("name", sorted(CASES))
@FAST
@given(data=st.data())
def test_vectorized_equals_loop_of_single_env_instances(name: str, data: st.DataObject) -> None:
    params, steps = data.draw(episodes(name))
    cls = CASES[name].cls
    batched = np.array(play(cls(name="x", **params), steps))
    n_envs = len(steps[0][1])
    for i in range(n_envs):
        single = np.array(play(cls(name="x", **params), env_slice(steps, i)))
        np.testing.assert_array_equal(batched[:, i : i + 1], single)


def play_scalar(comp: BaseReward, steps: list[Step]) -> list[float]:
    """Feed one environment's steps through ``scalar_fn`` the way the compiled scalar path does:
    floats for scalar inputs, 1-D arrays for vector ones, None for an absent optional input, and a
    full reset after a step that ends the episode."""
    fn = comp.scalar_fn()
    outs = []
    for inputs, term, trunc in steps:
        args = []
        for local in comp.input_keys:
            value = inputs.get(local)
            args.append(None if value is None else (float(value[0]) if value.ndim == 1 else value[0]))
        out = fn(*args, bool(term[0]), bool(trunc[0]))
        assert isinstance(out, float)
        outs.append(out)
        if term[0] or trunc[0]:
            comp.reset(None)
    return outs


@pytest.mark.parametrize("name", sorted(CASES))
@FAST
@given(data=st.data())
def test_scalar_fn_agrees_with_compute(name: str, data: st.DataObject) -> None:
    params, steps = data.draw(episodes(name, max_envs=1))
    cls = CASES[name].cls
    batched = [float(out[0]) for out in play(cls(name="x", **params), steps)]
    # NumPy's vectorized exp may differ from libm's in the last bit: agree to rounding, not bits.
    assert play_scalar(cls(name="x", **params), steps) == pytest.approx(batched, rel=1e-12, abs=1e-300)


# ---- monotone direction ---------------------------------------------------------------------


@pytest.mark.parametrize("name", MONOTONE)
@FAST
@given(data=st.data())
def test_documented_monotone_direction(name: str, data: st.DataObject) -> None:
    """Raising one input, others and any history fixed, moves the output the documented way."""
    case = CASES[name]
    params, history = data.draw(episodes(name, max_steps=4))
    comp = case.cls(name="x", **params)
    play(comp, history)  # stateful components: compare from a non-trivial state
    n_envs = len(history[0][1])
    inputs = draw_inputs(data.draw, case, n_envs, n_replicas=1)
    term = np.array(data.draw(st.lists(END, min_size=n_envs, max_size=n_envs)), dtype=bool)
    trunc = np.zeros(n_envs, dtype=bool)
    assert comp.monotone  # instance value: linear's direction follows the sign of scale
    for local, direction in comp.monotone.items():
        other = draw_inputs(data.draw, case, n_envs, n_replicas=1)[local]
        low, high = np.minimum(inputs[local], other), np.maximum(inputs[local], other)
        out_low = copy.deepcopy(comp).compute({**inputs, local: low}, term, trunc)
        out_high = copy.deepcopy(comp).compute({**inputs, local: high}, term, trunc)
        if direction == "increasing":
            assert np.all(out_high >= out_low), (local, low, high, out_low, out_high)
        else:
            assert np.all(out_high <= out_low), (local, low, high, out_low, out_high)


@FAST
@given(scale=FINITE.filter(lambda s: s != 0), clip=clip_bounds())
def test_linear_direction_follows_sign_of_scale(scale: float, clip: list | None) -> None:
    comp = Linear(name="x", scale=scale, clip=clip)
    assert comp.monotone == {"value": "increasing" if scale > 0 else "decreasing"}


# ---- stateful components: state round trip --------------------------------------------------


@pytest.mark.parametrize("name", STATEFUL)
@FAST
@given(data=st.data())
def test_state_dict_json_round_trip_gives_identical_later_outputs(name: str, data: st.DataObject) -> None:
    params, steps = data.draw(episodes(name, max_steps=8))
    cut = data.draw(st.integers(0, len(steps)))
    cls = CASES[name].cls
    original = cls(name="x", **params)
    play(original, steps[:cut])
    restored = cls(name="x", **params)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict(), allow_nan=False)))
    expected = play(original, steps[cut:])
    got = play(restored, steps[cut:])
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", STATEFUL)
@FAST
@given(data=st.data())
def test_full_reset_restarts_like_a_fresh_instance(name: str, data: st.DataObject) -> None:
    params, steps = data.draw(episodes(name, max_steps=4))
    _, later = data.draw(episodes(name, max_steps=4))
    cls = CASES[name].cls
    used = cls(name="x", **params)
    play(used, steps)
    used.reset()  # may also change the number of environments
    for a, b in zip(play(used, later), play(cls(name="x", **params), later)):
        np.testing.assert_array_equal(a, b)


@FAST
@given(params_steps=episodes("ema_delta", max_steps=8))
def test_ema_delta_is_zero_on_first_step_of_every_episode(params_steps: tuple[dict, list[Step]]) -> None:
    params, steps = params_steps
    comp = EmaDelta(name="x", **params)
    starting = np.ones(len(steps[0][1]), dtype=bool)
    for out, (_, term, trunc) in zip(play(comp, steps), steps):
        assert np.all(out[starting] == 0.0)
        starting = term | trunc


def ema_delta_reference(values: list[float], alpha: float, eps: float) -> list[float]:
    """The documented recurrence, one environment, one episode, in plain Python."""
    out, mean, var = [], values[0], 0.0
    out.append(0.0)
    for x in values[1:]:
        d = x - mean
        out.append(d / (math.sqrt(var) + eps) if math.sqrt(var) > eps else 0.0)
        mean, var = (1 - alpha) * mean + alpha * x, (1 - alpha) * var + alpha * d * d
    return out


@FAST
@given(
    values=st.lists(MODERATE, min_size=1, max_size=12),
    alpha=UNIT_OPEN_LOW,
    eps=st.floats(1e-9, 1e-3),
)
def test_ema_delta_matches_documented_recurrence(values: list[float], alpha: float, eps: float) -> None:
    comp = EmaDelta(name="x", signal="s", ema_alpha=alpha, eps=eps)
    no = np.zeros(1, dtype=bool)
    got = [comp.compute({"signal": np.array([v])}, no, no)[0] for v in values]
    assert got == pytest.approx(ema_delta_reference(values, alpha, eps), rel=1e-9, abs=1e-12)


# ---- load_imbalance -------------------------------------------------------------------------


STATISTIC = st.sampled_from(["var", "std", "cv", "range", "max_over_mean"])
LOAD_ROWS = st.lists(NON_NEGATIVE, min_size=1, max_size=8)


@FAST
@given(statistic=STATISTIC, loads=LOAD_ROWS, data=st.data())
def test_load_imbalance_invariant_to_permutation_of_replicas(statistic: str, loads: list[float], data: st.DataObject) -> None:
    comp = LoadImbalance(name="x", statistic=statistic)
    permuted = data.draw(st.permutations(loads))
    batch = np.array([loads, permuted])
    out = comp.compute({"replica_loads": batch}, np.zeros(2, bool), np.zeros(2, bool))
    # the order of summation may move the last bit; nothing more
    assert out[0] == pytest.approx(out[1], rel=1e-12, abs=0.0)


@FAST
@given(statistic=STATISTIC, load=NON_NEGATIVE, n_replicas=st.integers(1, 8))
def test_load_imbalance_zero_on_equal_loads(statistic: str, load: float, n_replicas: int) -> None:
    comp = LoadImbalance(name="x", statistic=statistic)
    out = comp.compute({"replica_loads": np.full((1, n_replicas), load)}, np.zeros(1, bool), np.zeros(1, bool))
    assert out[0] == 0.0


@FAST
@given(statistic=STATISTIC, loads=st.lists(st.just(0.0) | st.floats(1e-6, 1e6), min_size=2, max_size=8, unique=True))
def test_load_imbalance_positive_on_unequal_loads(statistic: str, loads: list[float]) -> None:
    comp = LoadImbalance(name="x", statistic=statistic)
    out = comp.compute({"replica_loads": np.array([loads])}, np.zeros(1, bool), np.zeros(1, bool))
    assert out[0] > 0.0


@FAST
@given(
    statistic=st.sampled_from(["var", "std", "range"]),
    loads=st.lists(FINITE, min_size=1, max_size=8),
)
def test_load_imbalance_signed_statistics_accept_any_finite_loads(statistic: str, loads: list[float]) -> None:
    comp = LoadImbalance(name="x", statistic=statistic)
    out = comp.compute({"replica_loads": np.array([loads])}, np.zeros(1, bool), np.zeros(1, bool))
    assert np.isfinite(out[0]) and out[0] >= 0.0


@FAST
@given(statistic=STATISTIC, loads=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=8), factor=st.floats(1e-3, 1e3))
def test_load_imbalance_matches_numpy_reference(statistic: str, loads: list[float], factor: float) -> None:
    row = np.array(loads)
    mean, std = row.mean(), row.std()
    reference = {
        "var": row.var(),
        "std": std,
        "cv": std / mean if mean > 0 else 0.0,
        "range": row.max() - row.min(),
        "max_over_mean": row.max() / mean - 1.0 if mean > 0 else 0.0,
    }[statistic]
    comp = LoadImbalance(name="x", statistic=statistic)
    out = comp.compute({"replica_loads": row[None, :]}, np.zeros(1, bool), np.zeros(1, bool))
    assert out[0] == pytest.approx(reference, rel=1e-9, abs=1e-9 * max(1.0, reference))
    # cv and max_over_mean do not depend on the unit the loads are measured in
    if statistic in ("cv", "max_over_mean"):
        scaled = comp.compute({"replica_loads": factor * row[None, :]}, np.zeros(1, bool), np.zeros(1, bool))
        assert scaled[0] == pytest.approx(out[0], rel=1e-9, abs=1e-12)


# ---- potential_shaping: telescoping ---------------------------------------------------------


@FAST
@given(
    gamma=UNIT_OPEN_LOW,
    potentials=st.lists(MODERATE, min_size=2, max_size=12),
    ending=st.sampled_from(["none", "terminated", "truncated"]),
)
def test_potential_shaping_telescopes(gamma: float, potentials: list[float], ending: str) -> None:
    """sum_t gamma**(t-1) F_t == gamma**T phi(s_T) - phi(s_0), or -phi(s_0) if terminated."""
    comp = PotentialShaping(name="x", gamma=gamma)
    no = np.zeros(1, dtype=bool)
    first = comp.compute({"potential": np.array([potentials[0]])}, no, no)
    assert first[0] == 0.0
    transitions = potentials[1:]
    total = 0.0
    for t, phi in enumerate(transitions, start=1):
        last = t == len(transitions)
        term = np.array([last and ending == "terminated"])
        trunc = np.array([last and ending == "truncated"])
        total += gamma ** (t - 1) * comp.compute({"potential": np.array([phi])}, term, trunc)[0]
    T = len(transitions)
    expected = -potentials[0] if ending == "terminated" else gamma**T * potentials[-1] - potentials[0]
    scale = max(1.0, *map(abs, potentials))
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-9 * scale * T)


# ---- littles_law_latency: Little's law on a simulated queue ---------------------------------


@FAST
@given(
    gaps=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=15),
    sojourns_seed=st.lists(st.floats(1e-3, 20.0), min_size=15, max_size=15),
    decision_times=st.lists(st.floats(0.0, 400.0), max_size=10),
)
def test_littles_law_sum_equals_total_time_in_system(
    gaps: list[float], sojourns_seed: list[float], decision_times: list[float]
) -> None:
    """Integrating in_system*dt between decisions gives the sum of per-request sojourn times."""
    arrivals = np.cumsum(gaps)
    sojourns = np.array(sojourns_seed[: len(arrivals)])
    departures = arrivals + sojourns
    end = float(departures.max())
    # Decisions at every arrival and departure, plus a few at arbitrary times in between.
    times = np.unique(np.concatenate([[0.0], arrivals, departures, [t for t in decision_times if t < end], [end]]))
    comp = LittlesLawLatency(name="x")
    no = np.zeros(1, dtype=bool)
    total = 0.0
    for start, stop in zip(times[:-1], times[1:]):
        # No arrival or departure falls strictly inside (start, stop), so the count is constant.
        in_system = float(np.sum((arrivals <= start) & (departures > start)))
        out = comp.compute({"in_system": np.array([in_system]), "dt": np.array([stop - start])}, no, no)
        total += out[0]
    assert total == pytest.approx(float(sojourns.sum()), rel=1e-9)
