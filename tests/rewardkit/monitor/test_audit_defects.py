"""The audit's defects found by the fifth adversarial probe, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

import pytest
from monitor_support import REWARD, hacked_history, trl_log

from rewardkit.cli import main
from rewardkit.monitor import GoldDivergence, History, Monitor, RewardStructure
from rewardkit.monitor.audit import EXIT_INTERNAL


def state(path: Path, history: list[dict]) -> Path:
    """A trainer_state.json as TRL writes it (json.dumps writes NaN as NaN, as transformers does)."""
    path.write_text(json.dumps({"global_step": len(history), "log_history": history}), encoding="utf-8")
    return path


def audit(log: Path, config: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, dict]:
    code = main(["audit", str(log), "--config", str(config), "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def test_a_nan_in_a_key_is_read_as_missing_not_a_refused_log(tmp_path: Path, reward_config: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    history = hacked_history()
    history[3]["grad_norm"] = float("nan")  # a diverged step
    history[4]["rewards/strict/mean"] = float("nan")  # a term no sample applied to
    code, report = audit(state(tmp_path / "s.json", history), reward_config, capsys, "--fail-on", "hacking")
    assert code == 1 and report["missing_values"] == {"grad_norm": 1, "rewards/strict/mean": 1}
    assert "gold_divergence" in {a["detector"] for a in report["alerts"]}
    assert any("non-finite values as missing" in note for note in report["notes"])


@pytest.mark.parametrize("bad", ["0.5", None, True])
def test_a_reward_that_is_not_a_number_is_a_located_error(bad: object, tmp_path: Path, reward_config: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    history = hacked_history()
    for entry in history:
        entry["reward"] = bad if isinstance(bad, bool) or bad is None else str(entry["reward"])
    log = state(tmp_path / "s.json", history)
    assert main(["audit", str(log), "--config", str(reward_config), "--fail-on", "hacking"]) == 2
    err = capsys.readouterr().err
    assert f"{log}: log_history[0].reward: expected a number (the step's mean reward), got" in err


def test_out_of_order_steps_are_sorted_and_said(tmp_path: Path, reward_config: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    history = hacked_history()
    _, ordered = audit(state(tmp_path / "a.json", history), reward_config, capsys)
    shuffled = history[:]
    random.Random(3).shuffle(shuffled)
    code, report = audit(state(tmp_path / "b.json", shuffled), reward_config, capsys)
    assert code == 1 and report["sorted"] is True and report["alerts"] == ordered["alerts"]
    assert main(["audit", str(tmp_path / "b.json"), "--config", str(reward_config)]) == 1
    assert "note: the log's steps were out of order; they were sorted by step" in capsys.readouterr().out


def test_two_records_of_one_step_are_an_error(tmp_path: Path, reward_config: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    history = hacked_history()
    history.append(dict(history[4]))
    assert main(["audit", str(state(tmp_path / "s.json", history)), "--config", str(reward_config)]) == 2
    assert "log_history[4] and log_history[20] both log step 5" in capsys.readouterr().err


def test_a_log_too_short_for_a_detector_says_it_was_not_checked(tmp_path: Path, reward_config: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    code, report = audit(state(tmp_path / "s.json", hacked_history(3)), reward_config, capsys)
    assert code == 0
    assert report["not_checked"]["gold_divergence"] == ("the log has 3 logged steps; it needs 5 (twice its window "
                                                       "of 2, then 2 in a row)")
    assert main(["audit", str(tmp_path / "s.json"), "--config", str(reward_config)]) == 0
    assert "not checked: gold_divergence (the log has 3 logged steps" in capsys.readouterr().out


def test_a_crash_exits_3_not_1(tmp_path: Path, reward_config: Path, capsys: pytest.CaptureFixture,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Monitor, *args: object, **kwargs: object) -> list:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Monitor, "run", broken)
    code = main(["audit", str(state(tmp_path / "s.json", hacked_history())), "--config", str(reward_config)])
    assert code == EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    assert "rewardkit audit: internal error (exit 3" in err and "RuntimeError: a bug" in err


def test_import_finds_a_module_in_the_current_directory(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_cwd_terms_48.py").write_text(
        "from rewardkit import register\nfrom rewardkit.components._text import TextReward\n\n"
        "@register('always_sure_48')\nclass AlwaysSure(TextReward):\n    output_range = (0.0, 1.0)\n\n"
        "    def score(self, completion: str) -> float:\n        return 1.0\n", encoding="utf-8")
    (tmp_path / "reward.yaml").write_text(REWARD.replace("type: regex_match, params: {pattern: 'sure'}",
                                                         "type: always_sure_48"), encoding="utf-8")
    state(tmp_path / "s.json", hacked_history())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd(), str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_cwd_terms_48", raising=False)
    try:
        code = main(["audit", "s.json", "--config", "reward.yaml", "--import", "my_cwd_terms_48"])
    finally:
        from rewardkit import registry

        registry._REGISTRY.pop("always_sure_48", None)
    assert code == 1, capsys.readouterr().err


def test_history_queries_never_copy_a_whole_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-step queries (has, recent, baseline) read a count and a few values, not the column."""
    monkeypatch.setattr(History, "column", lambda self, key: pytest.fail("a per-step query copied a column"))
    reward = RewardStructure(("proxy", "strict"), gold="strict")
    alerts = Monitor([GoldDivergence()], reward).run(hacked_history(40))
    assert [a.detector for a in alerts] == ["gold_divergence"]


def test_a_step_costs_the_same_late_in_a_long_run(reward_config: Path) -> None:
    """Monitor.update (the callback's per-step work, and the audit's) does not grow with the run:
    the last 500 of 8,000 steps cost at most 4x the first 500 (before: about 16x)."""
    monitor = Monitor.from_config(reward_config)
    logs = [trl_log(s, proxy=0.5, strict=0.5) for s in range(1, 8001)]
    started = time.perf_counter()
    for log in logs[:500]:
        monitor.update(log)
    early = time.perf_counter() - started
    for log in logs[500:7500]:
        monitor.update(log)
    started = time.perf_counter()
    for log in logs[7500:]:
        monitor.update(log)
    late = time.perf_counter() - started
    assert late < 4 * early + 0.05, (early, late)

