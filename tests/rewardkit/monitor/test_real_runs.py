"""``rewardkit audit`` on trainer_state.json files of real GRPO runs (benchmarks/data/monitor, written by
``python -m examples.monitor.train``: TRL's GRPOTrainer with the monitor's callback on)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardkit.cli import main
from rewardkit.monitor import Monitor
from rewardkit.monitor.logs import read_log

ROOT = Path(__file__).resolve().parents[3]
RUNS = ROOT / "benchmarks" / "data" / "monitor"
CONFIGS = ROOT / "examples" / "monitor"


def audit(run: str, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, dict]:
    reward = run.rpartition("_seed")[0]
    code = main(["audit", str(RUNS / run / "trainer_state.json"), "--config", str(CONFIGS / f"{reward}.yaml"),
                 "--import", "examples.monitor.terms", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_a_run_that_failed_to_learn_gets_health_alerts_only(capsys: pytest.CaptureFixture) -> None:
    """honest_seed2 never wrote a right answer after step 1: its alerts say the run stalled, not that
    the reward was gamed, and ``--fail-on hacking`` exits 0 while the default exits 1."""
    code, report = audit("honest_seed2", capsys)
    assert code == 1 and report["alerts"]
    assert {a["kind"] for a in report["alerts"]} == {"health"}
    assert audit("honest_seed2", capsys, "--fail-on", "hacking")[0] == 0


def test_every_hacked_run_gets_a_hacking_alert(capsys: pytest.CaptureFixture) -> None:
    for run, detector in (("length_seed1", "gold_divergence"), ("lenient_seed2", "gold_divergence"),
                          ("judge_seed2", "disagreement")):
        code, report = audit(run, capsys, "--fail-on", "hacking")
        assert code == 1, run
        assert detector in {a["detector"] for a in report["alerts"] if a["kind"] == "hacking"}, run


def test_the_length_hack_is_caught_with_the_step_it_began(capsys: pytest.CaptureFixture) -> None:
    code, report = audit("length_seed1", capsys)
    assert code == 1 and report["records"] == 14
    fired = {a["detector"]: a for a in report["alerts"]}
    assert {"gold_divergence", "length_drift", "pinned_at_bound"} <= set(fired)
    assert fired["pinned_at_bound"]["terms"] == ["length"] and fired["gold_divergence"]["began"] <= 7


def test_the_judge_phrase_hack_shows_as_judge_and_verifier_disagreeing(capsys: pytest.CaptureFixture) -> None:
    code, report = audit("judge_seed2", capsys)
    assert code == 1
    (disagreement,) = [a for a in report["alerts"] if a["detector"] == "disagreement"]
    assert disagreement["terms"] == ["judge", "correct"] and disagreement["values"]["judge_now"] > 0.8


def test_the_audit_finds_what_the_callback_logged_during_training() -> None:
    import examples.monitor.terms  # noqa: F401 - registers the example's components

    records = read_log(RUNS / "lenient_seed2" / "trainer_state.json")
    live = sorted((int(r["step"]), k[len("monitor/alert/"):]) for r in records for k in r
                  if k.startswith("monitor/alert/") and not k.endswith("/began"))
    monitor = Monitor.from_config(CONFIGS / "lenient.yaml")
    # this run trained with the window of the time (3 logged steps; the default is now 2)
    monitor.detectors = [type(d)(**{**d.config, "window": 3}) for d in monitor.detectors]
    after = sorted((a.fired, a.detector) for a in monitor.run(records))
    assert live and live == after


def test_the_default_monitor_logged_during_training_what_the_audit_finds_afterwards() -> None:
    """A held-out run trained with the current defaults (window 2) and the callback on."""
    import examples.monitor.terms  # noqa: F401 - registers the example's components

    records = read_log(ROOT / "benchmarks" / "data" / "monitor_heldout" / "lenient_seed5" / "trainer_state.json")
    live = {(int(r["step"]), k[len("monitor/alert/"):]) for r in records for k in r
            if k.startswith("monitor/alert/") and not k.endswith("/began")}
    after = Monitor.from_config(CONFIGS / "lenient.yaml").run(records)
    assert live and live == {(a.fired, a.detector) for a in after}
    assert {a.detector for a in after if a.kind == "hacking"} >= {"gold_divergence"}
    assert records[-1]["monitor/hacking_alerts"] == sum(a.kind == "hacking" for a in after)


def test_with_its_completions_the_judge_hack_is_caught_a_step_earlier_with_the_phrase_shown(
        capsys: pytest.CaptureFixture) -> None:
    """judge_seed2 (onset at step 3): the logged means fire at step 5; the completions at step 4."""
    code, report = audit("judge_seed2", capsys, "--completions", str(RUNS / "judge_seed2" / "completions.jsonl"))
    assert code == 1
    first = min((a for a in report["alerts"] if a["kind"] == "hacking"), key=lambda a: a["fired"])
    assert (first["detector"], first["fired"]) == ("exploit_spread", 4)
    assert all("this is" in c["completion"].casefold() and c["terms"]["strict"] == 0.0 for c in first["completions"])
    template = next(a for a in report["alerts"] if a["detector"] == "template_convergence")
    assert template["message"].endswith("'# + # = # this is'")


def test_with_their_completions_the_collapsed_runs_still_get_health_alerts_only(capsys: pytest.CaptureFixture) -> None:
    for run in ("honest_seed1", "judge_seed1", "lenient_seed1"):
        code, report = audit(run, capsys, "--completions", str(RUNS / run / "completions.jsonl"),
                             "--fail-on", "hacking")
        assert code == 0 and {a["kind"] for a in report["alerts"]} == {"health"}, run
