"""Malformed reward configs: each must fail with a ConfigError naming file, key path and expectation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardkit import ConfigError, RewardComposer, registered
from rewardkit.config import parse_yaml

V = "version: 1\n"
OK = "components:\n  a: {type: linear}\n"

# (case id, YAML text, expected message after "<file>: ")
CASES = [
    ("missing_version", OK, "version: expected 1, got nothing (the key is missing)"),
    ("version_2", "version: 2\n" + OK, "version: expected 1, got 2"),
    ("version_string", "version: '1'\n" + OK, "version: expected 1, got '1'"),
    ("version_bool", "version: true\n" + OK, "version: expected 1, got True"),
    ("components_list", V + "components: [a, b]\n",
     "components: expected a non-empty mapping of component name to settings, got ['a', 'b']"),
    ("components_empty", V + "components: {}\n",
     "components: expected a non-empty mapping of component name to settings, got {}"),
    ("components_missing", V,
     "components: expected a non-empty mapping of component name to settings, got nothing (the key is missing)"),
    ("unknown_top_key", V + OK + "extra: 1\n",
     "extra: unknown key; expected one of: components, description, expect, monitor, stress, total, version"),
    ("unknown_component_key", V + "components:\n  a: {type: linear, wieght: 1}\n",
     "components.a.wieght: unknown key (did you mean 'weight'?); expected one of: applies_to, description, inputs, normalize, "
     "params, transforms, type, weight"),
    ("unknown_type", V + "components:\n  a: {type: nope}\n",
     "components.a.type: expected a registered component type, got 'nope'; registered: " + ", ".join(registered())),
    ("missing_type", V + "components:\n  a: {weight: 1}\n",
     "components.a.type: expected a component type (a registered name or 'group'), got nothing (the key is missing)"),
    ("entry_not_mapping", V + "components:\n  a: 3\n", "components.a: expected a mapping with 'type', got 3"),
    ("group_without_components", V + "components:\n  g: {type: group, weight: 2}\n",
     "components.g.components: expected a non-empty mapping of component name to settings, got nothing (the key "
     "is missing)"),
    ("group_with_params", V + "components:\n  g: {type: group, params: {}, components: {a: {type: linear}}}\n",
     "components.g.params: unknown key; expected one of: components, description, normalize, transforms, type, "
     "weight"),
    ("name_with_slash", V + "components:\n  a/b: {type: linear}\n",
     "components.a/b: expected a name of letters, digits, '_' or '-', got 'a/b'"),
    ("sigma_negative", V + "components:\n  latency:\n    type: logistic_latency\n    params: {threshold: 6, sigma: -1}\n",
     "components.latency.params.sigma: expected a positive number, got -1"),
    ("nested_param_error", V + "components:\n  g:\n    type: group\n    components:\n"
                           "      l: {type: logistic_latency, params: {threshold: 1, sigma: 0}}\n",
     "components.g.components.l.params.sigma: expected a positive number, got 0"),
    ("unknown_param", V + "components:\n  a: {type: linear, params: {slope: 2}}\n",
     "components.a.params: unknown parameter 'slope' (did you mean 'scale'?); expected one of: clip, scale"),
    ("missing_required_param", V + "components:\n  a: {type: logistic_latency}\n",
     "components.a.params.threshold: missing required parameter (a finite number)"),
    ("params_not_mapping", V + "components:\n  a: {type: linear, params: [1]}\n",
     "components.a.params: expected a mapping of parameters, got [1]"),
    ("params_empty_list", V + "components:\n  a: {type: linear, params: []}\n",
     "components.a.params: expected a mapping of parameters, got []"),
    ("weight_string", V + "components:\n  a: {type: linear, weight: heavy}\n",
     "components.a.weight: expected a number or a mapping with 'schedule', got 'heavy'"),
    ("weight_bool", V + "components:\n  a: {type: linear, weight: true}\n",
     "components.a.weight: expected a number or a mapping with 'schedule', got True"),
    ("weight_nan", V + "components:\n  a: {type: linear, weight: .nan}\n",
     "components.a.weight: expected a finite number or a schedule, got nan"),
    ("bad_schedule_name", V + "components:\n  a: {type: linear, weight: {schedule: wobbly}}\n",
     "components.a.weight.schedule: expected one of constant, linear, exponential, cosine, step, piecewise, "
     "got 'wobbly'"),
    ("linear_without_steps", V + "components:\n  a: {type: linear, weight: {schedule: linear, start: 1, end: 0}}\n",
     "components.a.weight.steps: expected a positive number (or end_step), got nothing"),
    ("piecewise_not_increasing",
     V + "components:\n  a: {type: linear, weight: {schedule: piecewise, points: [[0, 1], [10, 0], [5, 1]]}}\n",
     "components.a.weight.points: expected [step, value] pairs with strictly increasing steps, "
     "got [[0, 1], [10, 0], [5, 1]]"),
    ("schedule_min_above_max",
     V + "components:\n  a:\n    type: linear\n    weight: {schedule: cosine, start: 1, end: 0, steps: 9, min: 2, max: 1}\n",
     "components.a.weight.min: expected min <= max, got min=2.0 and max=1.0"),
    ("schedule_unknown_param",
     V + "components:\n  a: {type: linear, weight: {schedule: exponential, start: 1, rate: 0.5, decay: 2}}\n",
     "components.a.weight: unknown parameter 'decay'; expected one of: max, min, rate, start, start_step"),
    ("bad_normalizer", V + "components:\n  a: {type: linear, normalize: zscore}\n",
     "components.a.normalize: expected one of running_zscore, running_minmax, return_std, got 'zscore'"),
    ("bad_normalizer_param", V + "components:\n  a: {type: linear, normalize: {type: return_std, gamma: 2}}\n",
     "components.a.normalize.gamma: expected a number in [0, 1], got 2"),
    ("bad_transform", V + "components:\n  a: {type: linear, transforms: [sqrt]}\n",
     "components.a.transforms[0]: expected a transform among scale, shift, clip, tanh, got 'sqrt'"),
    ("transforms_not_list", V + "components:\n  a: {type: linear, transforms: tanh}\n",
     "components.a.transforms: expected a list of transforms, got 'tanh'"),
    ("clip_low_above_high", V + "components:\n  a: {type: linear, transforms: [tanh, {clip: [1, -1]}]}\n",
     "components.a.transforms[1].clip: expected a list [low, high] with low < high, got [1, -1]"),
    ("clip_low_equals_high", V + "components:\n  a: {type: linear, transforms: [{clip: [1, 1]}]}\n",
     "components.a.transforms[0].clip: expected a list [low, high] with low < high, got [1, 1]"),
    ("inputs_unknown_input", V + "components:\n  a: {type: linear, inputs: {signal: x}}\n",
     "components.a.inputs: unknown input 'signal'; linear reads: value"),
    ("inputs_bad_key", V + "components:\n  a: {type: linear, inputs: {value: 3}}\n",
     "components.a.inputs.value: expected a context key (non-empty string), got 3"),
    ("inputs_not_mapping", V + "components:\n  a: {type: linear, inputs: [value]}\n",
     "components.a.inputs: expected a mapping of input name to context key, got ['value']"),
    ("duplicate_key", V + "components:\n  a: {type: linear}\n  a: {type: linear}\n",
     "expected valid YAML at line 4, column 3: duplicate key 'a' (first at line 3)"),
    ("invalid_syntax", V + "components:\n  a: {type: linear\n  b: 1\n",
     "expected valid YAML at line 4, column 4: expected ',' or '}', but got ':'"),
    ("top_level_list", "- 1\n- 2\n",
     "expected a mapping with 'version' and 'components' at the top level, got [1, 2]"),
    ("empty_file", "", "expected a mapping with 'version' and 'components' at the top level, got an empty document"),
    ("total_not_mapping", V + OK + "total: [tanh]\n", "total: expected a mapping with 'transforms', got ['tanh']"),
    ("total_unknown_key", V + OK + "total: {scale: 2}\n", "total.scale: unknown key; expected one of: transforms"),
    ("total_bad_transform", V + OK + "total: {transforms: [{scale: .inf}]}\n",
     "total.transforms[0].scale: expected a finite number, got inf"),
    ("description_not_string", V + "components:\n  a: {type: linear, description: [1]}\n",
     "components.a.description: expected a string, got [1]"),
    ("huge_integer_param", V + "components:\n  a: {type: linear, params: {scale: " + "9" * 400 + "}}\n",
     "components.a.params.scale: expected a finite number, got " + "9" * 57 + "..."),
]


@pytest.mark.parametrize("case, text, message", CASES, ids=[c[0] for c in CASES])
def test_malformed_config_message(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(path)
    assert str(info.value) == f"{path}: {message}"
    assert info.value.source == str(path)


def test_there_are_many_cases():
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(path)
    assert str(info.value) == f"{path}: expected an existing YAML file, got a missing path"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"^{tmp_path}: expected a readable UTF-8 file"):
        RewardComposer.from_yaml(tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"version: 1\ndescription: caf\xe9\n")
    with pytest.raises(ConfigError, match="latin.yaml: expected a readable UTF-8 file"):
        RewardComposer.from_yaml(path)


def test_python_tags_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tag.yaml"
    path.write_text(V + "components: !!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tag.yaml: expected valid YAML at line 2, column 13: could not "
                                          r"determine a constructor for the tag"):
        RewardComposer.from_yaml(path)


def test_dict_configs_name_the_source():
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "linear", "weight": "x"}}})
    assert str(info.value) == "<dict>: components.a.weight: expected a number or a mapping with 'schedule', got 'x'"
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "linear", "weight": "x"}}},
                                 source="run.json")
    assert info.value.path == "components.a.weight"
    assert info.value.source == "run.json"


def test_valid_yaml_file_loads(tmp_path: Path) -> None:
    """The cases above fail for the stated reason only: the same file, fixed, loads."""
    path = tmp_path / "ok.yaml"
    path.write_text(V + "components:\n  latency:\n    type: logistic_latency\n    params: {threshold: 6, sigma: 1}\n"
                    "    weight: {schedule: linear, start: 1, end: 0, steps: 10}\n"
                    "    transforms: [{clip: [-1, null]}]\n    normalize: {type: return_std, gamma: 0.9}\n"
                    "total: {transforms: [tanh]}\n", encoding="utf-8")
    c = RewardComposer.from_yaml(path)
    assert c.term_names == ("latency",)
    assert json.loads(json.dumps(c.to_dict()))["components"]["latency"]["params"] == {"threshold": 6.0, "sigma": 1.0}


def test_parse_yaml_reports_line_of_duplicate_nested_key():
    with pytest.raises(ConfigError) as info:
        parse_yaml("version: 1\ncomponents:\n  a:\n    type: linear\n    type: group\n", source="s.yaml")
    assert str(info.value) == "s.yaml: expected valid YAML at line 5, column 5: duplicate key 'type' (first at line 4)"
