"""Tests of ``rewardkit.testing``: check_component catches each kind of broken component, the
strategies honour schemas and ranges, the static proofs and the sampled checks of composed
rewards agree with the arithmetic, and ``rewardkit check`` reports and exits as documented."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import BaseReward, ConfigError, Param, PerEnvState, RewardComposer, cli, registry
from rewardkit.components import ThresholdPenalty
from rewardkit.testing import (ComponentCheckError, ExpectationError, assert_finite, assert_monotone, assert_range,
                               check_component, check_config, contexts, params_strategy, prove_finite,
                               prove_monotone, prove_range)
from rewardkit.testing.static_proofs import schedule_interval
from rewardkit.schedules import make_schedule

ROOT = Path(__file__).resolve().parents[3]
PRESETS = sorted((ROOT / "configs" / "rewards").glob("*.yaml"))
EXAMPLE = ROOT / "docs" / "examples" / "fading_bonus.yaml"
FAST = 30


# ---- check_component on broken components ------------------------------------------------------
class _Scaled(BaseReward):
    """k*value: a well-behaved base the broken variants below change in one way each."""

    inputs = {"value": 0}
    params = {"k": Param.positive(1.0, "factor")}
    output_range = (-math.inf, math.inf)
    monotone = {"value": "increasing"}

    def compute(self, x, terminated, truncated):
        with np.errstate(over="ignore"):
            return np.clip(self.k * x["value"], -1e300, 1e300)


class WrongDirection(_Scaled):
    monotone = {"value": "decreasing"}


class OutOfRange(_Scaled):
    output_range = (-1.0, 1.0)


class Overflows(_Scaled):
    def compute(self, x, terminated, truncated):
        return self.k * x["value"] * 10.0  # inf (with a RuntimeWarning) for huge values


class LeaksAcrossEnvs(_Scaled):
    # no monotone promise: rounding in the cross-environment sum could break that one first
    monotone: dict[str, str] = {}

    def compute(self, x, terminated, truncated):
        return np.full(len(x["value"]), float(np.clip(x["value"].sum(), -1e300, 1e300)))


class BadScalarFn(_Scaled):
    def scalar_fn(self):
        return lambda value, terminated, truncated: float(value) + 1.0


class BadScalarSource(_Scaled):
    def scalar_source(self, args, env, tag):
        return f"(-{args[0]})"


class Counter(BaseReward):
    """Counts calls in the episode: stateful, with its state in a PerEnvState."""

    inputs = {"value": 0}
    output_range = (0.0, math.inf)
    stateful = True

    def __init__(self, name=None, inputs=None, **params):
        super().__init__(name, inputs, **params)
        self._state = PerEnvState(count=0.0)

    def compute(self, x, terminated, truncated):
        s = self._state.ensure(len(x["value"]))
        s["count"] += 1.0
        return s["count"].copy()

    def reset(self, mask=None):
        self._state.reset(mask)

    def state_dict(self):
        return self._state.state_dict()

    def load_state_dict(self, state):
        self._state.load_state_dict(state)


class ForgetfulReset(Counter):
    def reset(self, mask=None):
        pass  # counts on across episodes


class NumpyState(Counter):
    def state_dict(self):
        return {"count": np.asarray(self._state.state_dict().get("count", []))}  # an array: not JSON


class SharedState(Counter):
    def __deepcopy__(self, memo):
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)  # shallow: the copy shares the state
        return clone


class HiddenState(_Scaled):
    """Declares stateful = False but remembers the last value."""

    def compute(self, x, terminated, truncated):
        last = getattr(self, "_last", None)
        self._last = x["value"].copy()
        out = super().compute(x, terminated, truncated)
        return out if last is None or last.shape != out.shape else out + np.sign(last)


class MutatesInput(_Scaled):
    def compute(self, x, terminated, truncated):
        x["value"] *= 0.0
        return x["value"]


BROKEN = [
    (WrongDirection, "monotone as declared", "declared decreasing in 'value'"),
    (OutOfRange, "finite outputs within output_range", "outside output_range"),
    (Overflows, "finite outputs within output_range", "RuntimeWarning"),
    (LeaksAcrossEnvs, "batched compute equals a loop over environments", "must not influence each other"),
    (BadScalarFn, "scalar_fn equals compute", "scalar_fn gives"),
    (BadScalarSource, "scalar_source equals compute", "scalar_source gives"),
    (ForgetfulReset, "reset() restarts like a fresh instance", "after reset()"),
    (NumpyState, "state_dict round trip through JSON", "not plain JSON"),
    (SharedState, "deep copies are independent", "changed the original"),
    (HiddenState, "reset() restarts like a fresh instance", "(stateful = False)"),
    (MutatesInput, "finite outputs within output_range", "modified its input 'value'"),
]


@pytest.mark.parametrize("cls, promise, words", BROKEN, ids=[c.__name__ for c, _, _ in BROKEN])
def test_check_component_names_the_broken_promise_with_a_counterexample(cls, promise, words):
    with pytest.raises(ComponentCheckError) as info:
        check_component(cls, examples=FAST, shrink=False)  # shrinking is tested once, below
    err = info.value
    assert err.promise == promise
    assert words in str(err)
    assert "counterexample:" in str(err) and "call 0:" in str(err)
    assert str(err).startswith(f"{cls.__name__} breaks the promise '{promise}'")


def test_check_component_is_reproducible_by_default():
    """The same counterexample on every run (CI reruns agree); derandomize=False searches afresh."""
    reports = set()
    for _ in range(3):
        with pytest.raises(ComponentCheckError) as info:
            check_component(HiddenState, examples=FAST, shrink=False)
        reports.add(str(info.value))
    assert len(reports) == 1
    with pytest.raises(ComponentCheckError):
        check_component(OutOfRange, examples=FAST, shrink=False, derandomize=False)


def test_check_component_shrinks_the_counterexample():
    """The wrong direction shows on small, simple numbers once shrunk."""
    with pytest.raises(ComponentCheckError) as info:
        check_component(OutOfRange, examples=FAST)
    text = str(info.value)
    assert "params: {'k': 1.0}" in text and "(1 call, 1 env)" in text and "value=[2.]" in text


def test_check_component_accepts_good_user_components_and_instances():
    assert "monotone as declared" in check_component(_Scaled, examples=FAST)
    assert "state_dict round trip through JSON" in check_component(Counter, examples=FAST)
    checked = check_component(ThresholdPenalty(name="x", threshold=2.0, slope=0.5), examples=FAST)
    assert "scalar_source equals compute" in checked and "scalar_block equals compute" not in checked


def test_check_component_fixed_params_and_input_ranges():
    seen: list[float] = []

    class Recorder(_Scaled):
        def compute(self, x, terminated, truncated):
            seen.extend(x["value"].tolist())
            assert self.k == 2.0
            return super().compute(x, terminated, truncated)

    check_component(Recorder, params={"k": 2.0}, inputs={"value": (-3.0, 5.0)}, examples=10)
    assert seen and all(-3.0 <= v <= 5.0 for v in seen)


def test_check_component_refuses_bad_arguments():
    with pytest.raises(ValueError, match="no parameter 'sigma'"):
        check_component(_Scaled, params={"sigma": 1})
    with pytest.raises(ValueError, match="no input 'latency'"):
        check_component(_Scaled, inputs={"latency": (0, 1)})
    with pytest.raises(ValueError, match="pass params only with a class"):
        check_component(_Scaled(name="x"), params={"k": 2.0})
    with pytest.raises(TypeError):
        check_component(object)  # type: ignore[arg-type]


# ---- strategies ---------------------------------------------------------------------------------
PARAM_KINDS = [Param.number(), Param.positive(), Param.non_negative(), Param.fraction(), Param.fraction(open_low=True),
               Param.choice(["a", "b c", "it's"]), Param.string(), Param.bounds()]


@pytest.mark.parametrize("param", PARAM_KINDS, ids=[p.expected for p in PARAM_KINDS])
@settings(max_examples=FAST, deadline=None)
@given(data=st.data())
def test_every_param_kind_has_a_strategy_its_checker_accepts(param, data):
    class WithParam(_Scaled):
        params = {"p": param}

    drawn = data.draw(params_strategy(WithParam))["p"]
    param.check(drawn)  # raises ValueError if the strategy drew an invalid value


def test_choice_strategy_draws_every_option():
    class WithChoice(_Scaled):
        params = {"p": Param.choice(["a", "b c", "it's"])}

    seen = set()

    @settings(max_examples=60, deadline=None)
    @given(params_strategy(WithChoice))
    def collect(p):
        seen.add(p["p"])

    collect()
    assert seen == {"a", "b c", "it's"}


def test_required_param_of_a_custom_kind_must_be_given():
    class Custom(_Scaled):
        params = {"f": Param(Param.number().default, "a function", "a callable", lambda v: v)}

    with pytest.raises(ValueError, match="cannot draw required parameter 'f'"):
        params_strategy(Custom)


@settings(max_examples=FAST, deadline=None)
@given(data=st.data())
def test_contexts_hold_every_key_within_domains_and_ranges(data):
    composer = RewardComposer.from_yaml(ROOT / "configs" / "rewards" / "vidur_instant.yaml")
    ctx = data.draw(contexts(composer, ranges={"latency": (1.0, 2.0)}))
    assert set(ctx) == {"latency", "throughput", "replica_loads"}
    assert 1.0 <= ctx["latency"] <= 2.0
    assert np.all(ctx["replica_loads"] >= 0)  # load_imbalance's declared domain
    composer(ctx)  # a drawn context evaluates
    batch = data.draw(contexts(composer, n_envs=3))
    assert batch["latency"].shape == (3,) and batch["replica_loads"].shape[0] == 3
    assert composer(batch).total.shape == (3,)


# ---- static proofs ------------------------------------------------------------------------------
def composer_of(components: dict, **top: Any) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components, **top})


LAT = {"type": "threshold_penalty", "params": {"threshold": 1.0}}
THR = {"type": "throughput_sigmoid", "params": {"target": 1.0}}


@pytest.mark.parametrize("weight, transforms, direction, proved, reason", [
    (-1.0, None, "decreasing", True, "non-increasing"),
    (2.0, None, "increasing", True, "non-decreasing"),
    (2.0, [{"scale": -1}], "decreasing", True, "non-increasing"),
    (2.0, ["tanh", {"clip": [0, 0.5]}], "increasing", True, "non-decreasing"),
    ({"schedule": "linear", "start": -0.2, "end": -1.0, "steps": 10}, None, "decreasing", True, ""),
    ({"schedule": "linear", "start": 0.2, "end": -1.0, "steps": 10}, None, "decreasing", False, "changes sign"),
    ({"schedule": "step", "start": 1.0, "factor": -0.5, "every": 10}, None, "increasing", False, "changes sign"),
    (-1.0, None, "increasing", False, "non-increasing"),
])
def test_prove_monotone(weight, transforms, direction, proved, reason):
    term = {**LAT, "weight": weight}
    if transforms:
        term["transforms"] = transforms
    proof = prove_monotone(composer_of({"lat": term, "thr": THR}), "latency", direction)
    assert proof.proved is proved and reason in proof.reason


def test_prove_monotone_cannot_conclude_for_opposite_terms_or_undeclared_directions():
    opposite = composer_of({"a": {**LAT, "weight": 1.0}, "b": {**LAT, "weight": -1.0}})
    assert "non-decreasing but" in prove_monotone(opposite, "latency", "increasing").reason
    loads = composer_of({"imb": {"type": "load_imbalance"}})
    assert "declares no direction" in prove_monotone(loads, "replica_loads", "decreasing").reason
    grouped = composer_of({"g": {"type": "group", "weight": -2.0, "components": {"t": THR}}})
    assert prove_monotone(grouped, "throughput", "decreasing").proved
    assert prove_monotone(grouped, "throughput", "increasing").proved is False


@pytest.mark.parametrize("spec, interval", [
    (3.0, (3.0, 3.0)),
    ({"schedule": "linear", "start": 1.0, "end": -2.0, "steps": 5}, (-2.0, 1.0)),
    ({"schedule": "exponential", "start": -2.0, "rate": 0.5}, (-2.0, 0.0)),
    ({"schedule": "exponential", "start": 2.0, "rate": 1.5, "max": 10.0}, (2.0, 10.0)),
    ({"schedule": "step", "start": 2.0, "factor": -0.5, "every": 3}, (-2.0, 2.0)),
    ({"schedule": "piecewise", "points": [[0, 1.0], [10, 4.0], [20, -1.0]], "min": 0.0}, (0.0, 4.0)),
])
def test_schedule_interval_bounds_every_step(spec, interval):
    schedule = make_schedule(spec)
    assert schedule_interval(schedule) == interval
    lo, hi = interval
    assert all(lo <= schedule(step) <= hi for step in range(0, 60))


def test_prove_range_uses_corners_of_input_ranges_and_finite_needs_bounds():
    composer = composer_of({"lat": {**LAT, "weight": -1.0}, "thr": {**THR, "weight": 0.5}},
                           expect={"inputs": {"latency": [0, 11], "throughput": [0, 1e9]}})
    assert prove_range(composer, -10.0, 0.5).proved  # -(11 - 1) + 0.5 * [sigmoid(-1), 1]
    assert not prove_range(composer, -9.0, 0.5).proved
    assert prove_finite(composer).proved
    unbounded = composer_of({"lat": {**LAT, "weight": -1.0, "normalize": "running_zscore"}})
    assert not prove_finite(unbounded).proved
    clipped = composer_of({"lat": {**LAT, "weight": -1.0, "normalize": "running_zscore"}},
                          total={"transforms": ["tanh"]})
    assert prove_range(clipped, -1, 1).proved


# ---- sampled checks of composed rewards ---------------------------------------------------------
def test_assert_monotone_finds_the_sign_flip_with_its_step():
    composer = RewardComposer.from_yaml(EXAMPLE)
    assert_monotone(composer, "latency", "decreasing", examples=FAST)
    with pytest.raises(ExpectationError) as info:
        assert_monotone(composer, "throughput", "increasing", examples=100)
    err = info.value
    # the weight 0.5 + (-0.1 - 0.5) * step / 1e5 is negative from step 83,334 on
    assert err.step is not None and err.step >= 83_334
    bonus = next(n for n in composer.spec.nodes if n.name == "throughput_bonus")
    assert bonus.weight(err.step) < 0
    assert f"at step {err.step}" in str(err) and "context: {latency:" in str(err)
    assert composer.step == 0  # the composer under test is untouched


def test_assert_monotone_with_fixed_context_and_steps():
    composer = RewardComposer.from_yaml(EXAMPLE)
    ctx = {"latency": 3.0, "throughput": 0.05}
    assert_monotone(composer, "throughput", "increasing", context=ctx, steps=[0, 50_000], examples=FAST)
    with pytest.raises(ExpectationError):
        assert_monotone(composer, "throughput", "increasing", context=ctx, steps=99_000, examples=FAST)
    with pytest.raises(ValueError, match="not a context key"):
        assert_monotone(composer, "latencyy", "decreasing")


def test_assert_range_and_finite_report_the_offending_total():
    composer = composer_of({"lat": {**LAT, "weight": -1.0}})
    assert_range(composer, None, 0.0, examples=FAST)
    with pytest.raises(ExpectationError, match=r"outside \[-5, null\]") as info:
        assert_range(composer, -5.0, None, examples=FAST)
    assert info.value.context["latency"] > 6.0
    huge = composer_of({"a": {**LAT, "weight": -1.0}, "b": {**LAT, "weight": -1.0}})
    with pytest.raises(ExpectationError, match="not finite"):  # two saturated penalties add up to -inf
        assert_finite(huge, examples=FAST, context=st.fixed_dictionaries({"latency": st.floats(1e308, 1.7e308)}))
    assert_finite(huge, examples=FAST, context=st.fixed_dictionaries({"latency": st.floats(0, 1e6)}))


def test_a_component_error_on_a_sampled_context_is_a_violation():
    composer = composer_of({"l": {"type": "littles_law_latency", "weight": -1.0}},
                           expect={"finite": True, "inputs": {"in_system": [-5, 5], "dt": [0, 1]}})
    [result] = check_config(composer, examples=FAST)
    assert result.status == "violated" and "raised ValueError" in result.detail and "must be non-negative" in result.detail


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_presets_keep_their_expectations(path):
    composer = RewardComposer.from_yaml(path)
    assert composer.spec.expect is not None and composer.spec.expect.monotone, f"{path} has no expect: section"
    results = check_config(composer, examples=FAST)
    assert results and all(r.status in ("proved", "tested") for r in results), [r.detail for r in results]
    # sampling agrees with every static proof of direction
    for key, direction in composer.spec.expect.monotone.items():
        assert_monotone(composer, key, direction, examples=FAST)


# ---- the expect: section ------------------------------------------------------------------------
@pytest.mark.parametrize("expect, path, words", [
    ({"monotone": {"latencyy": "decreasing"}}, "expect.monotone.latencyy", "expected a context key the config reads"),
    ({"monotone": {"latency": "down"}}, "expect.monotone.latency", "expected 'increasing' or 'decreasing'"),
    ({"monotone": ["latency"]}, "expect.monotone", "expected a mapping"),
    ({"range": [1, 0]}, "expect.range", "low < high"),
    ({"finite": "yes"}, "expect.finite", "expected true or false"),
    ({"inputs": {"latency": [0]}}, "expect.inputs.latency", "expected a list [low, high]"),
    ({"inputs": {"latency": None}}, "expect.inputs.latency", "expected a list [low, high]"),
    ({"steps": [10, 5]}, "expect.steps", "first <= last"),
    ({"monotonic": {}}, "expect.monotonic", "unknown key"),
    ("all", "expect", "expected a mapping"),
])
def test_expect_errors_name_file_and_key_path(tmp_path, expect, path, words):
    file = tmp_path / "r.yaml"
    file.write_text(yaml.safe_dump({"version": 1, "components": {"lat": LAT}, "expect": expect}))
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(file)
    assert str(info.value).startswith(f"{file}: {path}: ") and words in str(info.value)


def test_expect_round_trips_through_to_dict():
    composer = RewardComposer.from_yaml(ROOT / "configs" / "rewards" / "vidur_instant.yaml")
    again = RewardComposer.from_dict(composer.to_dict())
    assert again.spec.expect == composer.spec.expect
    assert composer.to_dict()["expect"]["range"] == [-600, 0.1]


# ---- rewardkit check ------------------------------------------------------------------------------
def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_presets_exit_0(capsys):
    code, out, err = run(capsys, "check", "--examples", "20", *map(str, PRESETS))
    assert code == 0, out + err
    assert "violated" not in out.replace("0 violated", "")
    assert "monotone in latency (decreasing): proved" in out
    assert "tested (20 examples)" in out


def test_check_reports_violation_with_step_and_context_and_exits_1(capsys):
    code, out, err = run(capsys, "check", "--examples", "100", str(EXAMPLE))
    assert code == 1
    assert "monotone in throughput (increasing): violated" in out
    assert "changes sign over its schedule (from -0.1 to 0.5)" in out
    assert "at step " in out and "context: {latency:" in out
    assert "monotone in latency (decreasing): proved" in out and "1 violated" in out


def test_check_draws_the_same_examples_for_one_seed_and_prints_it(capsys):
    first, again = (run(capsys, "check", "--examples", "30", "--seed", "7", str(EXAMPLE)) for _ in range(2))
    assert first == again and "seed 7" in first[1]
    code, _, err = run(capsys, "check", "--seed", "-1", str(EXAMPLE))
    assert code == 2 and "--seed" in err


def test_assert_functions_repeat_their_draws_for_one_seed():
    composer = RewardComposer.from_yaml(EXAMPLE)
    drawn = []
    for _ in range(2):
        with pytest.raises(ExpectationError) as info:
            assert_monotone(composer, "throughput", "increasing", examples=50, seed=3)
        drawn.append(str(info.value))
    assert drawn[0] == drawn[1]


def test_check_imports_user_modules_that_register_components(capsys, tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent("""\
        import numpy as np
        from rewardkit import BaseReward, register

        @register("my_negated", replace=True)
        class Negated(BaseReward):
            inputs = {"value": 0}
            monotone = {"value": "increasing"}   # wrong: the output decreases
            def compute(self, x, terminated, truncated):
                return np.clip(-x["value"], -1e300, 1e300)
    """))
    config = tmp_path / "r.yaml"
    config.write_text(yaml.safe_dump({"version": 1, "components": {"n": {"type": "my_negated"}},
                                      "expect": {"range": [-10, 10], "inputs": {"value": [-1, 100]}}}))
    monkeypatch.syspath_prepend(str(tmp_path))
    # --import registers my_negated and imports my_rewards: both undone after the test, so that
    # tests listing the registry see only the built-in components whatever the order
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setitem(sys.modules, "my_rewards", None)  # restored (removed) after the test
    del sys.modules["my_rewards"]
    code, out, err = run(capsys, "check", str(config))
    assert code == 1 and "components.n.type" in err  # not registered without --import
    code, out, err = run(capsys, "check", "--import", "my_rewards", "--examples", "30", str(config))
    assert code == 1 and "range [-10, 10]: violated" in out and re.search(r"the total is -\d+\.\d*, outside", out)
    code, out, err = run(capsys, "check", "--import", "no_such_module_xyz", str(config))
    assert code == 1 and "--import no_such_module_xyz" in err


def test_check_usage_errors(capsys, tmp_path):
    code, _, err = run(capsys, "check", "--examples", "0", str(EXAMPLE))
    assert code == 2 and "positive whole number" in err
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"version": 1, "components": {"lat": LAT}}))
    code, out, _ = run(capsys, "check", str(plain))
    assert code == 0 and "no expectations to check" in out


def test_import_rewardkit_does_not_import_hypothesis():
    code = "import sys, rewardkit, rewardkit.cli; assert 'hypothesis' not in sys.modules, 'hypothesis imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
