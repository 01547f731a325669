"""`rewardkit migrate rllama`: RLlama configs (fixtures in RLlama's documented layout) to rewardkit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from rewardkit import ConfigError, RewardComposer
from rewardkit.cli import main
from rewardkit.migrate_rllama import migrate_rllama, migrate_rllama_file

FIXTURES = Path(__file__).with_name("fixtures") / "rllama"


def rllama_weight(initial, schedule, step, steps=1000, low=0.0, rate=0.99):
    """RLlama's RewardShaper arithmetic, restated here to check the converted schedules against."""
    progress = min(1.0, step / steps)
    if schedule == "linear":
        w = initial - (initial - low) * progress
    elif schedule == "exponential":
        w = initial * (rate ** (1 / steps)) ** step
    elif schedule == "cosine":
        w = low + (initial - low) * 0.5 * (1 + math.cos(math.pi * progress))
    else:
        w = initial
    return max(low, min(initial, w))


def test_documented_layout_converts_to_a_config_that_validates(tmp_path):
    m = migrate_rllama_file(FIXTURES / "preference.yaml")
    composer = RewardComposer.from_dict(m.config)
    assert set(composer.term_names) == {"preference_score", "step", "goal"}
    comps = m.config["components"]
    assert comps["preference_score"]["params"] == {"key": "preference_score", "default": 0.0}
    assert all(c["normalize"] == "running_zscore" for c in comps.values())
    out = composer.eval()({"preference_score": 0.7, "reached": 1.0})
    assert out.terms["step"].raw == -0.01  # a constant: the context never has its key
    assert out.terms["goal"].raw == 1.0  # the flag; reward_value 10 scales it in the transforms
    assert comps["goal"]["transforms"] == [{"scale": 10.0}]
    shaper = composer.shaper
    for step in (0, 1000, 2000, 7000, 12000, 20000):
        # step_penalty: linear from 0.5 to 0.1 over 10000 steps starting at 2000
        assert shaper.weight("step", step) == pytest.approx(
            rllama_weight(0.5, "linear", max(0, step - 2000), steps=10000, low=0.1))
    for step in (0, 10, 100, 500, 5000):
        assert shaper.weight("goal", step) == pytest.approx(
            rllama_weight(2.0, "exponential", step, steps=100, low=0.25, rate=0.5))
    assert shaper.weight("preference_score", 12345) == 1.0


def test_what_cannot_be_converted_is_reported_with_its_line():
    m = migrate_rllama_file(FIXTURES / "preference.yaml")
    text = "\n".join(m.unconverted)
    src = str(FIXTURES / "preference.yaml")
    assert f"{src}:5: composer_settings.norm_window: windowed normalization is not supported" in text
    assert f"{src}:23: reward_components.toxicity_penalty.class: class 'ToxicityPenalty'" in text
    assert f"{src}:44: reward_shaping.toxicity_penalty: matches no converted component" in text
    assert len(m.unconverted) == 3

    c = migrate_rllama_file(FIXTURES / "curriculum.yaml")
    composer = RewardComposer.from_dict(c.config)
    assert "normalize" not in c.config["components"]["formatting_check"]  # normalize: false
    for step in (0, 5000, 10000, 20000, 30000):
        assert composer.shaper.weight("formatting_check", step) == pytest.approx(
            rllama_weight(5.0, "cosine", step, steps=20000, low=0.5))
    notes = "\n".join(c.unconverted)
    cur = str(FIXTURES / "curriculum.yaml")
    assert f"{cur}:24: reward_shaping.reasoning_quality.decay_schedule: schedule 'linear_increase'" in notes
    assert f"{cur}:26: reward_shaping.reasoning_quality.max_weight: 0.5 is below initial_weight 1.0" in notes


def test_cli_writes_the_converted_config_and_lists_leftovers(tmp_path, capsys):
    out = tmp_path / "new.yaml"
    assert main(["migrate", "rllama", str(FIXTURES / "preference.yaml"), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"wrote {out} (3 components)" in captured.out
    assert captured.err.count("not converted: ") == 3
    assert "# Not converted (fix by hand):" in out.read_text()
    assert main(["validate", str(out)]) == 0
    assert yaml.safe_load(out.read_text()) == migrate_rllama_file(FIXTURES / "preference.yaml").config


def test_an_rllama_config_given_to_rewardkit_points_at_the_command(capsys):
    path = FIXTURES / "preference.yaml"
    with pytest.raises(ConfigError, match=r"composer_settings: unknown key; this looks like an RLlama config; "
                                          r"convert it with `rewardkit migrate rllama .*preference.yaml -o NEW.yaml`"):
        RewardComposer.from_yaml(path)
    assert main(["validate", str(path)]) == 1
    assert "rewardkit migrate rllama" in capsys.readouterr().err


def test_nothing_convertible_is_an_error_naming_the_file():
    with pytest.raises(ConfigError, match="reward_components"):
        migrate_rllama({"composer_settings": {}}, source="x.yaml")
    with pytest.raises(ConfigError, match="no component could be converted"):
        migrate_rllama({"reward_components": {"a": {"class": "Custom"}}}, source="x.yaml")


# ---- malformed files: a located error, never a traceback -------------------------
BAD_VALUES = [None, True, "x", "12", -1, 0, float("inf"), float("nan"), 10**30, [], [1], {}, {"a": 1}]


def _paths(node, prefix=()):
    """Every key path of a nested mapping (mappings only: RLlama files have no lists)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))


def _mutated(doc, path, value):
    import copy
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _assert_clean(tmp_path, capsys, doc, n):
    path = tmp_path / f"bad{n}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False) if not isinstance(doc, str) else doc)
    code = main(["migrate", "rllama", str(path), "-o", str(tmp_path / "out.yaml")])  # raises: a traceback
    err = capsys.readouterr().err
    if code != 0:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and str(path) in errors[0], err
    else:
        assert main(["validate", str(tmp_path / "out.yaml")]) == 0
        capsys.readouterr()
    return code


def test_fuzzed_rllama_files_give_located_errors_or_valid_configs(tmp_path, capsys):
    """Every key of the fixture set to each bad value: a ConfigError naming the file (which the
    command prints as one line), or a config that validates."""
    base = yaml.safe_load((FIXTURES / "preference.yaml").read_text())
    refused = 0
    for n, path in enumerate(_paths(base)):
        for m, value in enumerate(BAD_VALUES):
            file = tmp_path / f"fuzz{n}_{m}.yaml"
            file.write_text(yaml.safe_dump(_mutated(base, path, value), sort_keys=False))
            try:
                RewardComposer.from_dict(migrate_rllama_file(file).config)
            except ConfigError as exc:
                assert str(file) in str(exc).splitlines()[0], (path, value, exc)
                refused += 1
    assert refused > 50  # the fuzz reached the checks, not only harmless spots
    n = 0
    for doc in ([], "just text", 12, {"reward_components": []}, {"reward_components": {"a": 5}},
                {"reward_components": {"a": {"class": 5}}}, {"reward_components": {1: {"class": "step_penalty"}}},
                {"reward_components": {"a": {"class": "step_penalty", "params": [1]}}},
                {"reward_components": {"a": {"class": "GoalReward"}}, "reward_shaping": {"a": {"decay_steps": 0}}},
                {"reward_components": {"a": {"class": "GoalReward"}},
                 "reward_shaping": {"a": {"decay_schedule": "exponential", "decay_rate": -0.5}}},
                {"reward_components": {"a": {"class": "GoalReward"}}, "composer_settings": "z_score"},
                "reward_components: {a: {class: step_penalty}}\nreward_shaping: 7\n"):
        n += 1
        assert _assert_clean(tmp_path, capsys, doc, n) != 0


def test_non_utf8_and_unwritable_output(tmp_path, capsys):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"reward_components:\n  caf\xe9: {class: step_penalty}\n")
    assert main(["migrate", "rllama", str(bad)]) == 1
    assert "not UTF-8" in capsys.readouterr().err
    (tmp_path / "folder").mkdir()
    assert main(["migrate", "rllama", str(FIXTURES / "preference.yaml"), "-o", str(tmp_path / "folder")]) == 1
    assert "cannot write the converted config" in capsys.readouterr().err


def test_two_names_that_become_one_are_refused():
    doc = {"reward_components": {"a b": {"class": "step_penalty"}, "a_b": {"class": "step_penalty"}}}
    with pytest.raises(ConfigError, match=r"'a_b' and 'a b' both become 'a_b'.*rename one"):
        migrate_rllama(doc, source="x.yaml")
    text = "reward_components:\n  a b: {class: step_penalty}\n  a_b: {class: step_penalty}\n"
    from rewardkit.migrate_rllama import _load_with_lines
    data, lines = _load_with_lines(text, "x.yaml")
    with pytest.raises(ConfigError, match=r"^x.yaml:3: reward_components.a_b: expected a component name"):
        migrate_rllama(data, source="x.yaml", lines=lines)
