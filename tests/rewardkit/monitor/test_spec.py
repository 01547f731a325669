"""The config's ``monitor:`` section: validated like the rest, with located errors, and written back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rewardkit.config import parse_config, read_yaml, spec_to_dict
from rewardkit.errors import ConfigError
from rewardkit.monitor import DETECTORS, GoldDivergence, Monitor
from rewardkit.monitor.detectors import Detector
from rewardkit.monitor_spec import BASE_PARAMS, DETECTOR_PARAMS, MONITOR_KEYS

BASE = """\
version: 1
components:
  judge: {type: regex_match, params: {pattern: 'sure'}}
  correct: {type: answer_match, params: {mode: numeric}, weight: 0.0}
  brevity: {type: length_penalty, params: {max: 20}, normalize: running_zscore}
"""


def config(tmp_path: Path, monitor: str) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(BASE + monitor, encoding="utf-8")
    return path


def parse(path: Path) -> Any:
    doc = read_yaml(path)
    return parse_config(doc.data, source=doc.source)


def test_a_monitor_section_names_gold_agreeing_pairs_and_thresholds(tmp_path: Path) -> None:
    spec = parse(config(tmp_path, "monitor:\n  gold: correct\n  agree: [[judge, correct]]\n"
                                  "  gold_divergence: {min_rise: 0.3, window: 6}\n  variance_share: false\n"))
    assert spec.monitor.gold == "correct" and spec.monitor.agree == (("judge", "correct"),)
    monitor = Monitor.from_spec(spec)
    names = [d.name for d in monitor.detectors]
    assert "variance_share" not in names and len(names) == len(DETECTORS) - 1
    gold = next(d for d in monitor.detectors if isinstance(d, GoldDivergence))
    assert gold.config["min_rise"] == 0.3 and gold.window == 6 and gold.config["max_gold_gain"] == 0.05
    # the structure: weights, and ranges only for terms whose logged value is the raw output
    assert monitor.reward.weight("correct", 5) == 0.0 and monitor.reward.trained(0) == ["judge", "brevity"]
    assert monitor.reward.ranges == {"judge": (0.0, 1.0), "correct": (0.0, 1.0)}


def test_the_section_survives_spec_to_dict(tmp_path: Path) -> None:
    spec = parse(config(tmp_path, "monitor:\n  gold: correct\n  agree: [[judge, correct]]\n"
                                  "  pinned_at_bound: {tolerance: 0.1}\n  group_collapse: false\n"))
    again = parse_config(spec_to_dict(spec))
    assert again.monitor.to_dict() == spec.monitor.to_dict() == {
        "gold": "correct", "agree": [["judge", "correct"]], "group_collapse": False,
        "pinned_at_bound": {"tolerance": 0.1}}


def test_corroboration_is_on_by_default_and_written_back_when_turned_off(tmp_path: Path) -> None:
    assert Monitor.from_spec(parse(config(tmp_path, "monitor:\n  gold: correct\n"))).corroborate
    spec = parse(config(tmp_path, "monitor:\n  gold: correct\n  corroborate: false\n"))
    assert not Monitor.from_spec(spec).corroborate
    assert parse_config(spec_to_dict(spec)).monitor.to_dict() == {"gold": "correct", "corroborate": False}


def test_no_section_means_the_default_detectors(tmp_path: Path) -> None:
    spec = parse(config(tmp_path, ""))
    assert spec.monitor is None and "monitor" not in spec_to_dict(spec)
    assert len(Monitor.from_spec(spec).detectors) == len(DETECTORS)


@pytest.mark.parametrize(("section", "path", "expected"), [
    ("monitor:\n  gold: x\n", "monitor.gold", "expected the name of a term (brevity, correct, judge), got 'x'"),
    ("monitor:\n  gold: [judge]\n", "monitor.gold", "expected the name of a term"),
    ("monitor:\n  agree: judge\n", "monitor.agree", "expected a list of pairs of term names"),
    ("monitor:\n  agree: [[judge]]\n", "monitor.agree[0]", "expected a pair of term names [a, b], got ['judge']"),
    ("monitor:\n  agree: [[judge, nope]]\n", "monitor.agree[0][1]", "expected the name of a term"),
    ("monitor:\n  agree: [[judge, judge]]\n", "monitor.agree[0]", "expected two different terms"),
    ("monitor:\n  gold_divergence: {min_rise: -1}\n", "monitor.gold_divergence.min_rise", "expected a positive number"),
    ("monitor:\n  pinned_at_bound: {tolerance: 2}\n", "monitor.pinned_at_bound.tolerance", "expected a number in [0, 1]"),
    ("monitor:\n  length_drift: {window: 0}\n", "monitor.length_drift.window", "expected an integer >= 1"),
    ("monitor:\n  group_collapse: yes please\n", "monitor.group_collapse", "expected a mapping of thresholds or false"),
    ("monitor:\n  gold_divergence: {min_rize: 1}\n", "monitor.gold_divergence", "did you mean 'min_rise'"),
    ("monitor:\n  corroborate: maybe\n", "monitor.corroborate", "expected true or false, got 'maybe'"),
    ("monitor:\n  golden: judge\n", "monitor.golden", "unknown key; expected one of: gold, agree"),
    ("monitor: [gold]\n", "monitor", "expected a mapping with any of: gold, agree"),
])
def test_errors_name_the_file_the_key_path_and_what_was_expected(tmp_path: Path, section: str, path: str,
                                                                 expected: str) -> None:
    file = config(tmp_path, section)
    with pytest.raises(ConfigError) as info:
        parse(file)
    error = next(e for e in info.value.errors if e.path == path)
    assert str(error).startswith(f"{file}: {path}: ") and expected in str(error)


def test_every_problem_of_the_section_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse(config(tmp_path, "monitor:\n  gold: x\n  agree: [[judge, y]]\n  disagreement: {min_gap: 0}\n"))
    assert {e.path for e in info.value.errors} == {"monitor.gold", "monitor.agree[0][1]", "monitor.disagreement.min_gap"}


def test_rewardkit_validate_reports_a_bad_monitor_section(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rewardkit.cli import main

    file = config(tmp_path, "monitor:\n  gold: x\n")
    assert main(["validate", str(file)]) == 1
    assert f"{file}: monitor.gold: expected the name of a term" in capsys.readouterr().err


def test_the_schema_lists_every_detector_with_the_classes_own_thresholds() -> None:
    """monitor_spec declares the built-ins' thresholds so that a config is read without the monitor package."""
    assert list(DETECTOR_PARAMS) == list(DETECTORS) and MONITOR_KEYS == ("gold", "agree", "watch", "corroborate", *DETECTORS)
    assert all(cls.params is DETECTOR_PARAMS[name] for name, cls in DETECTORS.items())
    assert Detector.params is BASE_PARAMS


def test_reading_a_config_imports_no_monitor_package(tmp_path: Path) -> None:
    path = config(tmp_path, "monitor:\n  gold: correct\n  gold_divergence: {min_rise: 0.3}\n")
    code = ("import sys; from rewardkit.config import parse_config, read_yaml; "
            f"doc = read_yaml({str(path)!r}); spec = parse_config(doc.data, source=doc.source); "
            "assert spec.monitor.detectors['gold_divergence']['min_rise'] == 0.3; "
            "print(sorted(m for m in sys.modules if m == 'rewardkit.monitor' or m.startswith('rewardkit.monitor.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
