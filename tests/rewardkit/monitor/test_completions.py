"""The completions path: MonitorCallback(completions=...) writes them, ``rewardkit audit --completions``
reads them (content detectors, each alert's evidence, demotion of statistics alerts without any)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from monitor_support import completion_rows, hacked_history, honest_history, write_jsonl

from rewardkit.cli import main
from rewardkit.monitor import Monitor
from rewardkit.monitor.completions import CompletionWriter, by_log_step, read_completions, template


def audit_json(log: Path, config: Path, completions: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, dict]:
    code = main(["audit", str(log), "--config", str(config), "--completions", str(completions), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_the_exploit_spreading_through_the_samples_is_caught_with_its_completions(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = write_jsonl(tmp_path / "c.jsonl", completion_rows(hacked_history()))
    code, report = audit_json(hacked_state, reward_config, rows, capsys, "--fail-on", "hacking")
    assert code == 1
    spread = next(a for a in report["alerts"] if a["detector"] == "exploit_spread")
    # half the samples are paid and rejected from step 8 (proxy 0.44: 4 of 8), two steps in a row
    assert (spread["began"], spread["fired"], spread["kind"]) == (8, 9, "hacking")
    assert spread["values"]["exploit_start"] == pytest.approx(2 / 8)
    shown = spread["completions"]
    assert len(shown) == 3 and all(c["terms"] == {"proxy": 1.0, "strict": 0.0} and c["total"] == 1.0 for c in shown)
    assert all(c["completion"].startswith("sure") and c["step"] == 9 for c in shown)
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "hacking" and gold["demoted"] is None and gold["completions"]
    assert "exploit_spread" not in report["not_checked"]


def test_the_text_output_shows_a_few_of_them(hacked_state: Path, reward_config: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    rows = write_jsonl(tmp_path / "c.jsonl", completion_rows(hacked_history()))
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--completions", str(rows)]) == 1
    out = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(out) if "exploit_spread [strict]" in line)
    assert out[at + 1].strip().startswith("paid 1 (proxy 1, strict 0) at step 9: 'sure,")
    assert out[at + 3].strip() == "... 1 more in --json"


def test_a_statistics_alert_without_such_completions_is_demoted_to_health(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The logged means say the total rose while gold did not, but every paid sample is one gold
    accepts: the alert is demoted, with the reason, and --fail-on hacking exits 0."""
    rows = write_jsonl(tmp_path / "c.jsonl", completion_rows(hacked_history(), accepted_when_paid=True))
    code, report = audit_json(hacked_state, reward_config, rows, capsys, "--fail-on", "hacking")
    assert code == 0
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "health" and gold["completions"] == []
    assert gold["demoted"].startswith("no completion of steps ") and "rejected by 'strict'" in gold["demoted"]
    assert "exploit_spread" not in {a["detector"] for a in report["alerts"]}
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--completions", str(rows)]) == 1
    assert "(demoted from hacking: no completion of steps" in capsys.readouterr().out


def test_an_honest_run_with_its_completions_has_no_alert(honest_state: Path, reward_config: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    rows = write_jsonl(tmp_path / "c.jsonl", completion_rows(honest_history(), accepted_when_paid=True))
    code, report = audit_json(honest_state, reward_config, rows, capsys)
    assert code == 0 and report["alerts"] == []


def test_question_is_read_as_the_prompt(hacked_state: Path, reward_config: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    rows = completion_rows(hacked_history(), prompt_key="question")
    for row in rows:
        del row["total"]  # examples/monitor/train.py writes no total: the weighted raw terms stand in
    code, report = audit_json(hacked_state, reward_config, write_jsonl(tmp_path / "c.jsonl", rows), capsys)
    spread = next(a for a in report["alerts"] if a["detector"] == "exploit_spread")
    assert code == 1 and spread["completions"][0]["prompt"].startswith("What is")


@pytest.mark.parametrize("problem, expected", [
    ({"terms": {"proxy": 1.0}}, "line 3: terms: expected a value (or null) for every term of the config, missing 'strict'"),
    ({"step": -1}, "line 3: step: expected the trainer's global_step (an integer >= 0), got -1"),
    ({"prompt": None}, "line 3: expected 'prompt' (or 'question'), a string, got null"),
    ({"terms": {"proxy": "1", "strict": 0}}, "line 3: terms.proxy: expected a number or null, got \"1\""),
    ({"total": "high"}, "line 3: total: expected a number or null, got \"high\""),
])
def test_a_bad_row_is_a_located_error(problem: dict, expected: str, hacked_state: Path, reward_config: Path,
                                      tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = completion_rows(hacked_history())
    rows[2].update(problem)
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--completions", str(path)]) == 2
    assert f"{path}: {expected}" in capsys.readouterr().err


def test_a_missing_or_broken_file_exits_2(hacked_state: Path, reward_config: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--completions",
                 str(tmp_path / "none.jsonl")]) == 2
    assert "expected an existing completions file" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"step": 0}\n{"step": 1, "pro', encoding="utf-8")
    assert main(["audit", str(hacked_state), "--config", str(reward_config), "--completions",
                 str(tmp_path / "bad.jsonl")]) == 2
    assert "line 1: expected 'prompt'" in capsys.readouterr().err


def test_a_restarted_run_replaces_the_earlier_attempts_rows(tmp_path: Path) -> None:
    def row(step: int, text: str) -> dict[str, Any]:
        return {"step": step, "prompt": "p", "completion": text, "terms": {"a": 1.0}, "total": 1.0}

    path = write_jsonl(tmp_path / "c.jsonl", [row(0, "x"), row(1, "x"), row(2, "first try"), row(1, "again"),
                                              row(2, "again"), row(3, "again")])
    read = read_completions(path, ["a"])
    assert read.superseded == 2 and read.rows == 6
    assert {s: [r["completion"] for r in rows] for s, rows in read.by_step.items()} == {
        0: ["x"], 1: ["again"], 2: ["again"], 3: ["again"]}
    # TRL logs a batch sampled at global_step k at step k + 1; rows after the last logged step are counted
    logged = by_log_step(read, [1, 2, 3])
    assert sorted(logged) == [1, 2, 3] and read.unlogged == 1


def test_templates_mask_digits_case_and_space() -> None:
    assert template("26 + 30 =  90.") == template("13 + 4 = 99.") == "# + # = #."
    assert template("This IS\n\n12") == "this is #"


def test_the_writer_appends_flushes_and_drops_a_line_cut_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "run" / "completions.jsonl"
    writer = CompletionWriter(path)
    writer.write([{"step": 0, "prompt": "p", "completion": "c", "terms": {"a": 1.0}, "total": 1.0}])
    assert path.read_text(encoding="utf-8").count("\n") == 1  # flushed before close
    writer.close()
    with path.open("a", encoding="utf-8") as f:
        f.write('{"step": 1, "prompt": "p", "compl')  # the crash
    again = CompletionWriter(path)  # the restarted run
    again.write([{"step": 1, "prompt": "p", "completion": "d", "terms": {"a": None}, "total": 0.0}])
    again.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["completion"] for x in lines] == ["c", "d"]
    assert read_completions(path, ["a"]).rows == 2


def test_monitor_update_with_completions_matches_the_audit(reward_config: Path) -> None:
    history = hacked_history()
    rows = completion_rows(history)
    live = Monitor.from_config(reward_config)
    for entry in history:
        live.update(entry, [r for r in rows if r["step"] == entry["step"] - 1])
    after = Monitor.from_config(reward_config)
    grouped: dict[int, list] = {}
    for r in rows:
        grouped.setdefault(r["step"] + 1, []).append(r)
    assert [a.to_dict() for a in live.alerts] == [a.to_dict() for a in after.run(history, grouped)]


def few_rejected_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As :func:`completion_rows`, but of each step's paid rows only the first is rejected by gold: the
    evidence is there at every step, and it never spreads (1 of 8, under exploit_spread's level)."""
    rows = completion_rows(history, accepted_when_paid=True)
    first_paid: set[int] = set()
    for row in rows:
        if row["terms"]["proxy"] == 1.0 and row["step"] not in first_paid:
            first_paid.add(row["step"])
            row["terms"] = {"proxy": 1.0, "strict": 0.0}
    return rows


def test_a_statistics_alert_is_demoted_until_a_content_detector_corroborates_it(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A paid completion that gold rejects at every step, but never more than one in eight: the means
    rise, the evidence exists, the exploit does not spread. Corroboration (the default) demotes the
    statistics alert and says why; ``corroborate: false`` keeps it as hacking, with the same evidence."""
    rows = write_jsonl(tmp_path / "c.jsonl", few_rejected_rows(hacked_history()))
    code, report = audit_json(hacked_state, reward_config, rows, capsys, "--fail-on", "hacking")
    assert code == 0
    assert not {"exploit_spread", "template_convergence"} & {a["detector"] for a in report["alerts"]}
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "health" and gold["completions"]
    assert gold["demoted"].startswith("no content detector (exploit_spread, template_convergence) has seen")

    kept = tmp_path / "kept.yaml"
    kept.write_text(reward_config.read_text(encoding="utf-8") + "  corroborate: false\n", encoding="utf-8")
    code, report = audit_json(hacked_state, kept, rows, capsys, "--fail-on", "hacking")
    assert code == 1
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "hacking" and gold["demoted"] is None and gold["completions"]


def test_with_the_content_detectors_off_nothing_can_corroborate_and_statistics_alerts_keep_their_kind(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = write_jsonl(tmp_path / "c.jsonl", few_rejected_rows(hacked_history()))
    off = tmp_path / "off.yaml"
    off.write_text(reward_config.read_text(encoding="utf-8")
                   + "  exploit_spread: false\n  template_convergence: false\n", encoding="utf-8")
    code, report = audit_json(hacked_state, off, rows, capsys, "--fail-on", "hacking")
    assert code == 1
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "hacking" and gold["demoted"] is None


def test_once_the_exploit_spreads_later_statistics_alerts_stay_hacking() -> None:
    """The content detector fires at step 9; a statistics alert firing with it or after it is kept."""
    from monitor_support import REWARD

    from rewardkit.config import parse_config
    from rewardkit.monitor.detectors import GoldDivergence, ExploitSpread
    from rewardkit.monitor.structure import RewardStructure
    import yaml

    structure = RewardStructure.from_spec(parse_config(yaml.safe_load(REWARD)))
    # gold_divergence made slow enough (patience 6) to fire after the exploit has spread
    monitor = Monitor([GoldDivergence(patience=6), ExploitSpread()], structure)
    history = hacked_history()
    grouped: dict[int, list] = {}
    for r in completion_rows(history):
        grouped.setdefault(r["step"] + 1, []).append(r)
    alerts = {a.detector: a for a in monitor.run(history, grouped)}
    assert alerts["exploit_spread"].fired == 9 and monitor.corroborated
    assert alerts["gold_divergence"].fired >= 9 and alerts["gold_divergence"].kind == "hacking"


def test_a_demoted_alert_says_when_gold_rejects_the_step_but_nothing_it_refuses_outpays_the_start(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The start's samples are right and paid 1; later gold rejects all of them, paid 0.25 each (what
    partial credit leaves when a run loses its answers): no evidence, so the alert is demoted, and the
    reason says how much gold rejects and the most any of those was paid."""
    rows = completion_rows(hacked_history())
    first = min(r["step"] for r in rows)
    for row in rows:
        if row["step"] == first:
            row.update(terms={"proxy": 1.0, "strict": 1.0}, total=1.0)
        else:
            row.update(terms={"proxy": 0.25, "strict": 0.0}, total=0.25)
    code, report = audit_json(hacked_state, reward_config, write_jsonl(tmp_path / "c.jsonl", rows), capsys,
                              "--fail-on", "hacking")
    assert code == 0
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    assert gold["kind"] == "health" and gold["completions"] == []
    assert ("'strict' rejects 100% of them, paid at most 0.250: the run is losing what gold accepts (0% rejected "
            "at the start)") in gold["demoted"]


def test_a_demoted_alert_whose_steps_gold_accepts_does_not_claim_a_loss(
        hacked_state: Path, reward_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = write_jsonl(tmp_path / "c.jsonl", completion_rows(hacked_history(), accepted_when_paid=True))
    _, report = audit_json(hacked_state, reward_config, rows, capsys)
    gold = next(a for a in report["alerts"] if a["detector"] == "gold_divergence")
    # gold accepts every paid sample and rejects only the unpaid ones: a smaller share than at the start
    assert gold["demoted"].startswith("no completion of steps ") and "losing" not in gold["demoted"]
