"""``rewardkit stress``: loopholes found with their exploit, honest rewards left alone, bad input located."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rewardkit import RewardComposer
from rewardkit.cli import main
from rewardkit.errors import ConfigError
from rewardkit.stress_spec import FAMILY_NAMES
from rewardkit.stress import FAMILIES, read_rows, stress
from rewardkit.stress.families import SEARCH
from rewardkit.stress.probes import boxed_span, find_reference

from rewardkit import registry

_REGISTERED_BEFORE = set(registry._REGISTRY)
from examples.grpo.terms import ArithmeticStrict  # noqa: E402
from examples.monitor.terms import StrictEquation, strict_correct  # noqa: E402
from examples.stress.terms import JsonExact  # noqa: E402

#: the example gold terms, registered for each test only (other tests list the registry exactly)
EXAMPLE_TERMS = {**{name: registry._REGISTRY[name] for name in set(registry._REGISTRY) - _REGISTERED_BEFORE},
                 "strict_equation": StrictEquation, "json_exact": JsonExact, "arithmetic_strict": ArithmeticStrict}
for _name in set(registry._REGISTRY) - _REGISTERED_BEFORE:  # whatever the examples registered on import
    registry._REGISTRY.pop(_name, None)


@pytest.fixture(autouse=True)
def example_terms():
    before = dict(registry._REGISTRY)
    registry._REGISTRY.update(EXAMPLE_TERMS)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before)

ROOT = Path(__file__).resolve().parents[3]
ROWS = ROOT / "examples" / "stress" / "rows"
LENIENT = ROOT / "examples" / "monitor" / "lenient.yaml"
HONEST = ROOT / "examples" / "monitor" / "honest.yaml"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["stress", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_lenient_reward_pays_a_wrong_equation_in_full_and_the_report_shows_it(capsys):
    code, out, _ = run(capsys, str(LENIENT), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--json", "--budget-s", "10")
    assert code == 1
    report = json.loads(out)
    assert set(report) >= {"loopholes", "unpaid_controls", "families", "rows", "evaluations", "seconds"}
    holes = {h["family"]: h for h in report["loopholes"]}
    hole = holes["reasoning_changed"]
    assert hole["total"] == hole["control_total"] == 2.0
    assert hole["terms"]["format"] == 1.0 and hole["terms"]["correct"] == 1.0
    assert hole["rows_held"] == report["rows"] == 8
    rows = [json.loads(line) for line in (ROWS / "arithmetic.jsonl").read_text().splitlines()]
    prompt = rows[hole["row"]]["prompt"]
    assert not strict_correct(prompt, hole["completion"])  # the exploit is wrong by the gold term's own test
    assert strict_correct(prompt, rows[hole["row"]]["completion"])
    assert {f["name"] for f in report["families"]} == set(FAMILY_NAMES)


def test_the_text_report_names_the_family_the_share_and_the_paying_terms(capsys):
    code, out, _ = run(capsys, str(LENIENT), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--budget-s", "5")
    assert code == 1
    line = next(s for s in out.splitlines() if s.startswith("- reasoning_changed"))
    assert "earns 100% of the control" in line and "format +1.00, correct +1.00" in line


def test_an_honest_reward_exits_0(capsys):
    code, out, _ = run(capsys, str(HONEST), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--budget-s", "5")
    assert code == 0, out
    assert "no loophole" in out


@pytest.mark.parametrize("config, rows, family", [
    ("seeded/answer_only.yaml", "gsm8k", "reasoning_changed"),
    ("seeded/last_number.yaml", "gsm8k", "several_answers"),
    ("seeded/words_alone.yaml", "instructions", "required_words"),
    ("seeded/brevity_empty.yaml", "arithmetic", "empty"),
    ("seeded/json_empty.yaml", "json", "answer_changed"),
    ("seeded/applies_gap.yaml", "mixed", "answer_changed"),
    ("seeded/several_boxed.yaml", "boxed", "several_answers"),
])
def test_each_seeded_loophole_is_found_by_its_family(config, rows, family):
    composer = RewardComposer.from_yaml(ROOT / "examples" / "stress" / config)
    report = stress(composer, _rows(composer, ROWS / f"{rows}.jsonl"), budget_s=5)
    assert family in {h.family for h in report.loopholes}


@pytest.mark.parametrize("config, rows", [("honest/strict_only.yaml", "arithmetic"), ("honest/gsm8k_anchored.yaml", "gsm8k"),
                                          ("honest/boxed_single.yaml", "boxed"), ("honest/json_strict.yaml", "json"),
                                          ("honest/applies_all.yaml", "mixed"), ("honest/instructions.yaml", "instructions")])
def test_honest_rewards_have_no_loophole(config, rows):
    composer = RewardComposer.from_yaml(ROOT / "examples" / "stress" / config)
    report = stress(composer, _rows(composer, ROWS / f"{rows}.jsonl"), budget_s=5)
    assert report.clean, [h.to_dict() for h in report.loopholes]


def _rows(composer: RewardComposer, path: Path):
    text_keys = frozenset(s.key for s in composer.reader.slots if s.text)
    return read_rows(str(path), composer.context_keys(), composer.required_context_keys() - {"completion"}, text_keys)


def test_a_control_the_reward_cannot_pay_is_reported_unpaid(tmp_path, capsys):
    config = tmp_path / "misread.yaml"  # the whole reply against the reference: the asked-for equation never matches
    config.write_text("version: 1\ncomponents:\n  correct: {type: answer_match, params: {mode: exact}, weight: 1.0}\n"
                      "  strict: {type: strict_equation, weight: 0.0}\nstress: {gold: strict}\n")
    code, out, _ = run(capsys, str(config), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--json", "--budget-s", "3")
    report = json.loads(out)
    assert code == 1
    assert len(report["unpaid_controls"]) == 8
    assert report["unpaid_controls"][0]["row"] == 0 and report["unpaid_controls"][0]["best"] == 1.0


def test_the_margin_makes_partial_credit_for_a_wrong_answer_a_loophole(tmp_path):
    spec = {"version": 1, "components": {"correct": {"type": "answer_match", "params": {"mode": "numeric"}, "weight": 1.0},
                                         "format": {"type": "regex_match", "params": {"pattern": r"\d+ \+ \d+ = \d+$"},
                                                    "weight": 1.0},
                                         "strict": {"type": "strict_equation", "weight": 0.0}},
            "stress": {"gold": "strict", "families": {"reasoning_changed": False, SEARCH: False}}}
    rows = _rows(RewardComposer.from_dict(spec), ROWS / "arithmetic.jsonl")
    strict = stress(RewardComposer.from_dict(spec), rows, budget_s=3)
    assert "answer_changed" not in {h.family for h in strict.loopholes}  # 1.0 of 2.0: below the control
    spec["stress"]["margin"] = 1.0
    lenient = stress(RewardComposer.from_dict(spec), rows, budget_s=3)
    hole = next(h for h in lenient.loopholes if h.family == "answer_changed")
    assert hole.total == 1.0 and hole.control_total == 2.0 and hole.terms["format"] == 1.0


def test_families_turned_off_are_not_tried():
    spec = RewardComposer.from_yaml(LENIENT).to_dict()
    spec["stress"] = {"families": {"reasoning_changed": False, SEARCH: False}}
    composer = RewardComposer.from_dict(spec)
    report = stress(composer, _rows(composer, ROWS / "arithmetic.jsonl"), budget_s=3)
    tried = {f.name: f.tried for f in report.families}
    assert "reasoning_changed" not in tried and SEARCH not in tried
    assert report.clean  # the lenient reward's hole needs the left side changed


def test_the_stress_section_is_validated_with_every_error_located(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("version: 1\ncomponents:\n  correct: {type: answer_match, weight: 1.0}\n"
                      "stress: {gold: nope, margin: -1, budget_s: 0, families: {padded: 1, nonsense: true}, extra: 1}\n")
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(config)
    text = str(info.value)
    for where in ("stress.gold", "stress.margin", "stress.budget_s", "stress.families.padded",
                  "stress.families.nonsense", "stress.extra"):
        assert where in text, (where, text)


def test_the_family_list_of_the_config_schema_is_the_families_run():
    assert [*FAMILIES, SEARCH] == list(FAMILY_NAMES)


@pytest.mark.parametrize("content, suffix, expected", [
    ('{"prompt": "What is 2 + 3?", "reference": "5"}\n', ".jsonl", "expected a 'completion' column"),
    ('{"prompt": "x", "completion": "5"\n', ".jsonl", ":1: expected one JSON object per line"),
    ('[1, 2]\n', ".jsonl", ":1: expected a JSON object"),
    ('prompt,completion\nWhat is 2 + 3?,2 + 3 = 5\n', ".csv", "missing column 'reference'"),
    ('', ".jsonl", "expected at least one row"),
])
def test_bad_rows_exit_2_with_the_file_and_line(tmp_path, capsys, content, suffix, expected):
    rows = tmp_path / f"rows{suffix}"
    rows.write_text(content)
    code, _, err = run(capsys, str(LENIENT), "--data", str(rows), "--import", "examples.stress.terms")
    assert code == 2
    assert str(rows) in err and expected in err, err


def test_a_missing_config_or_an_unknown_import_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, str(tmp_path / "none.yaml"), "--data", str(ROWS / "arithmetic.jsonl"))
    assert code == 2 and "none.yaml" in err
    code, _, err = run(capsys, str(LENIENT), "--data", str(ROWS / "arithmetic.jsonl"), "--import", "no_such_module_x")
    assert code == 2 and "no_such_module_x" in err


def test_csv_rows_and_a_module_from_the_working_directory(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_terms_for_stress.py").write_text(
        "from rewardkit import register\nfrom rewardkit.components._text import TextReward\n"
        "@register('always_one_for_stress')\nclass AlwaysOne(TextReward):\n"
        "    inputs = {'completion': 0}\n    text_inputs = frozenset({'completion'})\n    output_range = (0.0, 1.0)\n"
        "    def score(self, completion):\n        return 1.0\n")
    (tmp_path / "r.yaml").write_text("version: 1\ncomponents:\n  one: {type: always_one_for_stress, weight: 1.0}\n")
    (tmp_path / "rows.csv").write_text("prompt,reference,completion\nWhat is 2 + 3?,5,2 + 3 = 5\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    code, out, err = run(capsys, "r.yaml", "--data", "rows.csv", "--import", "my_terms_for_stress", "--json",
                         "--budget-s", "2")
    assert code == 1, err  # a reward that pays everything: the empty reply earns as much as the control
    assert "empty" in {h["family"] for h in json.loads(out)["loopholes"]}


def test_the_budget_bounds_the_run_and_the_report_says_it_stopped(tmp_path):
    lines = (ROWS / "arithmetic.jsonl").read_text().splitlines() * 400
    rows_file = tmp_path / "many.jsonl"
    rows_file.write_text("\n".join(lines) + "\n")
    composer = RewardComposer.from_yaml(HONEST)
    report = stress(composer, _rows(composer, rows_file), budget_s=0.2)
    assert not report.complete
    assert any("budget" in note for note in report.notes)


class _LengthScorer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = json.dumps({"scores": [min(1.0, len(c) / 100) for c in body["completions"]]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def test_a_remote_judge_that_pays_length_is_asked_and_its_requests_counted():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LengthScorer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        spec = {"version": 1, "components": {
            "judge": {"type": "remote_score", "params": {"url": f"http://127.0.0.1:{server.server_port}/score",
                                                         "batch_size": 64}, "weight": 1.0},
            "correct": {"type": "answer_match", "params": {"mode": "numeric"}, "weight": 0.5},
            "strict": {"type": "strict_equation", "weight": 0.0}}, "stress": {"gold": "strict"}}
        composer = RewardComposer.from_dict(spec)
        report = stress(composer, _rows(composer, ROWS / "arithmetic.jsonl"), budget_s=5)
        composer.close()
    finally:
        server.shutdown()
    assert report.requests > 0
    padded = next(h for h in report.loopholes if h.family == "padded")
    assert padded.terms["judge"] > 0.9 and len(padded.completion) > 90


def test_answer_spans_read_boxes_in_one_pass_and_numbers_by_value():
    assert boxed_span(r"so \boxed{\frac{1}{2}} and \boxed{3") == (10, 21)
    assert boxed_span("\\boxed{" * 20_000) is None
    assert boxed_span(r"\boxed{1} \boxed{2}") == (17, 18)
    text = "1,000 apples, then 1000"
    assert find_reference(text, "1000") == (19, 23)
    assert find_reference("The capital is Paris.", "paris") == (15, 20)
    assert find_reference("4O", "40") is None


PARTIAL = ROOT / "examples" / "monitor" / "partial.yaml"


def _partial(margin: float, inversions: str | None = None, **families: bool) -> RewardComposer:
    spec = RewardComposer.from_yaml(PARTIAL).to_dict()
    spec["stress"] = {"gold": "strict", "margin": margin, "families": families,
                      **({"inversions": inversions} if inversions else {})}
    return RewardComposer.from_dict(spec)


def test_a_wrong_sum_paid_above_the_bare_right_answer_is_an_inversion_without_any_margin(capsys):
    composer = _partial(0.0)
    report = stress(composer, _rows(composer, ROWS / "grpo_arithmetic.jsonl"), budget_s=5)
    # no wrong sum reaches the right equation's total (a stray character before it does: padded)
    assert "answer_changed" not in {h.family for h in report.loopholes}
    assert report.inversions and report.inversion_mode == "warn"
    worst = report.inversions[0]
    assert worst.total > worst.bare_total and worst.terms["format"] > 0 and worst.bare_terms["format"] == 0
    assert worst.bare.strip().isdigit()  # the bare right answer
    row = _rows(composer, ROWS / "grpo_arithmetic.jsonl")[worst.row]
    assert row.reference not in worst.completion  # the climb lost the answer
    failing = _partial(0.0, "fail", padded=False, search=False)  # only the inversion left to find
    warned = _partial(0.0, None, padded=False, search=False)
    assert stress(warned, _rows(warned, ROWS / "grpo_arithmetic.jsonl"), budget_s=5).clean  # a warning: exit 0
    assert not stress(failing, _rows(failing, ROWS / "grpo_arithmetic.jsonl"), budget_s=5).clean
    off = _partial(0.0, "off")
    assert not stress(off, _rows(off, ROWS / "grpo_arithmetic.jsonl"), budget_s=5).inversions


def test_the_report_warns_of_inversions_and_json_lists_them(tmp_path, capsys):
    config = tmp_path / "partial.yaml"
    spec = RewardComposer.from_yaml(PARTIAL).to_dict()
    spec["stress"] = {"gold": "strict", "families": {"padded": False, "search": False}}
    import yaml
    config.write_text(yaml.safe_dump(spec))
    data = str(ROWS / "grpo_arithmetic.jsonl")
    code, out, _ = run(capsys, str(config), "--data", data, "--import", "examples.monitor.terms", "--budget-s", "5")
    assert code == 0 and "inversion" in out.splitlines()[0] and "form over substance" in out
    code, out, _ = run(capsys, str(config), "--data", data, "--import", "examples.monitor.terms", "--budget-s", "5",
                       "--json")
    report = json.loads(out)
    assert report["inversion_mode"] == "warn" and report["inversions"]
    assert set(report["inversions"][0]) >= {"row", "completion", "total", "bare", "bare_total", "control_total", "terms"}


@pytest.mark.parametrize("config, rows", [(HONEST, "arithmetic"), (ROOT / "examples/stress/honest/applies_all.yaml", "mixed"),
                                          (ROOT / "examples/stress/honest/json_strict.yaml", "json")])
def test_honest_rewards_have_no_inversion_and_a_form_gate_is_not_one(config, rows):
    # applies_all and json_strict pay nothing outside the asked-for form: a formatted wrong reply above
    # the bare answer (0) is their design, not a hole
    composer = RewardComposer.from_yaml(config)
    report = stress(composer, _rows(composer, ROWS / f"{rows}.jsonl"), budget_s=5)
    assert report.clean and not report.inversions


def test_inversions_accepts_only_its_modes(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("version: 1\ncomponents:\n  correct: {type: answer_match, weight: 1.0}\nstress: {inversions: loud}\n")
    with pytest.raises(ConfigError, match=r"stress\.inversions.*warn, fail, off"):
        RewardComposer.from_yaml(config)


def test_the_report_names_the_terms_to_watch_in_training(capsys):
    """``watch``: the terms with a positive contribution to a loophole's exploit or an inversion's wrong
    reply, gold aside; what ``rewardkit audit --stress`` watches on the run's completions."""
    code, out, _ = run(capsys, str(LENIENT), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--json", "--budget-s", "10")
    assert code == 1 and json.loads(out)["watch"] == ["format", "correct"]
    code, out, _ = run(capsys, str(LENIENT), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--budget-s", "10")
    assert any(line.startswith("  watch in training: monitor.watch: [format, correct] (") for line in out.splitlines())
    code, out, _ = run(capsys, str(HONEST), "--data", str(ROWS / "arithmetic.jsonl"), "--import",
                       "examples.stress.terms", "--json", "--budget-s", "5")
    assert code == 0 and json.loads(out)["watch"] == []
    # an inversion alone names its paying terms too (the margin is 0, so no wrong sum is a loophole)
    composer = _partial(0.0, None, padded=False, search=False)
    report = stress(composer, _rows(composer, ROWS / "grpo_arithmetic.jsonl"), budget_s=5)
    assert report.inversions and not [h for h in report.loopholes if h.family == "answer_changed"]
    assert {"format", "operands"} <= set(report.watch) and "strict" not in report.watch
    assert "brevity" not in report.watch  # a penalty adds nothing positive
