"""Property tests of the built-in components: every declared promise through
``rewardkit.testing.check_component`` (as users check theirs), then what each component promises
beyond its declarations: the EMA recurrence, load-balance invariances, PBRS telescoping, Little's law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import get_component_class, registered
from rewardkit.testing import check_component, params_strategy
from rewardkit.components import EmaDelta, Linear, LittlesLawLatency, LoadImbalance, PotentialShaping

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


# ---- every component: every declared promise, through rewardkit.testing ----------------------


@pytest.mark.parametrize("name", [n for n in registered() if not get_component_class(n).asynchronous])
def test_builtin_component_keeps_every_declared_promise(name: str) -> None:
    """Range, finiteness, direction, batched and compiled paths, state, reset and deep copy:
    the same check users run on their own components (the remote ones, which need a server, in
    tests/rewardkit/remote/test_remote_properties.py)."""
    checked = check_component(get_component_class(name), examples=40)
    assert "finite outputs within output_range" in checked
    cls = get_component_class(name)
    assert ("monotone as declared" in checked) == bool(cls.monotone)
    assert ("compute_fast equals compute" in checked) == hasattr(cls, "compute_fast")  # the composer's batched path


@FAST
@given(scale=FINITE.filter(lambda s: s != 0), clip=clip_bounds())
def test_linear_direction_follows_sign_of_scale(scale: float, clip: list | None) -> None:
    comp = Linear(name="x", scale=scale, clip=clip)
    assert comp.monotone == {"value": "increasing" if scale > 0 else "decreasing"}


# ---- ema_delta ------------------------------------------------------------------------------


@FAST
@given(
    params=params_strategy(EmaDelta),
    values=st.lists(st.lists(FINITE, min_size=2, max_size=2), min_size=1, max_size=8),
    ends=st.lists(st.lists(st.sampled_from([False, False, True]), min_size=2, max_size=2), min_size=8, max_size=8),
)
def test_ema_delta_is_zero_on_first_step_of_every_episode(params: dict, values: list[list[float]],
                                                          ends: list[list[bool]]) -> None:
    comp = EmaDelta(name="x", **params)
    no = np.zeros(2, dtype=bool)
    starting = np.ones(2, dtype=bool)
    for row, end in zip(values, ends, strict=False):  # 8 `ends` rows cover up to 8 steps
        out = comp.compute({"signal": np.array(row)}, np.array(end), no)
        assert np.all(out[starting] == 0.0)
        starting = np.array(end)
        if starting.any():
            comp.reset(starting)


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
    for start, stop in zip(times[:-1], times[1:], strict=True):
        # No arrival or departure falls strictly inside (start, stop), so the count is constant.
        in_system = float(np.sum((arrivals <= start) & (departures > start)))
        out = comp.compute({"in_system": np.array([in_system]), "dt": np.array([stop - start])}, no, no)
        total += out[0]
    assert total == pytest.approx(float(sojourns.sum()), rel=1e-9)
