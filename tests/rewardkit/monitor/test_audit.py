"""``rewardkit audit``: exit 0 with no alert, 1 when one fires, 2 on bad input; --json for machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_support import REWARD, write_state

from rewardkit.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "monitor"


def test_an_honest_log_exits_0(honest_state: Path, reward_config: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", str(honest_state), "--config", str(reward_config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{honest_state}: no alert in 20 logged steps (1-20)")
    assert "not checked: disagreement (the config declares no terms that should agree" in out


def test_a_hacked_log_exits_1_and_prints_where_each_alert_began(hacked_state: Path, reward_config: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", str(hacked_state), "--config", str(reward_config)]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "gold_divergence [strict]: began at step" in x)
    assert "while the gold term 'strict' moved" in line


def test_json_output(hacked_state: Path, reward_config: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["records"] == 20 and (report["first_step"], report["last_step"]) == (1, 20)
    alert = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert alert["terms"] == ["strict"] and 6 <= alert["began"] <= alert["fired"] <= 20
    assert set(alert["values"]) == {"total_start", "total_now", "gold_start", "gold_now"}
    assert "diversity_collapse" in report["not_checked"]


def test_the_breakdown_csv_is_read_too(tmp_path: Path, reward_config: Path, capsys: pytest.CaptureFixture) -> None:
    import numpy as np

    from rewardkit import RewardComposer
    from rewardkit.breakdown_logger import BreakdownLogger

    composer = RewardComposer.from_yaml(reward_config)
    path = tmp_path / "breakdown.csv"
    rng = np.random.default_rng(0)
    with BreakdownLogger(path, every=1) as logger:
        for step in range(20):  # the proxy's hit rate climbs; the answers never get right
            p = 0.1 if step < 6 else min(1.0, 0.1 + 0.1 * (step - 5))
            completions = ["sure" if rng.random() < p else "no" for _ in range(16)]
            logger.log(composer({"completion": completions, "reference": ["4"] * 16}), step=step)
    assert main(["audit", str(path), "--config", str(reward_config), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {a["detector"] for a in report["alerts"]} >= {"gold_divergence"}
    assert "completions/mean_length" in report["not_checked"]["length_drift"]


@pytest.mark.parametrize("problem", ["missing", "malformed", "not_trl", "no_rewards", "unknown_term", "bad_config",
                                     "bad_import"])
def test_bad_input_exits_2_with_a_clear_message(problem: str, tmp_path: Path, hacked_state: Path,
                                                 reward_config: Path, capsys: pytest.CaptureFixture) -> None:
    log, config, extra = hacked_state, reward_config, []
    if problem == "missing":
        log = tmp_path / "nope.json"
        expected = f"{log}: expected an existing log file"
    elif problem == "malformed":
        log = tmp_path / "broken.json"
        log.write_text('{"log_history": [', encoding="utf-8")
        expected = f"{log}: expected valid JSON at line 1"
    elif problem == "not_trl":
        log = tmp_path / "other.json"
        log.write_text('{"loss": 1}', encoding="utf-8")
        expected = "expected TRL's trainer_state.json (an object with a 'log_history' list)"
    elif problem == "no_rewards":
        log = write_state(tmp_path / "eval.json", [])
        expected = "expected training logs with a reward, found none"
    elif problem == "unknown_term":
        config = tmp_path / "other.yaml"
        config.write_text(REWARD.replace("proxy", "judge").replace("gold: strict", "gold: judge"), encoding="utf-8")
        expected = f"{log}: no values for term 'judge' of {config} (the log has rewards for: proxy, strict)"
    elif problem == "bad_config":
        config = tmp_path / "bad.yaml"
        config.write_text(REWARD.replace("gold: strict", "gold: x"), encoding="utf-8")
        expected = f"{config}: monitor.gold: expected the name of a term (proxy, strict), got 'x'"
    else:
        extra = ["--import", "no_such_module_anywhere"]
        expected = "--import no_such_module_anywhere: importing it failed"
    assert main(["audit", str(log), "--config", str(config), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and expected in captured.err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", "log.json"]) == 2  # --config is required
    assert "--config" in capsys.readouterr().err

