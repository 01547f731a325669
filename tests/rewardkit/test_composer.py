"""RewardComposer: arithmetic of the breakdown, scalar vs batched paths, steps, state and errors."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import ConfigError, MissingInputError, NonFiniteInputError, RewardComposer
from rewardkit.config import GroupNode

PRESET_DIR = Path(__file__).resolve().parents[2] / "configs" / "rewards"
PRESETS = sorted(p.name for p in PRESET_DIR.glob("*.yaml"))
FAST = settings(max_examples=25, deadline=None)


def make_vidur_context(rng: np.random.Generator, n_envs: int | None, n_replicas: int = 3) -> dict[str, Any]:
    """Every signal the presets read: floats (``n_envs=None``) or arrays with a leading env axis."""
    shape: tuple[int, ...] = () if n_envs is None else (n_envs,)
    ctx = {
        "throughput": rng.uniform(0.0, 0.2, shape),
        "latency": rng.uniform(0.0, 15.0, shape),
        "replica_loads": rng.uniform(0.0, 10.0, shape + (n_replicas,)),
        "in_system": rng.uniform(0.0, 50.0, shape),
        "dt": rng.uniform(0.01, 2.0, shape),
    }
    for key in sorted(_PRESET_KEYS - set(ctx)):  # other env signals a preset reads: non-negative floats
        ctx[key] = rng.uniform(0.0, 20.0, shape)
    if n_envs is None:
        return {k: (v if k == "replica_loads" else float(v)) for k, v in ctx.items()}
    return ctx


_PRESET_KEYS = set().union(*(RewardComposer.from_yaml(PRESET_DIR / name).context_keys() for name in PRESETS))


def preset(name: str, **kwargs: Any) -> RewardComposer:
    return RewardComposer.from_yaml(PRESET_DIR / name, **kwargs)


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# A config exercising groups, schedules, normalizers, transforms, remapped inputs and state.
RICH: dict[str, Any] = {
    "version": 1,
    "description": "every feature at once",
    "components": {
        "perf": {
            "type": "group",
            "weight": {"schedule": "linear", "start": 1.0, "end": 0.5, "steps": 20},
            "normalize": "running_zscore",
            "transforms": [{"clip": [-3, 3]}],
            "components": {
                "tp": {"type": "throughput_sigmoid", "params": {"target": 0.1, "scale": 0.05}, "weight": 0.4},
                "lat": {"type": "logistic_latency", "params": {"threshold": 6.0, "sigma": 2.0}, "weight": -0.6,
                        "transforms": [{"scale": 2.0}]},
            },
        },
        "shaping": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "in_system"},
                    "normalize": {"type": "return_std", "gamma": 0.9}},
        "delta": {"type": "ema_delta", "params": {"signal": "latency", "ema_alpha": 0.3},
                  "weight": {"schedule": "cosine", "start": 0.0, "end": -0.2, "steps": 15}},
        "load": {"type": "load_imbalance", "params": {"statistic": "std"}, "weight": -0.1,
                 "normalize": "running_minmax"},
    },
    "total": {"transforms": ["tanh"]},
}


def without_normalizers(cfg: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``cfg`` with every ``normalize`` removed (normalizer statistics are shared by envs)."""
    out = copy.deepcopy(cfg)

    def strip(components: dict[str, Any]) -> None:
        for entry in components.values():
            entry.pop("normalize", None)
            if entry.get("type") == "group":
                strip(entry["components"])

    strip(out["components"])
    return out


def has_normalizer(c: RewardComposer) -> bool:
    return bool(c.state_dict()["normalizers"])


# ---- structure and hand-computed values ----------------------------------------------------------
def test_group_names_are_nested_with_slashes():
    c = preset("vidur_hybrid.yaml")
    assert c.term_names == ("absolute", "absolute/throughput", "absolute/latency", "absolute/logistic",
                            "delta", "load_balance")
    assert c.context_keys() == {"throughput", "latency", "replica_loads"}
    assert isinstance(c.spec.nodes[0], GroupNode)


def hybrid_by_hand(tp: float, lat: float, loads: list[float], delta: float) -> dict[str, float]:
    t = sigmoid((tp - 0.05) / 0.05)
    pen = max(0.0, lat - 6.0) * 1.0
    lg = sigmoid((lat - 6.0) / 2.0)
    group = 0.1 * t - 0.9 * pen - 0.5 * lg
    cv = float(np.std(loads) / np.mean(loads))
    return {"throughput": t, "latency": pen, "logistic": lg, "group": group, "cv": cv,
            "total": 0.8 * group + 0.2 * delta - 0.15 * cv}


@pytest.mark.parametrize("batched", [False, True])
def test_hybrid_preset_by_hand(batched):
    c = preset("vidur_hybrid.yaml")

    def call(tp: float, lat: float, loads: list[float]):
        if batched:
            return c({"throughput": np.array([tp]), "latency": np.array([lat]), "replica_loads": np.array([loads])})
        return c({"throughput": tp, "latency": lat, "replica_loads": loads})

    def scalar(x):
        return float(np.asarray(x).reshape(-1)[0])

    # call 1: the delta's first call of an episode is 0
    out = call(0.08, 7.5, [1.0, 2.0, 3.0])
    want = hybrid_by_hand(0.08, 7.5, [1.0, 2.0, 3.0], 0.0)
    terms = out.terms
    assert scalar(terms["absolute/throughput"].raw) == pytest.approx(want["throughput"], rel=1e-12)
    assert scalar(terms["absolute/throughput"].contribution) == pytest.approx(0.1 * want["throughput"], rel=1e-12)
    assert scalar(terms["absolute/latency"].raw) == pytest.approx(1.5, rel=1e-12)
    assert scalar(terms["absolute/latency"].contribution) == pytest.approx(-1.35, rel=1e-12)
    assert scalar(terms["absolute/logistic"].raw) == pytest.approx(want["logistic"], rel=1e-12)
    assert scalar(terms["absolute"].raw) == pytest.approx(want["group"], rel=1e-12)
    assert scalar(terms["absolute"].weight) == 0.8
    assert scalar(terms["delta"].raw) == 0.0
    assert scalar(terms["load_balance"].raw) == pytest.approx(math.sqrt(2 / 3) / 2, rel=1e-12)
    assert scalar(out.total) == pytest.approx(want["total"], rel=1e-12)
    # call 2: the EMA has not varied yet (var 0), so the delta is still 0
    out = call(0.12, 3.0, [2.0, 2.0, 2.0])
    assert scalar(out.terms["delta"].raw) == 0.0
    assert scalar(out.terms["load_balance"].raw) == 0.0
    assert scalar(out.terms["absolute/latency"].raw) == 0.0
    # call 3: mean = 0.9*0.08 + 0.1*0.12 = 0.084, var = 0.1 * 0.04**2 = 1.6e-4
    out = call(0.1, 6.0, [0.0, 4.0])
    delta = (0.1 - 0.084) / (math.sqrt(1.6e-4) + 1e-8)
    assert scalar(out.terms["delta"].raw) == pytest.approx(delta, rel=1e-9)
    want = hybrid_by_hand(0.1, 6.0, [0.0, 4.0], delta)
    assert scalar(out.terms["absolute/logistic"].raw) == 0.5
    assert scalar(out.total) == pytest.approx(want["total"], rel=1e-9)


def test_littles_law_preset_by_hand():
    """return_std divides by the std of the discounted return pooled with VecNormalize's prior
    (mean 0, variance 1, weight 1e-4), then clips to [-10, 10]."""

    def pooled_var(history: list[float]) -> float:
        h = np.asarray(history)
        weight = 1e-4 + h.size
        return (1e-4 + (h * h).sum()) / weight - (h.sum() / weight) ** 2

    c = preset("vidur_littles_law.yaml")
    out = c({"in_system": 4.0, "dt": 0.5})
    assert out.terms["time_in_system"].raw == 2.0
    # the normalizer sees raw 2.0 (the weight is applied after normalizing); one return: var ~1e-4
    assert out.terms["time_in_system"].normalized == min(10.0, 2.0 / math.sqrt(pooled_var([2.0]) + 1e-8)) == 10.0
    assert out.total == -10.0
    out = c({"in_system": 1.0, "dt": 1.0})
    returns = [2.0, 0.99 * 2.0 + 1.0]
    assert out.total == pytest.approx(-1.0 / math.sqrt(pooled_var(returns) + 1e-8))


def test_total_transforms_apply_to_the_sum_only():
    cfg = {"version": 1, "components": {
        "a": {"type": "info_value", "params": {"key": "a"}, "weight": 2.0},
        "b": {"type": "info_value", "params": {"key": "b"}, "weight": -1.0, "transforms": [{"clip": [None, 1]}]},
    }, "total": {"transforms": [{"scale": 0.5}, {"clip": [-1, 1]}]}}
    c = RewardComposer.from_dict(cfg)
    out = c({"a": 3.0, "b": 5.0})
    assert out.terms["a"].contribution == 6.0
    assert out.terms["b"].raw == 5.0
    assert out.terms["b"].normalized == 1.0
    assert out.terms["b"].contribution == -1.0
    assert out.total == 1.0  # clip(0.5 * (6 - 1)) = clip(2.5)
    out = c({"a": 0.5, "b": 0.25})
    assert out.total == pytest.approx(0.5 * (1.0 - 0.25))


def test_normalize_then_transforms_then_weight():
    cfg = {"version": 1, "components": {
        "a": {"type": "info_value", "params": {"key": "a"}, "weight": 3.0, "normalize": "running_minmax",
              "transforms": [{"scale": 4.0}, "tanh"]},
    }}
    c = RewardComposer.from_dict(cfg)
    c({"a": 0.0})
    out = c({"a": 10.0})
    c({"a": 5.0})
    out = c({"a": 5.0})
    t = out.terms["a"]
    assert t.raw == 5.0
    assert t.normalized == pytest.approx(math.tanh(4.0 * 0.5))
    assert t.contribution == pytest.approx(3.0 * math.tanh(2.0))
    assert out.as_dict() == {"a/raw": t.raw, "a/normalized": t.normalized, "a/weight": 3.0,
                             "a/contribution": t.contribution, "total": out.total}


# ---- breakdown adds up ---------------------------------------------------------------------------
def check_breakdown(c: RewardComposer, out: Any) -> None:
    terms = out.terms
    top = [n.name for n in c.spec.nodes]
    np.testing.assert_allclose(sum(terms[name].contribution for name in top), out.total, rtol=1e-12, atol=1e-12)
    for node in c.plan.order:  # every group: raw == sum of its children's contributions
        t = terms[node.name]
        np.testing.assert_allclose(t.contribution, t.weight * t.normalized, rtol=1e-12, atol=1e-12)
        if isinstance(node, GroupNode):
            children = sum(terms[child.name].contribution for child in node.children)
            np.testing.assert_allclose(t.raw, children, rtol=1e-12, atol=1e-12)
        if node.normalizer is None and not node.transforms:
            np.testing.assert_array_equal(t.normalized, t.raw)


@FAST
@given(name=st.sampled_from(PRESETS + ["rich"]), seed=st.integers(0, 2**32 - 1),
       n_envs=st.sampled_from([None, 1, 4]), calls=st.integers(1, 4))
def test_breakdown_adds_up(name, seed, n_envs, calls):
    if name == "rich":
        cfg = copy.deepcopy(RICH)
        del cfg["total"]
        c = RewardComposer.from_dict(cfg)
    else:
        c = preset(name)
    rng = np.random.default_rng(seed)
    for _ in range(calls):
        out = c(make_vidur_context(rng, n_envs), terminated=bool(rng.random() < 0.3))
        check_breakdown(c, out)


def test_breakdown_with_total_transform_differs_from_sum():
    c = RewardComposer.from_dict(RICH)
    out = c(make_vidur_context(np.random.default_rng(0), None))
    top = sum(out.terms[n].contribution for n in ("perf", "shaping", "delta", "load"))
    assert out.total == pytest.approx(math.tanh(top))


# ---- batched == loop of scalar calls -------------------------------------------------------------
def env_slice(ctx: dict[str, np.ndarray], e: int) -> dict[str, Any]:
    return {k: (float(v[e]) if v.ndim == 1 else v[e]) for k, v in ctx.items()}


def compare_batched_with_scalar_loop(make: Any, n_envs: int, steps: int, seed: int, only_raw: bool) -> None:
    """Run one batched composer and ``n_envs`` scalar ones on the same stream; compare everything."""
    rng = np.random.default_rng(seed)
    batched = make()
    singles = [make() for _ in range(n_envs)]
    for t in range(steps):
        ctx = make_vidur_context(rng, n_envs)
        term = rng.random(n_envs) < 0.15
        trunc = rng.random(n_envs) < 0.15
        out = batched(ctx, step=t, terminated=term, truncated=trunc)
        flat = out.as_dict()
        for key, value in flat.items():
            assert isinstance(value, np.ndarray) and value.shape == (n_envs,), key
        for e, single in enumerate(singles):
            one = single(env_slice(ctx, e), step=t, terminated=bool(term[e]), truncated=bool(trunc[e])).as_dict()
            assert one.keys() == flat.keys()
            for key, value in one.items():
                assert isinstance(value, float), key
                if only_raw and not key.endswith("/raw"):
                    continue
                assert value == pytest.approx(float(flat[key][e]), rel=1e-9, abs=1e-12), (t, e, key)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_batched_equals_scalar_loop(name):
    has_norm = has_normalizer(preset(name))
    # one env: normalizer statistics are the same on both paths, so everything must agree
    compare_batched_with_scalar_loop(lambda: preset(name), 1, 30, seed=11, only_raw=False)
    # several envs share one normalizer's statistics, so with a normalizer only raw terms agree
    compare_batched_with_scalar_loop(lambda: preset(name), 4, 30, seed=12, only_raw=has_norm)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_without_normalizers_batched_equals_scalar_loop(name):
    cfg = without_normalizers(preset(name).to_dict())
    compare_batched_with_scalar_loop(lambda: RewardComposer.from_dict(cfg), 3, 25, seed=5, only_raw=False)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n_envs=st.integers(1, 5))
def test_rich_config_batched_equals_scalar_loop(seed, n_envs):
    cfg = without_normalizers(RICH)
    compare_batched_with_scalar_loop(lambda: RewardComposer.from_dict(cfg), n_envs, 12, seed, only_raw=False)
    compare_batched_with_scalar_loop(lambda: RewardComposer.from_dict(RICH), n_envs, 12, seed,
                                     only_raw=n_envs > 1)


@pytest.mark.parametrize("name", PRESETS + ["rich"])
def test_scalar_and_single_env_batched_calls_can_alternate(name):
    """State kept by the scalar path carries over to a (1,)-batched call and back."""
    def make() -> RewardComposer:
        return RewardComposer.from_dict(RICH) if name == "rich" else preset(name)

    rng = np.random.default_rng(21)
    plain, mixed = make(), make()
    for t in range(24):
        ctx = make_vidur_context(rng, None)
        done = bool(rng.random() < 0.2)
        want = plain(ctx, terminated=done)
        if t % 3 == 1:
            got = mixed({k: np.asarray(v)[None] for k, v in ctx.items()}, terminated=np.array([done]))
        else:
            got = mixed(ctx, terminated=done)
        assert mixed.step == plain.step == t + 1
        for key, value in want.as_dict().items():
            assert float(np.asarray(got.as_dict()[key]).reshape(-1)[0]) == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_stateful_reset_mid_way_only_affects_that_env():
    c = preset("vidur_delta.yaml")
    rng = np.random.default_rng(3)
    for _ in range(5):
        c(make_vidur_context(rng, 3))
    c(make_vidur_context(rng, 3), terminated=np.array([False, True, False]))
    out = c(make_vidur_context(rng, 3))
    # env 1 starts a new episode: its first delta is 0; the others keep their history
    assert out.terms["throughput_delta"].raw[1] == 0.0
    assert out.terms["latency_delta"].raw[1] == 0.0
    assert np.all(out.terms["throughput_delta"].raw[[0, 2]] != 0.0)


def test_batched_outputs_have_the_env_axis():
    c = RewardComposer.from_dict(RICH)
    out = c(make_vidur_context(np.random.default_rng(0), 5))
    assert out.total.shape == (5,)
    for name, t in out.terms.items():
        for field in ("raw", "normalized", "weight", "contribution"):
            assert np.shape(getattr(t, field)) == (5,), (name, field)
    scalar = RewardComposer.from_dict(RICH)(make_vidur_context(np.random.default_rng(0), None))
    assert isinstance(scalar.total, float)
    assert all(isinstance(v, float) for v in scalar.as_dict().values())


def test_flags_shape_must_match_batch():
    c = preset("vidur_delta.yaml")
    with pytest.raises(ValueError, match=r"terminated: expected shape \(3,\)"):
        c(make_vidur_context(np.random.default_rng(0), 3), terminated=np.array([True, False]))


# ---- steps and scheduled weights -----------------------------------------------------------------
SCHEDULED = {"version": 1, "components": {
    "x": {"type": "info_value", "params": {"key": "x"},
          "weight": {"schedule": "linear", "start": 1.0, "end": 0.0, "steps": 10}},
}}


@pytest.mark.parametrize("batched_first", [False, True])
def test_step_counting_and_scheduled_weights(batched_first):
    c = RewardComposer.from_dict(SCHEDULED)
    assert c.step == 0
    if batched_first:
        out = c({"x": np.ones(4)})
        np.testing.assert_array_equal(out.terms["x"].weight, np.full(4, 1.0))
        assert c.step == 4
        out = c({"x": 2.0})
        assert out.terms["x"].weight == pytest.approx(0.6)
        assert out.total == pytest.approx(1.2)
        assert c.step == 5
    else:
        assert c({"x": 1.0}).terms["x"].weight == 1.0
        assert c({"x": 1.0}).terms["x"].weight == pytest.approx(0.9)
        assert c.step == 2
        out = c({"x": np.full(3, 2.0)})  # all envs share the current step's weight
        np.testing.assert_allclose(out.terms["x"].weight, [0.8, 0.8, 0.8])
        np.testing.assert_allclose(out.total, [1.6, 1.6, 1.6])
        assert c.step == 5
    # eval: the counter is frozen
    c.eval()
    w = c({"x": 1.0}).terms["x"].weight
    assert c({"x": 1.0}).terms["x"].weight == w
    c({"x": np.ones(8)})
    assert c.step == 5
    # an explicit step sets the weight; in eval it does not move the counter
    assert c({"x": 1.0}, step=8).terms["x"].weight == pytest.approx(0.2)
    assert c.step == 5
    c.train()
    assert c({"x": 1.0}, step=100).terms["x"].weight == 0.0
    assert c.step == 101
    c({"x": np.ones(2)}, step=3)
    assert c.step == 5


def test_scheduled_weight_scalar_and_batched_agree_over_steps():
    cfg = {"version": 1, "components": {
        "x": {"type": "info_value", "params": {"key": "x"},
              "weight": {"schedule": "linear", "start": 0.3, "end": 2.0, "steps": 7, "start_step": 3}},
        "y": {"type": "info_value", "params": {"key": "y"},
              "weight": {"schedule": "step", "start": 1.0, "factor": -0.5, "every": 4}},
    }}
    a, b = RewardComposer.from_dict(cfg), RewardComposer.from_dict(cfg)
    for step in range(20):
        sa = a({"x": 1.0, "y": 1.0}, step=step)
        sb = b({"x": np.ones(2), "y": np.ones(2)}, step=step)
        assert sa.terms["x"].weight == a.shaper.weight("x", step) == sb.terms["x"].weight[0]
        assert sa.terms["y"].weight == a.shaper.weight("y", step) == sb.terms["y"].weight[1]
        assert sa.total == sb.total[0]


def test_set_weight_changes_the_output():
    c = preset("vidur_hybrid.yaml")
    ctx = {"throughput": 0.08, "latency": 7.5, "replica_loads": [1.0, 2.0, 3.0]}
    before = c(ctx, step=0)
    c.reset()
    c.shaper.set_weight("load_balance", -1.0)
    after = c(ctx, step=0)
    lb = before.terms["load_balance"].raw
    assert after.terms["load_balance"].weight == -1.0
    assert after.total == pytest.approx(before.total + 0.15 * lb - lb)
    batched = c({k: np.array([v]) for k, v in ctx.items()}, step=0)
    assert batched.terms["load_balance"].weight[0] == -1.0
    c.shaper.set_weight("absolute/latency", {"schedule": "linear", "start": 0.0, "end": -1.0, "steps": 10})
    c.reset()
    assert c(ctx, step=5).terms["absolute/latency"].weight == pytest.approx(-0.5)
    c.reset()
    assert c({k: np.array([v, v]) for k, v in ctx.items()}, step=5).terms["absolute/latency"].weight[1] == \
        pytest.approx(-0.5)
    with pytest.raises(KeyError, match="no term named 'nope'"):
        c.shaper.set_weight("nope", 1.0)


# ---- independence of same-type components -------------------------------------------------------
def test_two_ema_deltas_on_different_signals_are_independent():
    both = RewardComposer.from_dict({"version": 1, "components": {
        "d_tp": {"type": "ema_delta", "params": {"signal": "throughput", "ema_alpha": 0.2}},
        "d_lat": {"type": "ema_delta", "params": {"signal": "latency", "ema_alpha": 0.5}},
    }})
    only_tp = RewardComposer.from_dict({"version": 1, "components": {
        "d_tp": {"type": "ema_delta", "params": {"signal": "throughput", "ema_alpha": 0.2}}}})
    only_lat = RewardComposer.from_dict({"version": 1, "components": {
        "d_lat": {"type": "ema_delta", "params": {"signal": "latency", "ema_alpha": 0.5}}}})
    rng = np.random.default_rng(9)
    for t in range(20):
        ctx = make_vidur_context(rng, None)
        out = both(ctx)
        assert out.terms["d_tp"].raw == only_tp(ctx).terms["d_tp"].raw
        assert out.terms["d_lat"].raw == only_lat(ctx).terms["d_lat"].raw
        if t > 2:
            assert out.terms["d_tp"].raw != out.terms["d_lat"].raw


@pytest.mark.parametrize("batched", [False, True])
def test_two_potential_shapings_are_independent(batched):
    both = RewardComposer.from_dict({"version": 1, "components": {
        "a": {"type": "potential_shaping", "params": {"gamma": 0.9}, "inputs": {"potential": "phi_a"}},
        "b": {"type": "potential_shaping", "params": {"gamma": 0.5}, "inputs": {"potential": "phi_b"}},
    }})
    assert both.context_keys() == {"phi_a", "phi_b"}
    rng = np.random.default_rng(2)
    n = 3 if batched else None
    prev_a = prev_b = None
    for t in range(6):
        pa = rng.normal(size=n) if batched else float(rng.normal())
        pb = rng.normal(size=n) if batched else float(rng.normal())
        out = both({"phi_a": pa, "phi_b": pb})
        if t == 0:
            np.testing.assert_array_equal(out.terms["a"].raw, np.zeros(n) if batched else 0.0)
        else:
            np.testing.assert_allclose(out.terms["a"].raw, 0.9 * np.asarray(pa) - prev_a, rtol=1e-12)
            np.testing.assert_allclose(out.terms["b"].raw, 0.5 * np.asarray(pb) - prev_b, rtol=1e-12)
        prev_a, prev_b = np.asarray(pa), np.asarray(pb)


# ---- state and config round trips ----------------------------------------------------------------
@pytest.mark.parametrize("name", PRESETS + ["rich"])
@pytest.mark.parametrize("n_envs", [None, 3])
def test_state_dict_json_round_trip(name, n_envs):
    def make() -> RewardComposer:
        return RewardComposer.from_dict(RICH) if name == "rich" else preset(name)

    rng = np.random.default_rng(4)
    a = make()
    for _ in range(9):
        flags = (rng.random(n_envs) < 0.2) if n_envs else bool(rng.random() < 0.2)
        a(make_vidur_context(rng, n_envs), terminated=flags)
    state = json.loads(json.dumps(a.state_dict()))
    b = make()
    b.load_state_dict(state)
    assert b.step == a.step
    assert b.state_dict() == a.state_dict()
    for _ in range(6):
        ctx = make_vidur_context(rng, n_envs)
        flags = (rng.random(n_envs) < 0.3) if n_envs else bool(rng.random() < 0.3)
        oa, ob = a(ctx, truncated=flags).as_dict(), b(ctx, truncated=flags).as_dict()
        assert oa.keys() == ob.keys()
        for key in oa:
            np.testing.assert_array_equal(oa[key], ob[key], err_msg=key)


def test_state_dict_round_trip_of_a_fresh_composer_matters():
    """A loaded state really replaces history: a fresh composer differs from a trained one."""
    rng = np.random.default_rng(8)
    trained = preset("vidur_delta.yaml")
    for _ in range(5):
        trained(make_vidur_context(rng, None))
    ctx = make_vidur_context(rng, None)
    restored = preset("vidur_delta.yaml")
    restored.load_state_dict(json.loads(json.dumps(trained.state_dict())))
    assert restored(ctx).total == trained(ctx).total
    assert preset("vidur_delta.yaml")(ctx).terms["throughput_delta"].raw == 0.0


@pytest.mark.parametrize("name", PRESETS + ["rich"])
def test_to_dict_round_trip(name):
    a = RewardComposer.from_dict(RICH) if name == "rich" else preset(name)
    d = a.to_dict()
    assert json.loads(json.dumps(d)) == d
    b = RewardComposer.from_dict(d)
    assert b.to_dict() == d
    assert b.term_names == a.term_names
    rng = np.random.default_rng(6)
    for n_envs in (None, 2):
        a.reset()
        b.reset()
        for _ in range(8):
            ctx = make_vidur_context(rng, n_envs)
            oa, ob = a(ctx).as_dict(), b(ctx).as_dict()
            for key in oa:
                np.testing.assert_array_equal(oa[key], ob[key], err_msg=key)


def test_to_dict_keeps_schedules_remaps_and_description():
    d = RewardComposer.from_dict(RICH).to_dict()
    assert d["description"] == "every feature at once"
    assert d["components"]["perf"]["weight"] == {"schedule": "linear", "start": 1.0, "end": 0.5, "steps": 20.0,
                                                 "start_step": 0.0}
    assert d["components"]["shaping"]["inputs"] == {"potential": "in_system"}
    assert d["components"]["load"]["weight"] == -0.1
    assert d["total"] == {"transforms": ["tanh"]}


# ---- bad inputs -----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_inputs_raise_by_default(bad):
    c = preset("vidur_hybrid.yaml")
    ctx = {"throughput": 0.1, "latency": bad, "replica_loads": [1.0, 2.0]}
    with pytest.raises(NonFiniteInputError, match="context key 'latency'.*absolute/latency.*allow_nonfinite"):
        c(ctx)
    with pytest.raises(NonFiniteInputError, match="'latency'"):
        c({"throughput": np.array([0.1, 0.2]), "latency": np.array([1.0, bad]), "replica_loads": np.ones((2, 2))})
    with pytest.raises(NonFiniteInputError, match="'replica_loads'"):
        c({"throughput": 0.1, "latency": 1.0, "replica_loads": [1.0, bad]})
    with pytest.raises(NonFiniteInputError, match="'replica_loads'"):
        c({"throughput": np.zeros(2), "latency": np.zeros(2), "replica_loads": np.array([[1.0, 1.0], [bad, 1.0]])})
    assert c.step == 0


def test_nonfinite_inputs_pass_when_allowed():
    c = preset("vidur_instant.yaml", allow_nonfinite=True)
    out = c({"throughput": 0.1, "latency": math.nan, "replica_loads": [1.0, 2.0]})
    assert math.isnan(out.total)
    out = c({"throughput": np.array([0.1, math.inf]), "latency": np.array([1.0, 2.0]),
             "replica_loads": np.ones((2, 2))})
    assert np.isfinite(out.total[0])
    assert out.terms["throughput"].raw[1] == 1.0


@pytest.mark.parametrize("batched", [False, True])
def test_missing_context_key_names_the_component(batched):
    c = preset("vidur_hybrid.yaml")
    ctx: dict[str, Any] = {"throughput": 0.1, "replica_loads": [1.0, 2.0]}
    if batched:
        ctx = {"throughput": np.array([0.1, 0.2]), "replica_loads": np.ones((2, 2))}
    with pytest.raises(MissingInputError) as info:
        c(ctx)
    msg = str(info.value)
    assert "vidur_hybrid.yaml: context is missing key 'latency', needed by absolute/latency (input 'latency'), " \
           "absolute/logistic (input 'latency'); context has: replica_loads, throughput" in msg
    assert isinstance(info.value, KeyError)


def test_inputs_remapping_reads_the_mapped_key():
    c = RewardComposer.from_dict({"version": 1, "components": {
        "lat": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "inputs": {"latency": "p99_latency"}},
    }})
    assert c.context_keys() == {"p99_latency"}
    assert c({"p99_latency": 3.0, "latency": 100.0}).total == 2.0
    np.testing.assert_array_equal(c({"p99_latency": np.array([0.0, 4.0])}).total, [0.0, 3.0])
    with pytest.raises(MissingInputError, match="missing key 'p99_latency', needed by lat"):
        c({"latency": 3.0})


def test_step_does_not_advance_on_error():
    c = preset("vidur_instant.yaml")
    with pytest.raises(MissingInputError):
        c({"throughput": 1.0})
    assert c.step == 0


def test_changing_batch_size_needs_reset():
    c = preset("vidur_delta.yaml")
    rng = np.random.default_rng(0)
    c(make_vidur_context(rng, 3))
    with pytest.raises(ValueError, match="batch size changed from 3 to 2; call reset()"):
        c(make_vidur_context(rng, 2))
    c.reset()
    out = c(make_vidur_context(rng, 2))
    np.testing.assert_array_equal(out.terms["throughput_delta"].raw, [0.0, 0.0])  # new episodes
    assert c.step == 5


def test_reset_starts_episodes_but_keeps_statistics_and_step():
    c = RewardComposer.from_dict(RICH)
    rng = np.random.default_rng(1)
    for _ in range(4):
        c(make_vidur_context(rng, None))
    before = c.state_dict()
    c.reset()
    after = c.state_dict()
    assert after["step"] == before["step"] == 4
    assert after["normalizers"]["perf"] == before["normalizers"]["perf"]
    assert after["normalizers"]["shaping"]["moments"] == before["normalizers"]["shaping"]["moments"]
    assert after["normalizers"]["shaping"]["returns"] is None
    out = c(make_vidur_context(rng, None))
    assert out.terms["shaping"].raw == 0.0 and out.terms["delta"].raw == 0.0


def test_load_state_dict_refuses_foreign_names():
    c = preset("vidur_hybrid.yaml")
    good = c.state_dict()
    with pytest.raises(ConfigError, match="state_dict: components.nope: unknown name"):
        c.load_state_dict({**good, "components": {"nope": {}}})
    with pytest.raises(ConfigError, match="state_dict: components.absolute: unknown name"):
        c.load_state_dict({**good, "components": {"absolute": {}}})
    with pytest.raises(ConfigError, match="state_dict: normalizers.delta: unknown name"):
        c.load_state_dict({**good, "normalizers": {"delta": {}}})


def test_set_weight_rejects_a_bad_spec_and_keeps_the_old_weight():
    c = preset("vidur_hybrid.yaml")
    ctx = {"throughput": 0.08, "latency": 7.5, "replica_loads": [1.0, 2.0, 3.0]}
    with pytest.raises(ConfigError) as info:
        c.shaper.set_weight("absolute/latency", {"schedule": "linear", "start": 1.0})
    assert str(info.value) == "components.absolute.components.latency.weight.end: missing required parameter " \
                              "(a finite number)"
    with pytest.raises(ConfigError) as info:
        c.shaper.set_weight("delta", "big")
    assert str(info.value) == "components.delta.weight: expected a number or a mapping with 'schedule', got 'big'"
    assert c.shaper.weights(0) == {"absolute": 0.8, "absolute/throughput": 0.1, "absolute/latency": -0.9,
                                   "absolute/logistic": -0.5, "delta": 0.2, "load_balance": -0.15}
    assert c(ctx).terms["absolute/latency"].weight == -0.9
    assert c.shaper.is_constant("delta")
    c.shaper.set_weight("delta", {"schedule": "step", "start": 1.0, "factor": 0.5, "every": 2})
    assert not c.shaper.is_constant("delta")
    assert c(ctx, step=4).terms["delta"].weight == 0.25


def test_masked_reset_clears_only_the_chosen_environments() -> None:
    """reset(mask) restarts episodes where the mask is true: stateful terms and return_std returns."""
    config = {"version": 1, "components": {
        "delta": {"type": "ema_delta", "params": {"signal": "x"}},
        "scaled": {"type": "linear", "inputs": {"value": "x"}, "normalize": {"type": "return_std", "gamma": 0.9}},
    }}
    c = RewardComposer.from_dict(config)
    c({"x": np.array([1.0, 2.0, 3.0])})
    c({"x": np.array([2.0, 4.0, 5.0])})
    returns_before = c.spec.nodes[1].normalizer.returns.copy()
    c.reset(np.array([False, True, False]))
    returns = c.spec.nodes[1].normalizer.returns
    assert returns[1] == 0.0 and returns[0] == returns_before[0] and returns[2] == returns_before[2]
    out = c({"x": np.array([3.0, 9.0, 7.0])})
    assert out.terms["delta"].raw[1] == 0.0  # env 1 is on the first step of a new episode
    assert out.terms["delta"].raw[0] != 0.0 and out.terms["delta"].raw[2] != 0.0
