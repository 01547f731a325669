"""A failed call, load or reset changes nothing: step counter, normalizer statistics and
component state stay as they were, on the single-environment and the batched path. The stateful
twin test interleaves valid and invalid operations on one composer and gives a twin only the
valid ones: outputs and ``state_dict()`` stay equal."""

from __future__ import annotations

import copy
import json
import math
from typing import Any, Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rewardkit import BaseReward, ConfigError, PerEnvState, RewardComposer, RewardKitError
from rewardkit.base import Array
from rewardkit.params import Param

# Every kind of state: a zscore and a minmax normalizer, return_std, potential shaping, an EMA,
# a term that raises on negative input (littles_law_latency) and one on negative loads (cv).
CONFIG: dict[str, Any] = {
    "version": 1,
    "components": {
        "linear": {"type": "linear", "inputs": {"value": "x"}, "normalize": "running_zscore"},
        "time": {"type": "littles_law_latency", "weight": -1.0},
        "perf": {"type": "group", "normalize": "running_minmax", "weight": 0.5, "components": {
            "shaping": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "x"},
                        "normalize": {"type": "return_std", "gamma": 0.9}},
            "delta": {"type": "ema_delta", "params": {"signal": "in_system", "ema_alpha": 0.3}},
        }},
        "balance": {"type": "load_imbalance", "params": {"statistic": "cv"},
                    "weight": {"schedule": "linear", "start": -0.2, "end": -0.1, "steps": 50}},
    },
}
N_ENVS = 3


def good_context(rng: np.random.Generator, batched: bool) -> dict[str, Any]:
    if batched:
        return {"x": rng.normal(size=N_ENVS), "in_system": rng.uniform(0, 5, N_ENVS),
                "dt": rng.uniform(0, 1, N_ENVS), "replica_loads": rng.uniform(0, 4, (N_ENVS, 3))}
    return {"x": float(rng.normal()), "in_system": float(rng.uniform(0, 5)), "dt": float(rng.uniform(0, 1)),
            "replica_loads": rng.uniform(0, 4, 3).tolist()}


def outputs(out: Any) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in out.as_dict().items()}


@pytest.mark.parametrize("batched", [False, True])
def test_issue_example_a_failing_second_term_leaves_the_first_normalizer_alone(batched):
    """linear + running_zscore, littles_law_latency: good, in_system=-1, good == good, good."""
    config = {"version": 1, "components": {
        "linear": {"type": "linear", "inputs": {"value": "x"}, "normalize": "running_zscore"},
        "time": {"type": "littles_law_latency"}}}
    a, b = RewardComposer.from_dict(config), RewardComposer.from_dict(config)
    wrap = (lambda v: np.array([v, v + 1.0])) if batched else (lambda v: v)
    first = {"x": wrap(1.0), "in_system": wrap(2.0), "dt": wrap(0.5)}
    second = {"x": wrap(4.0), "in_system": wrap(1.0), "dt": wrap(0.5)}
    a(first)
    b(first)
    with pytest.raises(ValueError, match="in_system"):
        a({"x": wrap(100.0), "in_system": wrap(-1.0), "dt": wrap(0.5)})
    assert a.state_dict() == b.state_dict()
    assert outputs(a(second)) == outputs(b(second))


class FlakyCounter(BaseReward):
    """Counts calls in its state, then raises for a negative value (state written first, on purpose)."""

    inputs = {"value": 0}
    params = {"limit": Param.number(0.0, "values below this raise")}
    stateful = True

    def __init__(self, name: str | None = None, inputs: Mapping[str, str] | None = None, **params: Any) -> None:
        super().__init__(name, inputs, **params)
        self._state = PerEnvState(calls=0.0)

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        s = self._state.ensure(len(x["value"]))
        s["calls"] += 1.0
        if np.any(x["value"] < self.limit):
            raise ValueError("flaky_counter: value below the limit")
        return s["calls"].copy()

    def reset(self, mask: Array | None = None) -> None:
        self._state.reset(mask)

    def state_dict(self) -> dict[str, Any]:
        return self._state.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._state.load_state_dict(state)


#: registered while this module runs (tests/rewardkit/conftest.py)
TEST_COMPONENTS = {"test_flaky_counter": FlakyCounter}


@pytest.mark.parametrize("batched", [False, True])
def test_a_third_party_component_that_writes_then_raises_is_put_back(batched):
    config = {"version": 1, "components": {
        "shaping": {"type": "potential_shaping", "inputs": {"potential": "x"}, "normalize": "running_zscore"},
        "flaky": {"type": "test_flaky_counter", "inputs": {"value": "x"}, "normalize": "return_std"},
        "delta": {"type": "ema_delta", "params": {"signal": "x"}}}}
    c = RewardComposer.from_dict(config)
    wrap = (lambda v: np.full(2, v)) if batched else (lambda v: v)
    c({"x": wrap(1.0)})
    c({"x": wrap(2.0)})
    before = c.state_dict()
    with pytest.raises(ValueError, match="below the limit"):
        c({"x": wrap(-5.0)})
    assert c.state_dict() == before
    assert c({"x": wrap(3.0)}).terms["flaky"].raw == pytest.approx(3.0)


def test_load_state_dict_is_all_or_nothing():
    c = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(0)
    for _ in range(3):
        c(good_context(rng, False))
    saved = c.state_dict()
    other = RewardComposer.from_dict(CONFIG)
    other(good_context(rng, False))
    before = other.state_dict()

    def broken(path: str, value: Any) -> dict[str, Any]:
        state = copy.deepcopy(saved)
        *parents, last = path.split(".")
        target = state
        for key in parents:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
        return state

    cases = [
        (broken("normalizers.nope", {"mean": 0.0, "var": 1.0, "count": 1.0}), r"normalizers\.nope: unknown name"),
        (broken("components.perf/shaping", [1.0, 2.0]), r"components\.perf/shaping: expected a mapping"),
        (broken("components.perf/delta.mean", [math.nan]), r"components\.perf/delta\.mean\[0\]: expected a finite"),
        (broken("components.perf/delta.mean", [1.0, 2.0]), r"components\.perf/delta: expected lists of one length"),
        (broken("components.perf/delta.mean", "1.0"), r"components\.perf/delta\.mean: expected a non-empty list"),
        (broken("normalizers.linear.var", -1.0), r"normalizers\.linear\.var: expected a non-negative"),
        (broken("normalizers.perf.low", "-inf"), r"normalizers\.perf\.low: expected a finite number or 'inf'"),
        (broken("normalizers.perf/shaping.returns", [True]), r"normalizers\.perf/shaping\.returns\[0\]"),
        (broken("normalizers.linear", KeyError), r"normalizers\.linear: missing key"),
        (broken("step", math.nan), r"step: expected a non-negative integer"),
        (broken("step", "3"), r"step: expected a non-negative integer"),
        (broken("step", -1), r"step: expected a non-negative integer"),
        (broken("training", "yes"), r"training: expected true or false"),
        (broken("config", "0123456789abcdef"), r"config: .*different reward config"),
        ([saved], r"expected a mapping"),
    ]
    for state, message in cases:
        with pytest.raises(ConfigError, match=message):
            other.load_state_dict(state)
        assert other.state_dict() == before, message
    other.load_state_dict(json.loads(json.dumps(saved)))
    assert other.state_dict() == saved


def test_load_state_dict_refuses_another_configs_state():
    a = RewardComposer.from_dict(CONFIG)
    changed = copy.deepcopy(CONFIG)
    changed["components"]["linear"]["params"] = {"scale": 2.0}
    b = RewardComposer.from_dict(changed)
    with pytest.raises(ConfigError, match="state_dict: config: .*different reward config"):
        b.load_state_dict(a.state_dict())


@pytest.mark.parametrize("bad", [math.nan, "3", -1, 1.5, True, 2**63, None])
@pytest.mark.parametrize("batched", [False, True])
def test_a_bad_step_is_refused_before_anything_moves(bad, batched):
    c = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(1)
    c(good_context(rng, batched))
    before = c.state_dict()
    if bad is None:  # None means "the composer's own step": allowed
        c(good_context(rng, batched), step=bad)
        return
    with pytest.raises(RewardKitError, match="step: expected a non-negative integer"):
        c(good_context(rng, batched), step=bad)
    assert c.state_dict() == before


def test_numpy_integer_steps_are_accepted_and_a_batch_advances_by_its_size():
    c = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(2)
    c(good_context(rng, False), step=np.int64(7))
    assert c.step == 8
    c.reset()  # a new number of environments starts new episodes
    c(good_context(rng, True))
    assert c.step == 8 + N_ENVS


def test_an_empty_batch_is_refused():
    c = RewardComposer.from_dict(CONFIG)
    empty = {"x": np.zeros(0), "in_system": np.zeros(0), "dt": np.zeros(0), "replica_loads": np.zeros((0, 3))}
    with pytest.raises(RewardKitError, match="empty batch"):
        c(empty)
    assert c.step == 0


def test_reset_validates_its_mask_and_changes_nothing_on_error():
    c = RewardComposer.from_dict(CONFIG)
    rng = np.random.default_rng(3)
    c(good_context(rng, True))
    before = c.state_dict()
    for bad, message in [([1, 0, 1], "boolean"), (np.array([0.5, 1.0, 0.0]), "boolean"), ("yes", "boolean"),
                         ([[True, False, True]], "1-D"), ([True, False], "environment")]:
        with pytest.raises((RewardKitError, ValueError), match=message):
            c.reset(bad)
        assert c.state_dict() == before, bad
    c.reset([True, False, False])
    assert c.state_dict()["components"]["perf/shaping"]["started"] == [0.0, 1.0, 1.0]


# ---- the twin test ----------------------------------------------------------------------------
def _bad_contexts(rng: np.random.Generator, batched: bool) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(context, call keywords) pairs that must raise."""
    good = good_context(rng, batched)
    n = N_ENVS if batched else None

    def value(v: Any) -> Any:
        return np.full(n, v) if batched else v

    loads = np.full((N_ENVS, 3), -1.0) if batched else [-1.0, 2.0, 3.0]
    return [
        ({**good, "in_system": value(-1.0)}, {}),               # littles_law_latency raises (mid-call)
        ({**good, "replica_loads": loads}, {}),                  # cv of negative loads raises
        ({**good, "x": value(math.nan)}, {}),                    # non-finite input
        ({**good, "dt": "fast"}, {}),                            # a string as a number
        ({k: v for k, v in good.items() if k != "dt"}, {}),      # missing key
        (good, {"step": math.nan}),
        (good, {"step": "4"}),
        (good, {"terminated": 1}),                               # flags are booleans only
        ({**good, "x": np.zeros(N_ENVS + 1)} if batched else {**good, "x": None}, {}),
    ]


class TwinMachine(RuleBasedStateMachine):
    """``subject`` sees every operation; ``twin`` only the valid ones."""

    @initialize(batched=st.booleans(), seed=st.integers(0, 2**16))
    def start(self, batched: bool, seed: int) -> None:
        self.batched = batched
        self.rng = np.random.default_rng(seed)
        self.subject = RewardComposer.from_dict(CONFIG)
        self.twin = RewardComposer.from_dict(CONFIG)

    @rule(terminated=st.booleans(), truncated=st.booleans(), use_step=st.booleans())
    def valid_call(self, terminated: bool, truncated: bool, use_step: bool) -> None:
        ctx = good_context(self.rng, self.batched)
        flags: dict[str, Any] = {"terminated": terminated, "truncated": truncated}
        if self.batched:
            flags = {k: np.array([v, False, not v]) for k, v in flags.items()}
        if use_step:
            flags["step"] = int(self.rng.integers(0, 100))
        assert outputs(self.subject(ctx, **flags)) == outputs(self.twin(ctx, **flags))

    @rule(which=st.integers(0, 8))
    def invalid_call(self, which: int) -> None:
        ctx, kwargs = _bad_contexts(self.rng, self.batched)[which]
        with pytest.raises((RewardKitError, ValueError, KeyError)):
            self.subject(ctx, **kwargs)

    @rule(masked=st.booleans())
    def reset(self, masked: bool) -> None:
        mask = None
        if masked:
            mask = self.rng.random(N_ENVS if self.batched else 1) < 0.5
        self.subject.reset(mask)
        self.twin.reset(mask)

    @rule(which=st.integers(0, 2))
    def invalid_reset(self, which: int) -> None:
        held = self.subject.state_dict()["components"]["perf/shaping"]
        if which == 0 and held:  # a mask of another length than the environments held
            mask: Any = np.ones(len(held["phi"]) + 1, dtype=bool)
        else:  # integers, or a 2-D mask, are never a mask
            mask = [1, 0] if which == 1 else np.ones((1, 2), dtype=bool)
        with pytest.raises((RewardKitError, ValueError)):
            self.subject.reset(mask)

    @rule()
    def save_and_load(self) -> None:
        state = json.loads(json.dumps(self.subject.state_dict()))
        self.subject.load_state_dict(state)
        self.twin.load_state_dict(state)

    @rule()
    def invalid_load(self) -> None:
        state = self.subject.state_dict()
        state["normalizers"]["linear"] = {"mean": 0.0, "var": "wide", "count": 1.0}
        with pytest.raises(ConfigError):
            self.subject.load_state_dict(state)

    @rule(training=st.booleans())
    def mode(self, training: bool) -> None:
        for c in (self.subject, self.twin):
            c.train() if training else c.eval()

    @invariant()
    def same_state(self) -> None:
        if hasattr(self, "subject"):
            assert self.subject.state_dict() == self.twin.state_dict()


TwinMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
test_twin_composers_agree = TwinMachine.TestCase
