"""Fuzzing the config reader: whatever comes in, only ConfigError goes out (or a working composer)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit import ConfigError, RewardComposer
from rewardkit.config import load_yaml, parse_yaml

PRESET_DIR = Path(__file__).resolve().parents[2] / "configs" / "rewards"
PRESET_DICTS = [load_yaml(p) for p in sorted(PRESET_DIR.glob("*.yaml"))]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Words of the schema, so that random structures often get past the first checks.
WORDS = ["version", "components", "total", "description", "type", "params", "weight", "inputs", "normalize",
         "transforms", "group", "schedule", "start", "end", "steps", "end_step", "start_step", "min", "max",
         "value", "rate", "factor", "every", "points", "linear", "constant", "cosine", "piecewise", "step",
         "exponential", "scale", "clip", "tanh", "running_zscore", "running_minmax", "return_std", "gamma", "eps",
         "threshold", "sigma", "signal", "statistic", "cv", "latency", "throughput", "ema_delta",
         "logistic_latency", "load_imbalance", "threshold_penalty", "throughput_sigmoid", "info_value", "key",
         "potential_shaping", "littles_law_latency"]

scalars = (st.none() | st.booleans() | st.integers() | st.integers(-3, 3)
           | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(WORDS) | st.text(max_size=8))
keys = st.sampled_from(WORDS) | st.text(max_size=6) | st.integers(-2, 2) | st.booleans() | st.none()
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)


def build_or_config_error(data: Any) -> RewardComposer | None:
    """Build a composer; ConfigError is the only acceptable failure. A success must round-trip."""
    try:
        composer = RewardComposer.from_dict(data)
    except ConfigError as exc:
        assert str(exc)
        return None
    again = RewardComposer.from_dict(composer.to_dict())
    assert again.to_dict() == composer.to_dict()
    return composer


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested dicts and lists."""
    out = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += paths(v, prefix + (i,))
    return out


def parent_of(tree: Any, path: tuple) -> Any:
    for k in path[:-1]:
        tree = tree[k]
    return tree


@FUZZ
@given(text=st.text(max_size=200))
def test_arbitrary_text(text):
    try:
        data = parse_yaml(text, source="fuzz.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml: expected valid YAML")
        return
    build_or_config_error(data)


@FUZZ
@given(lines=st.lists(st.sampled_from(WORDS + [":", "- ", "  ", "{", "}", "[", "]", ",", "1", "-1", "0.5", "null",
                                                "&a", "*a", "!!str", "!!python/name:os.system", "? ", "\n", "#"]),
                      max_size=40))
def test_yaml_like_text(lines):
    text = "".join(lines)
    try:
        data = parse_yaml(text, source="fuzz.yaml")
    except ConfigError:
        return
    build_or_config_error(data)


@FUZZ
@given(data=values)
def test_arbitrary_structures(data):
    build_or_config_error(data)


@FUZZ
@given(components=st.dictionaries(keys, values, max_size=4), total=values)
def test_structures_with_a_valid_header(components, total):
    build_or_config_error({"version": 1, "components": components})
    build_or_config_error({"version": 1, "components": components, "total": total})


@FUZZ
@given(preset=st.sampled_from(PRESET_DICTS), data=st.data())
def test_dropping_a_key_of_a_preset(preset, data):
    tree = copy.deepcopy(preset)
    candidates = [p for p in paths(tree) if p and isinstance(parent_of(tree, p), dict)]
    path = data.draw(st.sampled_from(candidates))
    del parent_of(tree, path)[path[-1]]
    build_or_config_error(tree)


@FUZZ
@given(preset=st.sampled_from(PRESET_DICTS), data=st.data(), replacement=values)
def test_replacing_a_value_of_a_preset(preset, data, replacement):
    tree = copy.deepcopy(preset)
    path = data.draw(st.sampled_from([p for p in paths(tree) if p]))
    parent_of(tree, path)[path[-1]] = replacement
    build_or_config_error(tree)
    # and the same through YAML text, when the mutated tree can be written as YAML
    try:
        text = yaml.safe_dump(tree)
    except yaml.YAMLError:
        return
    try:
        parsed = parse_yaml(text)
    except ConfigError:
        return
    build_or_config_error(parsed)


@FUZZ
@given(preset=st.sampled_from(PRESET_DICTS), data=st.data(), key=keys, value=values)
def test_adding_a_key_to_a_preset(preset, data, key, value):
    tree = copy.deepcopy(preset)
    targets = [p for p in paths(tree) if isinstance(parent_of(tree, p + ("x",)), dict)]
    path = data.draw(st.sampled_from(targets))
    parent_of(tree, path + ("x",))[key] = value
    build_or_config_error(tree)


def test_presets_themselves_build():
    for d in PRESET_DICTS:
        assert build_or_config_error(d) is not None
