"""The one YAML loader and the reward-config reader: limits, merge keys, names, inputs, all errors at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rewardkit import ConfigError, Param, RewardComposer
from rewardkit.config import (MAX_DEPTH, MAX_EXPANDED_VALUES, MAX_FILE_BYTES, MAX_TERMS, check_structure, load_yaml,
                              parse_yaml, parse_yaml_document, read_yaml)
from rewardkit.params import describe, validate_schema

V = "version: 1\n"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def nested_groups(depth: int) -> dict:
    entry: dict = {"type": "linear"}
    for _ in range(depth):
        entry = {"type": "group", "components": {"inner": entry}}
    return {"version": 1, "components": {"top": entry}}


# ---- limits -------------------------------------------------------------------------------------
def test_alias_bomb_is_refused_fast():
    text = V + alias_bomb() + "components: {t: {type: linear, description: *a8}}\n"
    assert len(text.encode()) < 600
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, source="bomb.yaml")
    assert time.perf_counter() - start < 2
    assert str(info.value).startswith(f"bomb.yaml: expected at most {MAX_EXPANDED_VALUES} values once aliases are "
                                      "expanded, got more (the value at line ")


def test_merge_key_bomb_is_refused():
    lines = ["b0: &b0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8, k8: 9}"]
    for level in range(1, 9):
        lines.append(f"b{level}: &b{level} [" + ", ".join([f"*b{level - 1}"] * 9) + "]")
    lines.append("m: {<<: *b8}")
    with pytest.raises(ConfigError, match="values once aliases are expanded"):
        parse_yaml("\n".join(lines))


def test_a_few_aliases_below_the_limit_load():
    data = parse_yaml(alias_bomb(levels=3, width=9))
    assert len(data["a2"]) == 9 and data["a2"][0][0] == ["x"] * 9


def test_recursive_alias_is_refused():
    with pytest.raises(ConfigError, match=r"^<string>: expected no alias inside its own anchor, got a recursive one "
                                          r"at line 1$"):
        parse_yaml("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="recursive"):
        parse_yaml("a: &m {b: *m}\n")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 2000, 60_000])
def test_deep_yaml_is_refused(depth):
    with pytest.raises(ConfigError, match=f"expected at most {MAX_DEPTH} levels of nested lists and mappings"):
        parse_yaml("[" * depth + "]" * depth, source="deep.yaml")


def test_depth_at_the_limit_loads():
    assert parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_depth_through_aliases_is_bounded():
    lines = ["l0: &l0 " + "[" * 60 + "]" * 60]
    for level in range(1, 4):
        lines.append(f"l{level}: &l{level} " + "[" * 40 + f"*l{level - 1}" + "]" * 40)
    with pytest.raises(ConfigError, match="levels of nested lists and mappings once aliases are expanded"):
        parse_yaml("\n".join(lines))


def test_file_size_is_bounded(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_FILE_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert str(info.value) == f"{path}: expected a file of at most {MAX_FILE_BYTES} bytes, got a larger one"


def test_path_with_a_nul_byte_is_a_config_error():
    """Found by the CLI fuzz test: open() raises ValueError (not OSError) on such a path."""
    with pytest.raises(ConfigError) as info:
        read_yaml("a\x00.yaml")
    assert str(info.value) == "'a\\x00.yaml': expected a file path, got one containing a NUL byte"


def test_endless_device_is_not_read_whole():
    with pytest.raises(ConfigError, match="at most"):
        read_yaml("/dev/zero")


def test_group_nested_hundreds_deep_is_a_config_error():
    with pytest.raises(ConfigError, match=f"^<dict>: expected at most {MAX_DEPTH} levels"):
        RewardComposer.from_dict(nested_groups(400))


def test_group_nested_to_the_limit_works():
    composer = RewardComposer.from_dict(nested_groups(MAX_DEPTH // 2 - 2))
    assert composer({"value": 2.0}).total == 2.0


def test_cyclic_dict_is_a_config_error():
    config: dict = {"version": 1, "components": {}}
    config["components"]["g"] = {"type": "group", "components": config["components"]}
    with pytest.raises(ConfigError, match="^<dict>: expected data without cycles"):
        RewardComposer.from_dict(config)
    params: dict = {}
    params["clip"] = [params, params]
    with pytest.raises(ConfigError):
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "linear", "params": params}}})


def test_shared_but_acyclic_dicts_are_fine():
    shared = {"type": "linear"}
    composer = RewardComposer.from_dict({"version": 1, "components": {"a": shared, "b": shared}})
    assert composer({"value": 1.0}).total == 2.0


def test_wide_shared_dict_is_bounded():
    level: list = [1.0] * 10
    for _ in range(8):
        level = [level] * 10
    with pytest.raises(ConfigError, match=f"expected at most {MAX_EXPANDED_VALUES} values"):
        check_structure({"x": level})


def test_thousand_terms_work_and_more_are_a_config_error():
    many = {"version": 1, "components": {f"t{i}": {"type": "linear", "inputs": {"value": f"k{i}"}}
                                         for i in range(MAX_TERMS)}}
    composer = RewardComposer.from_dict(many)
    assert composer({f"k{i}": 1.0 for i in range(MAX_TERMS)}).total == MAX_TERMS
    too_many = {"version": 1, "components": {f"t{i}": {"type": "linear"} for i in range(3 * MAX_TERMS)}}
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict(too_many)
    assert str(info.value) == f"<dict>: components: expected at most {MAX_TERMS} terms and groups, got {3 * MAX_TERMS}"


def test_describe_is_bounded_on_huge_values():
    level: list = ["x"] * 9
    for _ in range(8):
        level = [level] * 9
    start = time.perf_counter()
    text = describe(level)
    assert time.perf_counter() - start < 0.1
    assert len(text) <= 60 and text.startswith("[[[[")
    cyclic: dict = {}
    cyclic["self"] = cyclic
    assert len(describe(cyclic)) <= 60
    assert describe({"b": 1, "a": 2}) == "{'b': 1, 'a': 2}"  # insertion order, like repr


# ---- YAML features and duplicate keys ------------------------------------------------------------
def test_merge_keys_work():
    text = V + ("base: &base {type: logistic_latency, params: {threshold: 6, sigma: 1}}\n"
                "components:\n  a: {<<: *base, weight: 2}\n  b: {<<: *base, params: {threshold: 3, sigma: 1}}\n")
    data = parse_yaml(text.replace("base: &base", "x-base: &base").replace("version: 1\n", ""))
    assert data["components"]["a"] == {"type": "logistic_latency", "params": {"threshold": 6, "sigma": 1}, "weight": 2}
    assert data["components"]["b"]["params"] == {"threshold": 3, "sigma": 1}
    composer = RewardComposer.from_dict({"version": 1, "components": data["components"]})
    assert composer.term_names == ("a", "b")


def test_merge_of_several_mappings_and_overrides():
    data = parse_yaml("x: &x {a: 1, b: 1}\ny: &y {b: 2, c: 2}\nz: {<<: [*x, *y], c: 3}\n")
    assert data["z"] == {"a": 1, "b": 1, "c": 3}


def test_duplicate_keys_are_refused_but_merged_keys_are_not_duplicates():
    with pytest.raises(ConfigError, match=r"duplicate key 'qps' \(first at line 1\)"):
        parse_yaml("qps: 1\nqps: 2\n", source="env.yaml")
    assert parse_yaml("b: &b {k: 1}\nm: {<<: *b, k: 2}\n")["m"] == {"k": 2}
    with pytest.raises(ConfigError, match="duplicate key 'k'"):
        parse_yaml("b: &b {k: 1}\nm: {<<: *b, k: 2, k: 3}\n")


def test_yaml_document_locates_key_paths():
    doc = parse_yaml_document(V + "components:\n  a:\n    type: linear\n    transforms: [tanh, {clip: [0, 1]}]\n",
                              source="x.yaml")
    assert doc.source == "x.yaml" and doc.data["version"] == 1
    assert doc.line_of("components.a.type") == 4
    assert doc.line_of("components.a.transforms[1].clip") == 5
    assert doc.line_of("components.missing") is None
    assert doc.line_of("") == 1


def test_load_yaml_and_read_yaml_agree(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    assert load_yaml(path) == read_yaml(path).data == {"a": 1}
    assert read_yaml(path).source == str(path)


def test_empty_yaml_is_none():
    assert parse_yaml("") is None and parse_yaml("# only a comment\n") is None


# ---- names and inputs -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a\n", "a b", "a/b", "", "\u00e9t\u00e9", "-a"])
def test_names_are_matched_whole(name):
    with pytest.raises(ConfigError, match="expected a name of letters, digits, '_' or '-'"):
        RewardComposer.from_dict({"version": 1, "components": {name: {"type": "linear"}}})


def test_name_with_newline_path_is_printable():
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a\n": {"type": "linear"}}})
    assert "\n" not in str(info.value)
    assert info.value.path == "components.'a\\n'"


@pytest.mark.parametrize("inputs, message", [
    ([], "components.a.inputs: expected a mapping of input name to context key, got []"),
    (0, "components.a.inputs: expected a mapping of input name to context key, got 0"),
    ("", "components.a.inputs: expected a mapping of input name to context key, got ''"),
    ({"value": ""}, "components.a.inputs.value: expected a context key (non-empty string), got ''"),
    ({"value": " v"}, "components.a.inputs.value: expected a context key without control characters or "
                      "surrounding spaces, got ' v'"),
    ({"value": "v\n"}, "components.a.inputs.value: expected a context key without control characters or "
                       "surrounding spaces, got 'v\\n'"),
    ({1: "v"}, "components.a.inputs: expected input names (strings) as keys, got 1"),
])
def test_inputs_are_validated(inputs, message):
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "linear", "inputs": inputs}}})
    assert str(info.value) == f"<dict>: {message}"


def test_context_key_read_as_scalar_and_vector_is_a_config_error():
    config = {"version": 1, "components": {
        "a": {"type": "linear", "inputs": {"value": "loads"}},
        "b": {"type": "load_imbalance", "inputs": {"replica_loads": "loads"}}}}
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict(config)
    assert str(info.value) == ("<dict>: components.b.inputs.replica_loads: expected context key 'loads' read as a "
                               "scalar like components.a reads it, got a vector (input 'replica_loads' of "
                               "load_imbalance)")
    config["components"]["b"]["inputs"] = {"replica_loads": "other"}
    assert RewardComposer.from_dict(config).context_keys() == {"loads", "other"}


# ---- every error at once --------------------------------------------------------------------------
def test_every_error_of_a_file_is_reported(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("version: 2\n"
                    "colour: red\n"
                    "components:\n"
                    "  a: {type: logistc_latency, weight: heavy}\n"
                    "  b: {type: linear, params: {scale: x, clip: 3, slope: 1}}\n"
                    "  g:\n    type: group\n    components:\n      c: {type: linear, transforms: [sqrt]}\n"
                    "total: {transforms: [{scale: .inf}]}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(path)
    exc = info.value
    paths = [e.path for e in exc.errors]
    assert paths == ["colour", "version", "components.a.type", "components.a.weight", "components.b.params",
                     "components.b.params.scale", "components.b.params.clip", "components.g.components.c.transforms[0]",
                     "total.transforms[0].scale"]
    assert all(e.source == str(path) and len(e.errors) == 1 for e in exc.errors)
    lines = str(exc).splitlines()
    assert lines[0] == f"{path}: 9 errors:"
    assert lines[1:] == [f"  {e.path}: {e.detail}" for e in exc.errors]
    assert "did you mean 'logistic_latency'" in lines[3]
    assert exc.path == "colour" and exc.source == str(path)  # the first error, for code reading one


def test_a_single_error_reads_as_before():
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "linear", "weight": "x"}}})
    assert str(info.value) == "<dict>: components.a.weight: expected a number or a mapping with 'schedule', got 'x'"
    assert info.value.errors == [info.value]


# ---- the generic validation helper -----------------------------------------------------------------
SCHEMA = {
    "qps": Param.positive(12.5, "arrival rate"),
    "name": Param.string(doc="run name"),
    "observation": {"token_scale": Param.positive(4096.0, "tokens divisor"),
                    "window": Param.integer(10, "steps", minimum=1)},
    "flags": {"plots": Param.boolean(True, "save plots"), "seed": Param.integer(doc="seed").or_null()},
}


def test_validate_schema_fills_defaults_and_cleans():
    out = validate_schema(SCHEMA, {"name": "r", "observation": {"window": 3}}, source="env.yaml")
    assert out == {"qps": 12.5, "name": "r", "observation": {"token_scale": 4096.0, "window": 3},
                   "flags": {"plots": True, "seed": None}}


def test_validate_schema_reports_every_problem_with_its_path():
    given = {"qsp": 1, "qps": -1, "observation": {"token_scale": "big", "window": 0}, "flags": [1]}
    with pytest.raises(ConfigError) as info:
        validate_schema(SCHEMA, given, source="env.yaml")
    assert [(e.path, e.detail) for e in info.value.errors] == [
        ("qsp", "unknown key (did you mean 'qps'?); expected one of: flags, name, observation, qps"),
        ("qps", "expected a positive number, got -1"),
        ("name", "missing required key (a non-empty string)"),
        ("observation.token_scale", "expected a positive number, got 'big'"),
        ("observation.window", "expected an integer >= 1, got 0"),
        ("flags", "expected a mapping of settings, got [1]"),
    ]
    assert str(info.value).startswith("env.yaml: 6 errors:\n  qsp: unknown key")


def test_validate_schema_under_a_path_prefix():
    with pytest.raises(ConfigError) as info:
        validate_schema({"n": Param.integer(1)}, {"n": True}, path="ppo", source="t.yaml")
    assert str(info.value) == "t.yaml: ppo.n: expected an integer, got True"


def test_config_error_within_relocates_every_error():
    with pytest.raises(ConfigError) as info:
        validate_schema({"a": Param.boolean(), "b": Param.boolean()}, {"a": 1, "b": 2})
    moved = info.value.within("x.yaml", "section")
    assert [e.path for e in moved.errors] == ["section.a", "section.b"]
    assert str(moved).splitlines() == ["x.yaml: 2 errors:", "  section.a: expected true or false, got 1",
                                       "  section.b: expected true or false, got 2"]


def test_combine_needs_an_error():
    with pytest.raises(ValueError):
        ConfigError.combine([])
    single = ConfigError("expected x", source="s", path="p")
    assert ConfigError.combine([single]) is single


def test_config_error_path_ok_for_existing_file(tmp_path: Path):
    path = tmp_path / "ok.yaml"
    path.write_text(V + "components:\n  a: {type: linear}\n", encoding="utf-8")
    assert RewardComposer.from_yaml(path).term_names == ("a",)


def test_docs_state_the_limits_and_the_transactional_guarantee():
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    for number in (MAX_FILE_BYTES, MAX_EXPANDED_VALUES, MAX_DEPTH, MAX_TERMS):
        assert str(number) in docs
    assert f"{MAX_FILE_BYTES // 1024} KiB" in docs and f"{MAX_FILE_BYTES // 1024} KiB" in readme
    assert f"{MAX_DEPTH} levels" in readme and f"{MAX_EXPANDED_VALUES:,}" in readme
    for text in (docs, readme):
        assert "a call or `load_state_dict` that raises changes nothing" in " ".join(text.lower().split())
