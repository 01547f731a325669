"""Normalizers: statistics against NumPy and hand loops, eval() freezing, state round trips."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import RewardComposer
from rewardkit.errors import ConfigError
from rewardkit.normalizers import NORMALIZERS, ReturnStd, RunningMeanStd, RunningMinMax, RunningZScore, make_normalizer

FAST = settings(max_examples=40, deadline=None)
value = st.floats(min_value=-100.0, max_value=100.0, allow_nan=False)
batches_st = st.lists(st.lists(value, min_size=1, max_size=5), min_size=1, max_size=12)


def norm(spec):
    return make_normalizer(spec, path="normalize")


# ---- running_zscore ---------------------------------------------------------------------------
@FAST
@given(batches=batches_st)
def test_zscore_moments_match_numpy_on_the_stream(batches):
    z = norm("running_zscore")
    seen: list[float] = []
    for batch in batches:
        x = np.array(batch)
        out = z(x, None, True)
        seen.extend(batch)
        mean, var = np.mean(seen), np.var(seen)
        assert z.moments.count == len(seen)
        assert z.moments.mean == pytest.approx(mean, rel=1e-9, abs=1e-9)
        assert z.moments.var == pytest.approx(var, rel=1e-7, abs=1e-7)
        np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-8), rtol=1e-6, atol=1e-6)


def test_zscore_hand_values():
    z = norm({"type": "running_zscore", "eps": 1e-8})
    assert z.scalar(3.0, False, True) == 0.0  # first value: mean 3, var 0
    out = z.scalar(5.0, False, True)  # mean 4, var 1
    assert out == pytest.approx(1.0 / math.sqrt(1 + 1e-8))
    assert z.moments.mean == 4.0


def test_zscore_clip():
    z = norm({"type": "running_zscore", "clip": 0.5})
    z(np.array([0.0, 1.0]), None, True)
    out = z(np.array([100.0, -100.0]), None, False)
    np.testing.assert_array_equal(out, [0.5, -0.5])
    assert z.scalar(100.0, False, False) == 0.5


@FAST
@given(values=st.lists(value, min_size=1, max_size=30))
def test_zscore_scalar_path_equals_array_path(values):
    a, b = norm("running_zscore"), norm("running_zscore")
    for v in values:
        assert a.scalar(v, False, True) == pytest.approx(float(b(np.array([v]), None, True)[0]), rel=1e-12, abs=1e-12)


# ---- running_minmax ---------------------------------------------------------------------------
def test_minmax_hand_values():
    m = norm("running_minmax")
    assert isinstance(m, RunningMinMax)
    assert m.scalar(1.0, False, True) == 0.0  # max == min
    assert m.scalar(3.0, False, True) == 1.0
    assert m.scalar(2.0, False, True) == 0.5
    assert m.scalar(5.0, False, False) == 2.0  # eval: stats frozen, not clipped
    assert (m.low, m.high) == (1.0, 3.0)
    np.testing.assert_array_equal(m(np.array([1.0, 2.0, 7.0]), None, True), [0.0, 1 / 6, 1.0])


def test_minmax_before_any_value_is_zero():
    m = norm("running_minmax")
    np.testing.assert_array_equal(m(np.array([4.0, -4.0]), None, False), [0.0, 0.0])


@FAST
@given(batches=batches_st)
def test_minmax_matches_numpy(batches):
    m = norm("running_minmax")
    seen: list[float] = []
    for batch in batches:
        seen.extend(batch)
        out = m(np.array(batch), None, True)
        low, high = min(seen), max(seen)
        expected = np.zeros(len(batch)) if high == low else (np.array(batch) - low) / (high - low)
        np.testing.assert_allclose(out, expected, rtol=1e-12)


# ---- return_std -----------------------------------------------------------------------------
PRIOR_COUNT = 1e-4  # Stable-Baselines3's RunningMeanStd: variance 1 weighted as 1e-4 observations


def pooled_var(history: list[float]) -> float:
    """Variance of ``history`` pooled with the prior (mean 0, variance 1, weight PRIOR_COUNT)."""
    h = np.asarray(history)
    weight = PRIOR_COUNT + h.size
    mean = h.sum() / weight
    return (PRIOR_COUNT * 1.0 + (h * h).sum()) / weight - mean * mean


def return_std_by_hand(rewards: np.ndarray, dones: np.ndarray, gamma: float, eps: float = 1e-8,
                       clip: float = 10.0) -> np.ndarray:
    """Reference loop: per-env discounted return, reset after done; divide by the pooled std of
    all returns so far, clip to [-clip, clip] (Stable-Baselines3's VecNormalize reward scaling)."""
    steps, n = rewards.shape
    g = np.zeros(n)
    history: list[float] = []
    out = np.zeros_like(rewards)
    for t in range(steps):
        for e in range(n):
            g[e] = g[e] * gamma + rewards[t, e]
        history.extend(g.tolist())
        out[t] = np.clip(rewards[t] / math.sqrt(pooled_var(history) + eps), -clip, clip)  # no mean subtracted
        for e in range(n):
            if dones[t, e]:
                g[e] = 0.0
    return out


@FAST
@given(seed=st.integers(0, 2**32 - 1), n_envs=st.integers(1, 4), steps=st.integers(1, 25),
       gamma=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
def test_return_std_matches_hand_loop(seed, n_envs, steps, gamma):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, n_envs)) * 3.0 - 1.0
    dones = rng.random((steps, n_envs)) < 0.2
    expected = return_std_by_hand(rewards, dones, gamma)
    r = norm({"type": "return_std", "gamma": gamma})
    got = np.array([r(rewards[t], dones[t], True) for t in range(steps)])
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
    if n_envs == 1:
        s = norm({"type": "return_std", "gamma": gamma})
        got_scalar = [s.scalar(float(rewards[t, 0]), bool(dones[t, 0]), True) for t in range(steps)]
        np.testing.assert_allclose(got_scalar, expected[:, 0], rtol=1e-7, atol=1e-9)


def test_return_std_keeps_sign_and_hand_values():
    r = norm({"type": "return_std", "gamma": 0.5, "clip": None})
    assert isinstance(r, ReturnStd)
    # returns: 2, then 2*0.5+2 = 3 (pooled with the prior: mean 0, variance 1, weight 1e-4)
    assert r.scalar(2.0, False, True) == pytest.approx(2.0 / math.sqrt(pooled_var([2.0]) + 1e-8))
    assert r.scalar(2.0, True, True) == pytest.approx(2.0 / math.sqrt(pooled_var([2.0, 3.0]) + 1e-8))
    # after done the return restarts: G = -1
    out = r.scalar(-1.0, False, True)
    assert out == pytest.approx(-1.0 / math.sqrt(pooled_var([2.0, 3.0, -1.0]) + 1e-8))
    assert out < 0


def test_return_std_starts_like_vecnormalize():
    """The first reward is divided by the prior-weighted spread and clipped at 10 (issue: -0.04 gave -405)."""
    r = norm({"type": "return_std"})
    assert r.clip == 10.0
    first = r.scalar(-0.04, False, True)
    assert first == pytest.approx(-0.04 / math.sqrt(pooled_var([-0.04]) + 1e-8))
    assert -10.0 <= first < 0
    assert norm({"type": "return_std"}).scalar(1e6, False, True) == 10.0  # clipped
    assert norm({"type": "return_std", "clip": None}).scalar(1e6, False, True) > 10.0


def test_running_mean_std_is_vecnormalize_statistics():
    """Batched and one-at-a-time updates give the pooled moments; state is plain floats."""
    rng = np.random.default_rng(3)
    data = rng.normal(2.0, 3.0, size=40)
    a, b = RunningMeanStd(), RunningMeanStd()
    a.update(data[:7])
    a.update(data[7:])
    for v in data:
        b.update_scalar(float(v))
    assert a.var == pytest.approx(pooled_var(list(data)), rel=1e-10)
    assert a.mean == pytest.approx(data.sum() / (len(data) + PRIOR_COUNT), rel=1e-12)
    assert a.count == pytest.approx(len(data) + PRIOR_COUNT)
    assert b.state_dict() == pytest.approx(a.state_dict(), rel=1e-10)
    assert all(type(v) is float for v in a.state_dict().values())
    a.update(np.array([]))  # an empty batch changes nothing
    assert a.count == pytest.approx(len(data) + PRIOR_COUNT)
    plain = RunningMeanStd(epsilon=0.0)
    plain.update(data)
    assert plain.var == pytest.approx(np.var(data), rel=1e-12) and plain.mean == pytest.approx(np.mean(data))
    c = RunningMeanStd()
    c.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert c.state_dict() == a.state_dict()
    for bad, where in [({"mean": 0.0, "var": -1.0, "count": 1.0}, "var"), ({"mean": "x", "var": 1.0, "count": 1.0}, "mean"),
                       ({"mean": 0.0, "var": 1.0}, "count"), ({"mean": math.nan, "var": 1.0, "count": 1.0}, "mean")]:
        with pytest.raises(ConfigError, match=f"rms.{where}"):
            c.load_state_dict(bad, "rms")
    assert c.state_dict() == a.state_dict()


# ---- eval() freezes statistics (through the composer) -----------------------------------------
NORMALIZED_CONFIG = {
    "version": 1,
    "components": {
        "x": {"type": "info_value", "params": {"key": "x"}, "normalize": None},
    },
}


@pytest.mark.parametrize("kind", sorted(NORMALIZERS))
@pytest.mark.parametrize("batched", [False, True])
def test_eval_mode_freezes_statistics(kind, batched):
    cfg = json.loads(json.dumps(NORMALIZED_CONFIG))
    cfg["components"]["x"]["normalize"] = kind
    c = RewardComposer.from_dict(cfg)
    rng = np.random.default_rng(0)

    def ctx():
        return {"x": rng.normal(size=3) if batched else float(rng.normal())}

    for _ in range(10):
        c(ctx())
    frozen = json.dumps(c.state_dict()["normalizers"])
    step = c.step
    c.eval()
    probe = ctx()
    first = c(probe).terms["x"].normalized
    for _ in range(5):
        c(ctx(), terminated=True)
    assert json.dumps(c.state_dict()["normalizers"]) == frozen
    assert c.step == step
    np.testing.assert_array_equal(c(probe).terms["x"].normalized, first)
    c.train()
    c({"x": np.full(3, 1e3) if batched else 1e3})
    assert json.dumps(c.state_dict()["normalizers"]) != frozen
    assert c.step > step


def test_eval_normalized_value_uses_frozen_statistics():
    cfg = json.loads(json.dumps(NORMALIZED_CONFIG))
    cfg["components"]["x"]["normalize"] = "running_zscore"
    c = RewardComposer.from_dict(cfg)
    for v in (1.0, 2.0, 3.0, 4.0):
        c({"x": v})
    c.eval()
    mean, var = 2.5, 1.25
    assert c({"x": 10.0}).terms["x"].normalized == pytest.approx((10.0 - mean) / math.sqrt(var + 1e-8))
    assert c({"x": 10.0}).terms["x"].normalized == pytest.approx((10.0 - mean) / math.sqrt(var + 1e-8))


# ---- state round trip -----------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["running_zscore", "running_minmax", {"type": "return_std", "gamma": 0.9},
                                  {"type": "running_zscore", "clip": 2.0}], ids=str)
def test_state_dict_round_trip_through_json(spec):
    rng = np.random.default_rng(1)
    a = norm(spec)
    for _ in range(7):
        a(rng.normal(size=4), rng.random(4) < 0.3, True)
    b = norm(spec)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for _ in range(5):
        x, done = rng.normal(size=4), rng.random(4) < 0.3
        np.testing.assert_array_equal(a(x, done, True), b(x, done, True))
    assert a.state_dict() == b.state_dict()


def test_minmax_fresh_state_survives_json():
    a = norm("running_minmax")
    b = norm("running_minmax")
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert (b.low, b.high) == (math.inf, -math.inf)


def test_reset_forgets_returns_but_keeps_statistics():
    r = norm({"type": "return_std", "gamma": 1.0})
    r(np.array([1.0, 2.0]), None, True)
    moments = dict(r.moments.state_dict())
    r.reset()
    assert r.returns is None
    assert r.moments.state_dict() == moments
    r(np.array([1.0, 1.0]), None, True)
    np.testing.assert_array_equal(r.returns, [1.0, 1.0])


# ---- construction -----------------------------------------------------------------------------
def test_make_normalizer_forms():
    assert make_normalizer(None, path="n") is None
    assert isinstance(norm("running_zscore"), RunningZScore)
    r = norm({"type": "return_std", "gamma": 0.5, "clip": 10})
    assert (r.gamma, r.clip, r.eps) == (0.5, 10.0, 1e-8)
    assert norm(r.to_spec()).to_spec() == r.to_spec()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("zscore", "normalize: expected one of running_zscore, running_minmax, return_std, got 'zscore'"),
        ({"type": ["x"]}, "normalize.type: expected one of running_zscore, running_minmax, return_std, got ['x']"),
        ({"gamma": 0.9}, "normalize.type: expected one of running_zscore, running_minmax, return_std, got None"),
        ({"type": "return_std", "gamma": 1.5}, "normalize.gamma: expected a number in [0, 1], got 1.5"),
        ({"type": "running_zscore", "eps": 0}, "normalize.eps: expected a positive number, got 0"),
        ({"type": "running_minmax", "eps": 1},
         "normalize: unknown parameter 'eps'; expected one of: none"),
        (3, "normalize: expected a normalizer name or a mapping with 'type', got 3"),
    ],
)
def test_normalizer_errors(spec, message):
    with pytest.raises(ConfigError) as info:
        norm(spec)
    assert str(info.value) == message
