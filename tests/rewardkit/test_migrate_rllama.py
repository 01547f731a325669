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
