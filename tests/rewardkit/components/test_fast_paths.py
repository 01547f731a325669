"""The built-in components' fast paths (``rewardkit/components/_fast/``) give their definitions' numbers:
bit for bit on the batched path, and on the one-environment path where the same float operations
run (to the float where NumPy's and libm's ``exp`` may differ in the last bit), on inputs of every
magnitude, with the composer using them; and every fast path listed is attached on import."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rewardkit import RewardComposer
from rewardkit.backend import evaluating
from rewardkit.base import BaseReward
from rewardkit.components import (EmaDelta, LengthPenalty, LengthTarget, Linear, LittlesLawLatency, LoadImbalance,
                                  LogisticLatency, OverlongPenalty, PotentialShaping, ThresholdPenalty,
                                  ThroughputSigmoid)
from rewardkit.components._fast import FAST_PATHS
from rewardkit.components._fast._length import target_lengths
from rewardkit.components._numeric import FEW_COLUMNS, FLOAT_MAX
from rewardkit.components.load_imbalance import STATISTICS
from rewardkit.registry import get_component_class
from rewardkit.testing.component_checks import compile_scalar_helper

ROOT = Path(__file__).resolve().parents[3]
#: the hooks a fast-path module may set (the composer calls them; see rewardkit/base.py)
HOOKS = ("compute_fast", "scalar_fn", "scalar_source", "scalar_block")

pytestmark = pytest.mark.filterwarnings("error")  # a fast path must not warn where its definition does not

MAGNITUDES = st.sampled_from([1.0, 1e-160, 1e140, 1e200, 1e307])


@settings(max_examples=150, deadline=None)
@given(statistic=st.sampled_from(STATISTICS), n=st.integers(1, 6), k=st.integers(1, FEW_COLUMNS + 3),
       scale=MAGNITUDES, data=st.data())
def test_load_imbalance_fast_paths_give_the_definitions_numbers(statistic: str, n: int, k: int, scale: float,
                                                                data: st.DataObject) -> None:
    low = 0.0 if statistic in ("cv", "max_over_mean") else -1.0
    loads = data.draw(arrays(np.float64, (n, k), elements=st.floats(low, 1.0, allow_nan=False))) * scale
    term = LoadImbalance(name="imbalance", statistic=statistic)
    flags = np.zeros(n, dtype=bool)
    definition = term.compute({"replica_loads": loads}, flags, flags)
    fast = term.compute_fast({"replica_loads": loads}, flags, flags)
    assert np.array_equal(definition, fast), (loads, definition, fast)
    one_env = term.scalar_fn()
    scalar = [one_env(row.tolist(), False, False) for row in loads]
    assert scalar == pytest.approx(definition.tolist(), rel=1e-12, abs=0.0)


def test_the_composer_runs_the_fast_path_and_pays_what_the_definition_does() -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "imbalance": {"type": "load_imbalance", "params": {"statistic": "cv"}, "weight": -1.0}}})
    loads = np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0], [0.0, 0.0, 9.0]])
    calls = []
    original = LoadImbalance.compute_fast

    def counted(self, x, terminated, truncated):
        calls.append(x["replica_loads"].shape)
        return original(self, x, terminated, truncated)

    LoadImbalance.compute_fast = counted
    try:
        composer = RewardComposer.from_dict(composer.to_dict())
        out = composer.evaluate_batch({"replica_loads": loads})
    finally:
        LoadImbalance.compute_fast = original
    assert calls == [(3, 3)]
    flags = np.zeros(3, dtype=bool)
    expected = -LoadImbalance(name="i", statistic="cv").compute({"replica_loads": loads}, flags, flags)
    assert np.array_equal(np.asarray(out.total), expected)


# ---- every listed fast path is attached, apart from the definition ------------------------------

_ATTACHED = """
import json, sys
import rewardkit  # nothing else: importing the package must attach every fast path
from rewardkit.components._fast import FAST_PATHS
from rewardkit.registry import get_component_class
wrong = []
for name, module in FAST_PATHS.items():
    if module not in sys.modules:
        wrong.append(f"{name}: {module} was not imported")
        continue
    cls, fast = get_component_class(name), sys.modules[module]
    hooks = [hook for hook in %r if hasattr(fast, hook)]
    if not hooks:
        wrong.append(f"{name}: {module} defines none of the hooks")
    wrong += [f"{name}.{hook} is not {module}.{hook}" for hook in hooks if getattr(cls, hook) is not getattr(fast, hook)]
print(json.dumps(wrong))
"""


def test_every_listed_fast_path_is_attached_when_rewardkit_is_imported() -> None:
    result = subprocess.run([sys.executable, "-c", _ATTACHED % (HOOKS,)], capture_output=True, text=True, cwd=ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("name", sorted(FAST_PATHS))
def test_the_definition_holds_compute_and_every_hook_it_overrides_comes_from_fast(name: str) -> None:
    cls = get_component_class(name)
    defined = next(k for k in cls.__mro__ if "compute" in vars(k))
    assert defined.__module__.startswith("rewardkit.components.") and "._fast" not in defined.__module__
    fast = FAST_PATHS[name]
    # a module of the component's name, or of the shared base's that defines compute
    assert fast.rpartition(".")[2] in (cls.__module__.rpartition(".")[2], defined.__module__.rpartition(".")[2])
    overridden = [hook for hook in HOOKS if getattr(cls, hook, None) not in (None, getattr(BaseReward, hook, None))]
    assert overridden, name
    assert {hook: getattr(cls, hook).__module__ for hook in overridden} == dict.fromkeys(overridden, fast)
    assert all(getattr(cls, hook) is getattr(importlib.import_module(fast), hook) for hook in overridden)


# ---- each fast path against its definition -------------------------------------------------

FINITE = st.floats(allow_nan=False, allow_infinity=False)  # the whole float64 range, subnormals too
FINITE_32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
NON_NEGATIVE = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
POSITIVE = st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False)
DTYPES = st.sampled_from([np.float64, np.float32])
#: episode ends, rarer than continuations so that every environment gets past its first step
ENDS = st.sampled_from([False] * 7 + [True])


def same_bits(a: Any, b: Any) -> bool:
    """The same dtype, shape and bits (``-0.0`` is not ``0.0``); NaN where the other has NaN (a NaN's
    sign bit is no number: ``length_target`` in float32 with a target beyond float32 gives NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and a[~nan].tobytes() == b[~nan].tobytes()


def batch(data: st.DataObject, dtype: type, low: float | None = None, n: int | None = None) -> np.ndarray:
    """A batch of 1 to 6 environments' floats of ``dtype``'s whole range (from ``low`` up if given)."""
    width = 64 if dtype is np.float64 else 32
    elements = st.floats(min_value=low, width=width, allow_nan=False, allow_infinity=False)
    return data.draw(arrays(dtype, n or data.draw(st.integers(1, 6)), elements=elements))


def one_env_paths(comp: BaseReward) -> list[Any]:
    """The component's one-environment function and its inlined code compiled as the composer does."""
    compiled = [compile_scalar_helper(comp, kind) for kind in ("scalar_source", "scalar_block")]
    return [comp.scalar_fn()] + [fn for fn in compiled if fn is not None]


@settings(max_examples=120, deadline=None)
@given(cls=st.sampled_from([ThroughputSigmoid, LogisticLatency]), dtype=DTYPES, data=st.data())
def test_sigmoid_fast_paths_give_the_definitions_numbers(cls: type, dtype: type, data: st.DataObject) -> None:
    wide = dtype is np.float64
    center = data.draw(FINITE if wide else FINITE_32)
    width = data.draw(POSITIVE if wide else st.floats(min_value=0.0, exclude_min=True, width=32, allow_infinity=False))
    comp = cls(name="s", **{cls.center_param: center, cls.width_param: width})
    values = batch(data, dtype)
    x, flags = {comp._input: values}, np.zeros(len(values), dtype=bool)
    before = values.copy()
    definition = comp.compute(x, flags, flags)
    assert same_bits(comp.compute_fast(x, flags, flags), definition)
    assert same_bits(values, before)  # the in-place path writes a new array only
    if wide:  # NumPy's and libm's exp may differ in the last bit
        for fn in one_env_paths(comp):
            assert [fn(v, False, False) for v in values.tolist()] == pytest.approx(definition.tolist(), rel=1e-15, abs=0)


@settings(max_examples=120, deadline=None)
@given(threshold=FINITE | st.sampled_from([0.0, 1.0, -1.0, 1e300, -1e300]),
       slope=NON_NEGATIVE | st.sampled_from([0.0, 0.25, 1.0, 2.0, 1e300]), dtype=DTYPES, data=st.data())
def test_threshold_penalty_fast_paths_give_the_definitions_numbers(threshold: float, slope: float, dtype: type,
                                                                   data: st.DataObject) -> None:
    comp = ThresholdPenalty(name="t", threshold=threshold, slope=slope)
    latency = batch(data, dtype)
    x, flags = {"latency": latency}, np.zeros(len(latency), dtype=bool)
    before = latency.copy()
    with evaluating(True, np.dtype(dtype)):  # as the composer calls it (a float32 threshold may overflow)
        definition = comp.compute(x, flags, flags)
        assert same_bits(comp.compute_fast(x, flags, flags), definition)
    assert same_bits(latency, before)
    if dtype is np.float64:  # the same float operations
        for fn in one_env_paths(comp):
            assert [fn(v, False, False) for v in latency.tolist()] == definition.tolist()


@settings(max_examples=100, deadline=None)
@given(scale=FINITE | st.sampled_from([0.0, 1.0, -1.0, 1e300]), data=st.data())
def test_linear_fast_paths_give_the_definitions_numbers(scale: float, data: st.DataObject) -> None:
    low, high = sorted(data.draw(st.lists(FINITE, min_size=2, max_size=2, unique=True)))
    clip = data.draw(st.sampled_from([None, [low, high], [low, None], [None, high]]))
    comp = Linear(name="l", scale=scale, clip=clip)
    value = batch(data, np.float64)
    flags = np.zeros(len(value), dtype=bool)
    definition = comp.compute({"value": value}, flags, flags)
    for fn in one_env_paths(comp):
        assert [fn(v, False, False) for v in value.tolist()] == definition.tolist()


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_littles_law_fast_paths_give_the_definitions_numbers(data: st.DataObject) -> None:
    comp = LittlesLawLatency(name="q")
    in_system = batch(data, np.float64, low=0.0)
    dt = batch(data, np.float64, low=0.0, n=len(in_system))
    flags = np.zeros(len(dt), dtype=bool)
    definition = comp.compute({"in_system": in_system, "dt": dt}, flags, flags)
    for fn in one_env_paths(comp):
        assert [fn(a, b, False, False) for a, b in zip(in_system.tolist(), dt.tolist(), strict=True)] \
            == definition.tolist()
        with pytest.raises(ValueError, match="must be non-negative"):  # the definition's error
            fn(-1.0, 2.0, False, False)


def play(comp: BaseReward, step: Any, values: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> list:
    """``step(x, terminated, truncated)`` on each call's row, reset where an episode ended (as the composer does)."""
    outs = []
    local = next(iter(comp.inputs))
    for value, term, trunc in zip(values, terminated, truncated, strict=True):
        outs.append(np.asarray(step({local: value}, term, trunc)).copy())
        if (term | trunc).any():
            comp.reset(term | trunc)
    return outs


def play_one_env(comp: BaseReward, fn: Any, values: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> list:
    """A one-environment function on column 0 of each call, the state reset at an episode's end."""
    outs = []
    for value, term, trunc in zip(values[:, 0].tolist(), terminated[:, 0].tolist(), truncated[:, 0].tolist(),
                                  strict=True):
        outs.append(fn(value, term, trunc))
        if term or trunc:
            comp.reset(None)
    return outs


def episodes(data: st.DataObject, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up to 10 calls of 1 to 4 environments: values of the whole range, episode ends mid-way."""
    shape = (data.draw(st.integers(1, 10)), data.draw(st.integers(1, 4)))
    width = 64 if dtype is np.float64 else 32
    values = data.draw(arrays(dtype, shape, elements=st.floats(width=width, allow_nan=False, allow_infinity=False)
                              | st.sampled_from([0.0, 1.0, -1.0, 2.5])))
    terminated = data.draw(arrays(bool, shape, elements=ENDS))
    truncated = data.draw(arrays(bool, shape, elements=ENDS))
    return values, terminated, truncated


@settings(max_examples=120, deadline=None)
@given(alpha=st.sampled_from([1.0, 0.5, 0.1, 1e-3]) | st.floats(0.0, 1.0, exclude_min=True),
       eps=st.sampled_from([1e-8, 1.0, 1e-160, 1e-300]) | POSITIVE, dtype=DTYPES, data=st.data())
def test_ema_delta_fast_paths_give_the_definitions_numbers(alpha: float, eps: float, dtype: type,
                                                           data: st.DataObject) -> None:
    # an eps below float32's normal range is 0 there: the definition divides by 0 and NumPy warns, as before
    assume(dtype is np.float64 or eps >= float(np.finfo(np.float32).tiny))
    values, terminated, truncated = episodes(data, dtype)
    definition, fast = (EmaDelta(name="e", signal="x", ema_alpha=alpha, eps=eps) for _ in range(2))
    with evaluating(True, np.dtype(dtype)):
        want = play(definition, definition.compute, values, terminated, truncated)
        got = play(fast, fast.compute_fast, values, terminated, truncated)
    assert all(same_bits(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    assert fast.state_dict() == definition.state_dict()
    if dtype is np.float64:  # the same float operations, on the first environment alone
        alone = EmaDelta(name="e", signal="x", ema_alpha=alpha, eps=eps)
        want = [float(out[0]) for out in play(alone, alone.compute, values[:, :1], terminated[:, :1], truncated[:, :1])]
        for kind in ("scalar_fn", "scalar_block"):
            comp = EmaDelta(name="e", signal="x", ema_alpha=alpha, eps=eps)
            fn = comp.scalar_fn() if kind == "scalar_fn" else compile_scalar_helper(comp, kind)
            assert play_one_env(comp, fn, values, terminated, truncated) == want, kind
            if not (terminated[-1, 0] or truncated[-1, 0]):  # (a reset state is saved as empty or as zeros)
                assert comp.state_dict() == alone.state_dict(), kind


@settings(max_examples=100, deadline=None)
@given(gamma=st.sampled_from([1.0, 0.99, 0.5]) | st.floats(0.0, 1.0, exclude_min=True), data=st.data())
def test_potential_shaping_fast_paths_give_the_definitions_numbers(gamma: float, data: st.DataObject) -> None:
    values, terminated, truncated = episodes(data)
    alone = PotentialShaping(name="p", gamma=gamma)
    want = [float(out[0]) for out in play(alone, alone.compute, values[:, :1], terminated[:, :1], truncated[:, :1])]
    for kind in ("scalar_fn", "scalar_block"):
        comp = PotentialShaping(name="p", gamma=gamma)
        fn = comp.scalar_fn() if kind == "scalar_fn" else compile_scalar_helper(comp, kind)
        assert play_one_env(comp, fn, values, terminated, truncated) == want, kind
        if not (terminated[-1, 0] or truncated[-1, 0]):  # (a reset state is saved as empty or as zeros)
            assert comp.state_dict() == alone.state_dict(), kind


texts = st.lists(st.text(alphabet=" ab\n\t\u00e9\u3000x", max_size=40), max_size=6)
PER_UNIT = st.sampled_from([0.0, 1.0, 0.5, 1e-300, 1e300, FLOAT_MAX])


@settings(max_examples=120, deadline=None)
@given(completions=texts, per_unit=PER_UNIT, point=st.sampled_from([0.0, 3.0, 20.0, 1e300]),
       unit=st.sampled_from(["words", "chars", "tokens"]), dtype=DTYPES, data=st.data())
def test_length_fast_paths_give_the_definitions_numbers(completions: list[str], per_unit: float, point: float,
                                                        unit: str, dtype: type, data: st.DataObject) -> None:
    tokens = data.draw(arrays(np.float64, len(completions), elements=st.integers(0, 2**53).map(float)))
    for comp in (LengthTarget(target=point, unit=unit, per_unit=per_unit),
                 LengthPenalty(max=point, unit=unit, per_unit=per_unit),
                 OverlongPenalty(max_length=max(point, 1.0), cache_length=min(point, 4.0), unit=unit)):
        x = {"completion_tokens": tokens.astype(dtype)} if unit == "tokens" else {"completion": completions}
        with evaluating(True, np.dtype(dtype)):
            definition = comp.compute(x, None, None)
            assert same_bits(comp.compute_fast(x, None, None), definition), (comp, definition)
        if dtype is np.float64:
            one_env = comp.scalar_fn()
            inputs = tokens.tolist() if unit == "tokens" else completions
            assert [one_env(v, False, False) for v in inputs] == definition.tolist()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_length_targets_one_array_arithmetic_is_the_definitions(dtype: type) -> None:
    lengths = np.array([0.0, 3.0, 20.0, 25.0, 1e30], dtype=dtype)
    for per_unit in (0.0, 1.0, 0.25):
        comp = LengthTarget(target=20, unit="chars", per_unit=per_unit)
        got = target_lengths(comp, lengths)
        assert same_bits(got, comp.of_lengths(lengths))
        assert same_bits(got, -(np.abs(lengths - comp.target) * comp.per_unit))
        assert lengths.tolist() == np.array([0.0, 3.0, 20.0, 25.0, 1e30], dtype=dtype).tolist()  # not written
