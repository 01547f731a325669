"""The code the composer generates is readable and debuggable: tracebacks show its
lines, its variables are named after the terms, each component's inlined helpers live in a
namespace of their own, and ``rewardkit explain CONFIG --show-code`` prints it."""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pytest

from rewardkit import BaseReward, RewardComposer, cli
from rewardkit.base import Array

ROOT = Path(__file__).resolve().parents[3]
HYBRID = ROOT / "configs" / "rewards" / "vidur_hybrid.yaml"


# Two components that inline code using a helper of the same name, ``_helper``, bound to different
# functions. Sharing one namespace, the second would overwrite the first's helper.
class _HelperComponent(BaseReward):
    inputs = {"value": 0}
    helper: Callable[[float], float] = staticmethod(lambda v: v)

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        return np.array([self.helper(float(v)) for v in x["value"]])

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        env["_helper"] = self.helper
        return f"_helper({args[0]})"


class _Double(_HelperComponent):
    """2*value (test component)."""

    helper = staticmethod(lambda v: 2.0 * v)


class _Negate(_HelperComponent):
    """-value (test component)."""

    helper = staticmethod(lambda v: -v)


class _Reciprocal(BaseReward):
    """1/value, inlined (raises ZeroDivisionError at 0: a traceback through generated code)."""

    inputs = {"value": 0}

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        if np.any(x["value"] == 0):
            raise ZeroDivisionError("float division by zero")
        return 1.0 / x["value"]

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        return f"(1.0 / {args[0]})"


#: registered while this module runs (tests/rewardkit/conftest.py)
TEST_COMPONENTS = {"test_codegen_double": _Double, "test_codegen_negate": _Negate,
                   "test_codegen_reciprocal": _Reciprocal}


def test_two_components_keep_their_own_helper_of_the_same_name():
    c = RewardComposer.from_dict({"version": 1, "components": {
        "twice": {"type": "test_codegen_double", "inputs": {"value": "x"}},
        "minus": {"type": "test_codegen_negate", "inputs": {"value": "x"}},
    }})
    out = c({"x": 3.0})
    assert out.terms["twice"].raw == 6.0
    assert out.terms["minus"].raw == -3.0
    assert out.total == 3.0
    batched = c({"x": np.array([3.0, 1.0])})
    np.testing.assert_array_equal(batched.terms["minus"].raw, [-3.0, -1.0])
    code = c.generated_code()
    assert "_twice_helper(ctx_x)" in code and "_minus_helper(ctx_x)" in code


def test_traceback_through_generated_code_shows_the_line():
    c = RewardComposer.from_dict({"version": 1, "components": {
        "inverse_latency": {"type": "test_codegen_reciprocal", "inputs": {"value": "latency"}}}})
    assert c({"latency": 4.0}).total == 0.25
    with pytest.raises(ZeroDivisionError) as info:
        c({"latency": 0.0})
    text = "".join(traceback.format_exception(info.value))
    assert "in reward_single_env" in text
    assert "inverse_latency_raw = (1.0 / ctx_latency)" in text  # the generated line itself
    assert c.step == 1  # the failed call changed nothing


def test_variables_are_named_after_terms_and_context_keys():
    code = RewardComposer.from_yaml(HYBRID).generated_code()
    for name in ("ctx_throughput", "ctx_replica_loads", "absolute__throughput_raw", "absolute__latency",
                 "absolute_raw", "delta_raw", "load_balance_raw", "total = absolute + delta + load_balance"):
        assert name in code, name
    assert "def reward_single_env(" in code and "def reward_batched(ctx_throughput, ctx_latency," in code
    # no positional names x0 / r1 / c2 any more
    assert not re.search(r"\b[xrcmw]\d+\b", code)


def test_awkward_names_become_distinct_identifiers():
    """Term names that sanitize alike, and names that are Python words, still compile apart."""
    c = RewardComposer.from_dict({"version": 1, "components": {
        "a-b": {"type": "info_value", "params": {"key": "k"}, "weight": 1.0},
        "a_b": {"type": "info_value", "params": {"key": "k"}, "weight": 2.0},
        "total": {"type": "info_value", "params": {"key": "step"}, "weight": 3.0},
        "if": {"type": "group", "components": {"2x": {"type": "info_value", "params": {"key": "k"}}}},
    }})
    out = c({"k": 1.0, "step": 10.0})
    assert out.total == 1.0 + 2.0 + 30.0 + 1.0
    assert out.terms["if/2x"].contribution == 1.0


def test_generated_code_changes_with_a_new_weight_and_stays_registered():
    import linecache

    c = RewardComposer.from_yaml(HYBRID)
    c.shaper.set_weight("delta", {"schedule": "linear", "start": 1.0, "end": 0.0, "steps": 10})
    assert "delta_weight = " in c.generated_code()
    filename = c.plan.single_env.__code__.co_filename
    assert "reward_single_env" in "".join(linecache.getlines(filename))


def test_explain_show_code_prints_the_functions(capsys, tmp_path):
    code = cli.main(["explain", str(HYBRID), "--show-code"])
    out = capsys.readouterr().out
    assert code == 0
    assert out == RewardComposer.from_yaml(HYBRID).generated_code()
    compile(out, "<shown>", "exec")  # what is shown is valid Python
    ctx = tmp_path / "ctx.json"
    ctx.write_text('{"throughput": 0.1, "latency": 7.0, "replica_loads": [1, 2, 3]}')
    code = cli.main(["explain", str(HYBRID), "--show-code", "--context", str(ctx)])
    out = capsys.readouterr().out
    assert code == 0 and "def reward_batched(" in out
    assert out.splitlines()[-1].startswith("total")  # then the breakdown table
    code = cli.main(["explain", str(HYBRID)])
    assert code == 2 and "--context" in capsys.readouterr().err


def test_generated_sources_are_forgotten_with_the_composer():
    import gc
    import linecache

    c = RewardComposer.from_yaml(HYBRID)
    filename = c.plan.single_env.__code__.co_filename
    assert filename in linecache.cache
    del c
    gc.collect()
    assert filename not in linecache.cache


def test_several_linear_ramps_share_their_step_tests_and_keep_the_shapers_weights() -> None:
    """Ramps of different lengths (one bounded, one from 0): one `step < until` test while all
    rise, one `step >= until` once all ended; every weight equals shaper.weight() at every phase."""
    ramps = [{"schedule": "linear", "start": 1.0, "end": 0.1, "steps": 10},
             {"schedule": "linear", "start": 0.0, "end": -2.0, "steps": 25, "min": -1.5},
             {"schedule": "linear", "start": 3.0, "end": 1.0, "steps": 17.5}]
    c = RewardComposer.from_dict({"version": 1, "components": {
        f"t{i}": {"type": "info_value", "params": {"key": f"x{i}"}, "weight": w} for i, w in enumerate(ramps)}})
    code = c.generated_code()
    assert "if step < 10:" in code and "elif step >= 25:" in code
    for step in [0, 1, 9, 10, 11, 17, 18, 24, 25, 26, 10**6]:
        for fn in (c, c.plan.single_env_absent):
            out = fn({"x0": 1.0, "x1": 1.0, "x2": 1.0}, step=step) if fn is c else fn({"x0": 1.0}, step=step)
            for i in range(3):
                assert out.terms[f"t{i}"].weight == c.shaper.weight(f"t{i}", step), (step, i)


def test_a_subclass_overriding_compute_does_not_inherit_the_built_ins_faster_copies() -> None:
    """ThresholdPenalty's fast paths (compute_fast, scalar_fn, inlined source) are copies of *its* compute:
    a user's subclass with another compute is evaluated by that compute on both paths."""
    from rewardkit import registry
    from rewardkit.components import ThresholdPenalty

    class Doubled(ThresholdPenalty):
        def compute(self, x: dict, terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
            return 2.0 * super().compute(x, terminated, truncated)

    registry._REGISTRY["test_doubled_threshold"] = Doubled
    try:
        c = RewardComposer.from_dict({"version": 1, "components": {
            "late": {"type": "test_doubled_threshold", "inputs": {"latency": "ttft"}, "params": {"threshold": 1.0}}}})
        assert c({"ttft": 3.0}).total == 4.0  # the plain threshold penalty gives 2.0
        np.testing.assert_array_equal(c({"ttft": np.array([3.0, 0.5])}).total, [4.0, 0.0])
        assert "compute_fast" not in c.generated_code() and "_late_fn(" in c.generated_code()
    finally:
        registry._REGISTRY.pop("test_doubled_threshold", None)
