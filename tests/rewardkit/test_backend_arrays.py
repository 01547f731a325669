"""Rewards on NumPy, torch (CPU) and JAX (CPU) arrays.

Every built-in component, normalizer, transform and schedule gives NumPy's numbers in each
library, in float32 and float64, over episodes with ends and resets; outputs and state stay in
the inputs' library; state_dict() moves between libraries; property tests run per library; a
mixed-library context is a located error; the GPU test runs where a CUDA device exists.

JAX runs in a process of its own (``test_jax_cases_in_a_process_of_their_own`` runs this module
again with REWARDKIT_TEST_JAX=1): XLA starts threads, and later tests that fork (the optimizer's
workers) must not inherit them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardkit
from rewardkit import BaseReward, NonFiniteInputError, RewardComposer, get_component_class, registered
from rewardkit.base import ComponentOutputError
from rewardkit.errors import InvalidInputError
from rewardkit.testing import check_component

torch = pytest.importorskip("torch", reason="torch is part of the torch extra (make installs it)")
JAX_HERE = os.environ.get("REWARDKIT_TEST_JAX") == "1"  # set by the test that runs this module for JAX
if JAX_HERE:
    import jax
    import jax.numpy as jnp
else:
    from contextlib import nullcontext

    class jax:  # noqa: N801 - JAX itself is never imported in this process; x64 does not apply
        """Stand-in so the cases read the same in both processes."""

        enable_x64 = staticmethod(lambda on=True: nullcontext())

        class Array:
            """No value is a JAX array here."""

    jnp = None
#: the libraries this process compares with NumPy
HERE = ["numpy", "torch"] + (["jax"] if JAX_HERE else [])

N = 6
#: every built-in component, normalizer, transform and schedule, once at least
ALL: dict[str, Any] = {"version": 1, "components": {
    "sig": {"type": "throughput_sigmoid", "params": {"target": 0.5, "scale": 0.3}, "normalize": "running_zscore",
            "weight": {"schedule": "linear", "start": 1.0, "end": 0.2, "steps": 40}},
    "lat": {"type": "logistic_latency", "params": {"threshold": 1.0, "sigma": 0.5}, "transforms": ["tanh"],
            "weight": {"schedule": "cosine", "start": 1.0, "end": 0.0, "steps": 60}},
    "hinge": {"type": "threshold_penalty", "params": {"threshold": 1.0, "slope": 2.0}, "normalize": "running_minmax",
              "weight": {"schedule": "exponential", "start": 1.0, "rate": 0.99}},
    "lin": {"type": "linear", "params": {"scale": -2.0, "clip": [-3, 3]}, "inputs": {"value": "x"},
            "transforms": [{"scale": 0.5}, {"clip": [-1, 1]}],
            "weight": {"schedule": "step", "start": 1.0, "factor": 0.5, "every": 16}},
    "little": {"type": "littles_law_latency", "normalize": "return_std", "weight": -0.1},
    "grp": {"type": "group", "normalize": "running_zscore",
            "weight": {"schedule": "piecewise", "points": [[0, 1.0], [40, 0.5]]}, "components": {
                "ema": {"type": "ema_delta", "params": {"signal": "x"}},
                "pot": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "x"}},
                "info": {"type": "info_value", "params": {"key": "bonus", "default": 0.25}},
                "cv": {"type": "load_imbalance", "params": {"statistic": "cv"}}}},
    **{s: {"type": "load_imbalance", "params": {"statistic": s}, "weight": -0.1}
       for s in ("var", "std", "range", "max_over_mean")},
}, "total": {"transforms": [{"clip": [-50, 50]}]}}


def _contexts(seed: int, calls: int = 12) -> list[dict[str, Any]]:
    """NumPy float64 contexts; ``bonus`` only on even calls (the optional input comes and goes)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(calls):
        ctx = {"x": rng.normal(0, 2, N), "throughput": rng.uniform(0, 1, N), "latency": rng.uniform(0, 3, N),
               "in_system": rng.uniform(0, 10, N), "dt": rng.uniform(0.1, 1, N),
               "replica_loads": rng.uniform(0, 20, (N, 4))}
        if t % 2 == 0:
            ctx["bonus"] = rng.normal(size=N)
        out.append(ctx)
    return out


def _flags(seed: int, calls: int = 12) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed + 1)
    return [(rng.random(N) < 0.15, rng.random(N) < 0.1) for _ in range(calls)]


LIBRARIES: dict[str, Callable[[np.ndarray], Any]] = {
    "numpy": lambda a: np.array(a),
    "torch": lambda a: torch.from_numpy(np.array(a)),
    "jax": lambda a: jnp.asarray(a),
}
TEST_COMPONENTS: dict[str, type] = {}  # filled below; registered only while this module runs
TYPES = {"numpy": np.ndarray, "torch": torch.Tensor, "jax": jax.Array}


def _run(library: str, dtype: str, seed: int = 0) -> tuple[RewardComposer, list[dict[str, np.ndarray]], list[Any]]:
    """Play 12 calls with episode ends, a masked reset (a NumPy mask: moved to the library) at
    call 6 and a full reset at call 9; return the composer, each call's breakdown as NumPy and
    the raw totals."""
    convert = LIBRARIES[library]
    composer = RewardComposer.from_dict(ALL)
    breakdowns, totals = [], []
    for t, (ctx, (term, trunc)) in enumerate(zip(_contexts(seed), _flags(seed), strict=True)):
        if t == 6:
            composer.reset(np.arange(N) % 2 == 0)
        if t == 9:
            composer.reset()
        typed = {k: convert(v.astype(dtype)) for k, v in ctx.items()}
        out = composer(typed, terminated=convert(term), truncated=convert(trunc))
        totals.append(out.total)
        breakdowns.append({k: np.asarray(rewardkit.backend.to_numpy(v), dtype=np.float64)
                           for k, v in out.as_dict().items()})
    return composer, breakdowns, totals


@pytest.fixture(scope="module")
def reference() -> tuple[RewardComposer, list[dict[str, np.ndarray]], list[Any]]:
    return _run("numpy", "float64")


@pytest.mark.parametrize("library", HERE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_builtin_gives_numpys_numbers_in_each_library_and_dtype(library: str, dtype: str, reference) -> None:
    with jax.enable_x64(dtype == "float64"):
        composer, got, totals = _run(library, dtype)
    ref_composer, want, _ = reference
    tol = {"rtol": 1e-9, "atol": 1e-9} if dtype == "float64" else {"rtol": 2e-4, "atol": 2e-4}
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.keys() == w.keys()
        for key in w:
            np.testing.assert_allclose(g[key], w[key], **tol, err_msg=f"{library} {dtype} call {t}: {key}")
    for total in totals:  # the library's own arrays, in the inputs' dtype
        assert isinstance(total, TYPES[library]) and str(total.dtype).endswith(dtype), (type(total), total.dtype)
    # state lives in the inputs' library; state_dict() is plain numbers equal to NumPy's
    ema = composer.spec.nodes[5].children[0].component
    assert all(isinstance(a, TYPES[library]) and str(a.dtype).endswith(dtype) for a in ema._state.arrays.values())
    state, ref_state = composer.state_dict(), ref_composer.state_dict()
    json.dumps(state, allow_nan=False)
    _assert_state_close(state, ref_state, 1e-9 if dtype == "float64" else 2e-4)


def _assert_state_close(a: Any, b: Any, tol: float, path: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_state_close(a[k], b[k], tol, f"{path}.{k}")
    elif isinstance(a, list):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=path)
    elif isinstance(a, float):
        assert type(a) is float and abs(a - b) <= tol * max(1.0, abs(b)), (path, a, b)
    else:
        assert a == b, path


@pytest.mark.parametrize("source, target", [(a, b) for a, b in [("torch", "jax"), ("jax", "numpy"), ("numpy", "torch")]
                                            if a in HERE and b in HERE])
def test_state_saved_in_one_library_loads_and_continues_in_another(source: str, target: str) -> None:
    with jax.enable_x64(True):
        saved_from, _, _ = _run(source, "float64")
        state = json.loads(json.dumps(saved_from.state_dict()))
        restored = RewardComposer.from_dict(ALL)
        restored.load_state_dict(state)
        ctx, (term, trunc) = _contexts(5, 1)[0], _flags(5, 1)[0]
        a = saved_from({k: LIBRARIES[source](v) for k, v in ctx.items()}, terminated=LIBRARIES[source](term),
                       truncated=LIBRARIES[source](trunc))
        b = restored({k: LIBRARIES[target](v) for k, v in ctx.items()}, terminated=LIBRARIES[target](term),
                     truncated=LIBRARIES[target](trunc))
    assert isinstance(b.total, TYPES[target])
    np.testing.assert_allclose(rewardkit.backend.to_numpy(b.total), rewardkit.backend.to_numpy(a.total), rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in registered() if not get_component_class(n).text_inputs])
def test_property_checks_of_each_builtin_hold_in_torch_and_jax(name: str) -> None:
    """The declared promises through rewardkit.testing, plus one 'same numbers in <library>'
    promise per library: drawn parameters and inputs over the whole float64 range."""
    libraries = ("jax",) if JAX_HERE else ("torch",)
    checked = check_component(get_component_class(name), examples=8, libraries=libraries)
    assert checked[-1] == f"same numbers in {libraries[0]}"


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), library=st.sampled_from(HERE[1:]))
def test_composed_totals_agree_with_numpy_for_drawn_contexts(seed: int, library: str) -> None:
    with jax.enable_x64(True):
        _, got, _ = _run(library, "float64", seed)
    _, want, _ = _run("numpy", "float64", seed)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g["total"], w["total"], rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(not JAX_HERE, reason="a torch/JAX mix needs JAX: runs in the JAX process")
def test_a_mixed_library_context_is_a_located_error_and_changes_nothing() -> None:
    composer = RewardComposer.from_dict(ALL)
    ctx = _contexts(0, 1)[0]
    composer({k: torch.from_numpy(v) for k, v in ctx.items()})
    before = composer.state_dict()
    mixed = {k: torch.from_numpy(v) for k, v in ctx.items()}
    mixed["latency"] = jnp.asarray(ctx["latency"])
    with pytest.raises(InvalidInputError, match=r"mixes array libraries: key '\w+' is a torch array but key "
                                                r"'latency' is a jax array"):
        composer(mixed)
    assert composer.state_dict() == before


def test_non_finite_torch_inputs_raise_by_default_and_pass_with_check_inputs_false() -> None:
    ctx = {k: torch.from_numpy(v) for k, v in _contexts(0, 1)[0].items()}
    ctx["latency"] = ctx["latency"].clone()
    ctx["latency"][2] = float("nan")
    with pytest.raises(NonFiniteInputError, match="'latency'"):
        RewardComposer.from_dict(ALL)(ctx)
    unchecked = RewardComposer.from_dict(ALL, check_inputs=False)
    out = unchecked(ctx)  # no check, so no read-back: NaN flows through (as documented)
    assert torch.isnan(out.total[2]) and torch.isfinite(out.total[[0, 1, 3, 4, 5]]).all()


def test_torch_inputs_are_checked_like_numpy_ones() -> None:
    composer = RewardComposer.from_dict(ALL)
    ctx = {k: torch.from_numpy(v) for k, v in _contexts(0, 1)[0].items()}
    with pytest.raises(InvalidInputError, match="'latency'.*dtype torch.bool"):
        composer({**ctx, "latency": torch.ones(N, dtype=torch.bool)})
    with pytest.raises(InvalidInputError, match="'latency'.*expected 6 environments"):
        composer({**ctx, "latency": torch.ones(N + 1, dtype=torch.float64)})
    with pytest.raises(InvalidInputError, match="terminated: expected shape"):
        composer(ctx, terminated=torch.zeros(N + 1, dtype=torch.bool))
    out = composer({**ctx, "dt": torch.ones(N, dtype=torch.int64), "in_system": 3.0})  # ints and numbers go along
    assert out.total.dtype == torch.float64
    with pytest.raises(ValueError, match="'in_system'.*must be non-negative, got -1.0"):
        composer({**ctx, "in_system": -torch.ones(N, dtype=torch.float64)})


class Gap(BaseReward):
    """A third-party component written once for every library: |a - b| clipped to [0, limit]."""

    inputs = {"a": 0, "b": 0}
    params = {"limit": rewardkit.Param.positive(1.0, "largest value")}
    output_range = (0.0, 1.0)

    def compute(self, x, terminated, truncated):
        xp = rewardkit.array_namespace(x["a"])
        return xp.clip(xp.abs(x["a"] - x["b"]), 0.0, self.limit)


class NumpyOnly(BaseReward):
    """A third-party component that always answers in NumPy."""

    inputs = {"a": 0}

    def compute(self, x, terminated, truncated):
        return np.zeros(x["a"].shape[0])


TEST_COMPONENTS.update({"test_gap": Gap, "test_numpy_only": NumpyOnly})


@pytest.mark.parametrize("library", HERE)
def test_a_third_party_component_written_with_xp_runs_in_every_library(library: str) -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {"gap": {"type": "test_gap"}}})
    a, b = np.array([0.0, 0.5, 3.0]), np.array([0.25, 0.0, 0.0])
    out = composer({"a": LIBRARIES[library](a), "b": LIBRARIES[library](b)})
    assert isinstance(out.total, TYPES[library])
    np.testing.assert_allclose(rewardkit.backend.to_numpy(out.total), [0.25, 0.5, 1.0])


def test_a_third_party_numpy_result_for_torch_inputs_is_a_located_error() -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {"plain": {"type": "test_numpy_only"}}})
    assert isinstance(composer({"a": np.ones(3)}).total, np.ndarray)
    with pytest.raises(ComponentOutputError, match="plain: compute returned ndarray .* for torch inputs.*array_namespace"):
        composer({"a": torch.ones(3)})


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device on this machine; runs where torch.cuda.is_available()")
def test_on_a_gpu_outputs_and_state_stay_on_the_device() -> None:  # pragma: no cover - needs a GPU
    composer = RewardComposer.from_dict(ALL)
    for ctx, (term, trunc) in zip(_contexts(0), _flags(0), strict=True):
        out = composer({k: torch.from_numpy(v).cuda() for k, v in ctx.items()},
                       terminated=torch.from_numpy(term).cuda(), truncated=torch.from_numpy(trunc).cuda())
        assert out.total.is_cuda
    ema = composer.spec.nodes[5].children[0].component
    assert all(a.is_cuda for a in ema._state.arrays.values())
    _, want, _ = _run("numpy", "float64")
    np.testing.assert_allclose(out.total.cpu().numpy(), want[-1]["total"], rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(JAX_HERE, reason="this is the JAX process itself")
def test_jax_cases_in_a_process_of_their_own() -> None:
    """This module's cases again with JAX (CPU) among the libraries, in a fresh interpreter."""
    pytest.importorskip("jax", reason="JAX is the jax extra: pip install -e '.[jax]' (make installs it)")
    env = {**os.environ, "REWARDKIT_TEST_JAX": "1", "JAX_PLATFORMS": "cpu"}
    select = "(jax or mixed or drawn) and not their_own"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", select, __file__],
                            capture_output=True, text=True, env=env, timeout=600, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout and "skipped" not in result.stdout
