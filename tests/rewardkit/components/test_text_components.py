"""Text components (regex_match, length_penalty, answer_match, repetition_rate) and text inputs:
values, declared promises (check_component), located config errors, bounded regular expressions."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

from rewardkit import ConfigError, RewardComposer
from rewardkit.components import AnswerMatch, LengthPenalty, RegexMatch, RepetitionRate
from rewardkit.components.regex_match import RegexTimeoutWarning, max_fast_length
from rewardkit.errors import InvalidInputError, MissingInputError
from rewardkit.testing import check_component

TEXT = {
    "version": 1,
    "components": {
        "format": {"type": "regex_match", "params": {"pattern": r"^<answer>.*</answer>$", "mode": "fullmatch"}},
        "short": {"type": "length_penalty", "params": {"unit": "words", "max": 5, "per_unit": 0.5}},
        "correct": {"type": "answer_match", "params": {"mode": "numeric", "tolerance": 0.01},
                    "inputs": {"reference": "solution"}},
        "loops": {"type": "repetition_rate", "params": {"n": 2}, "weight": -1.0},
        "latency": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "weight": -0.1},
    },
}
COMPLETIONS = ["<answer>42</answer>", "I think it is 41.99 or so, the the the the the", "<answer>x</answer> 7", ""]
SOLUTIONS = ["42", "42", "7", "3"]


@pytest.mark.parametrize("cls", [RegexMatch, LengthPenalty, AnswerMatch, RepetitionRate])
def test_check_component_covers_text_components(cls) -> None:
    params = {"pattern": r"\d+"} if cls is RegexMatch else None
    checked = check_component(cls, params=params, examples=40)
    assert "scalar_fn equals compute" in checked
    assert ("monotone as declared" in checked) == (cls is LengthPenalty)


def test_text_components_are_not_checked_in_other_array_libraries() -> None:
    with pytest.raises(ValueError, match="reads text .*libraries= does not apply"):
        check_component(LengthPenalty, libraries=("torch",), examples=2)


def test_values_of_each_text_component() -> None:
    c = RewardComposer.from_dict(TEXT)
    out = c({"completion": COMPLETIONS, "solution": SOLUTIONS, "latency": np.zeros(4)})
    np.testing.assert_array_equal(out.terms["format"].raw, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(out.terms["short"].raw, [0.0, -0.5 * (12 - 5), 0.0, 0.0])
    np.testing.assert_array_equal(out.terms["correct"].raw, [1.0, 1.0, 1.0, 0.0])
    # 12 words, 11 bigrams: ("the", "the") four times, so three repeats
    np.testing.assert_allclose(out.terms["loops"].raw, [0.0, 3 / 11, 0.0, 0.0])


def test_scalar_calls_take_a_str_and_agree_with_the_batch() -> None:
    batched = RewardComposer.from_dict(TEXT)({"completion": np.array(COMPLETIONS), "solution": SOLUTIONS,
                                             "latency": [0.0, 2.0, 3.0, 0.5]})
    single = RewardComposer.from_dict(TEXT)
    for i, (text, solution, latency) in enumerate(zip(COMPLETIONS, SOLUTIONS, [0.0, 2.0, 3.0, 0.5], strict=True)):
        out = single({"completion": text, "solution": solution, "latency": latency}, step=i)
        assert out.total == pytest.approx(float(batched.total[i]), rel=1e-12)


def test_answer_match_exact_normalizes_case_whitespace_and_punctuation() -> None:
    exact = AnswerMatch()
    assert exact.score("  The Answer:  PARIS. ", "the answer paris") == 1.0
    assert exact.score("Paris", "Lyon") == 0.0
    numeric = AnswerMatch(mode="numeric", tolerance=0.5)
    assert numeric.score("so 2 + 2 = 4.4", "4") == 1.0
    assert numeric.score("1,234 then 5", "1234") == 0.0  # the final number counts
    assert numeric.score("no number here", "4") == 0.0


@pytest.mark.parametrize("bad, where", [
    (True, "got bool"), (None, "got NoneType"), ([None, "a"], "at index 0"), (["ok", [3]], "at index 1"),
    (["ok", float("nan")], "at index 1"), (np.array([[ "a", "b"]]), "1-D array"),
    (np.array([True, False]), "1-D array of str or numbers"),
])
def test_non_text_where_text_is_expected_names_the_key(bad, where) -> None:
    c = RewardComposer.from_dict(TEXT)
    state = c.state_dict()
    with pytest.raises(InvalidInputError, match=f"context key 'completion' .*{where}"):
        c({"completion": bad, "solution": "1", "latency": 0.0})
    assert c.state_dict() == state


def test_missing_text_key_and_mixed_kinds_of_one_key() -> None:
    c = RewardComposer.from_dict(TEXT)
    with pytest.raises(MissingInputError, match="'solution'.*correct"):
        c({"completion": "a", "latency": 0.0})
    mixed = {"version": 1, "components": {
        "a": {"type": "length_penalty", "params": {"max": 1}, "inputs": {"completion": "x"}},
        "b": {"type": "info_value", "params": {"key": "x"}}}}
    with pytest.raises(ConfigError, match="'x' is read as numbers here but as text by a"):
        RewardComposer.from_dict(mixed)


def test_a_pattern_that_does_not_compile_is_a_located_config_error(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ncomponents:\n  fmt:\n    type: regex_match\n    params: {pattern: '(unclosed'}\n")
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_yaml(path)
    message = str(info.value)
    assert message.startswith(f"{path}: components.fmt.params.pattern: expected a regular expression that compiles")
    assert "'(unclosed'" in message


def test_static_analysis_sends_risky_patterns_to_the_timeout() -> None:
    assert max_fast_length(r"(a+)+$") == -1
    assert max_fast_length(r"(a|aa)*b") == -1
    assert max_fast_length(r"(\w+)\s\1") == -1
    assert max_fast_length(r"^<answer>.*</answer>$", fullmatch=True) == 10_000_000 - 1
    assert max_fast_length(r"\d+") == 3161
    assert RegexMatch(pattern=r"(a+)+$").max_fast_length == -1


@pytest.mark.parametrize("batched", [False, True])
def test_catastrophic_backtracking_is_bounded_and_reported(batched) -> None:
    c = RewardComposer.from_dict({"version": 1, "components": {
        "evil": {"type": "regex_match", "params": {"pattern": "(a+)+$", "timeout_s": 0.05}},
        "short": {"type": "length_penalty", "params": {"unit": "chars", "max": 10}}}})
    text = "a" * 5000 + "b"  # the standard engine would backtrack for longer than the universe's age
    ctx = {"completion": [text, "aaa"] if batched else text}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = c(ctx)
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0  # 0.05 s of matching; generous for a loaded machine
    assert any(issubclass(w.category, RegexTimeoutWarning) and "evil" in str(w.message) for w in caught)
    raw = np.atleast_1d(out.terms["evil"].raw)
    assert raw[0] == 0.0
    if batched:
        assert raw[1] == 1.0  # the short text matched normally
    assert out.terms["evil"].info == {"regex_timeouts": 1.0}
    assert np.atleast_1d(out.terms["short"].raw)[0] == -(5001 - 10)


def test_config_checks_and_explain_take_text(tmp_path) -> None:
    from rewardkit.commands.explain import explain_table, load_contexts
    from rewardkit.testing import assert_monotone

    shorter = RewardComposer.from_dict({"version": 1, "components": {
        "short": {"type": "length_penalty", "params": {"unit": "chars", "max": 5}}}})
    assert assert_monotone(shorter, "completion", "decreasing", examples=30, seed=0) == 30
    path = tmp_path / "ctx.json"
    path.write_text('{"completion": "<answer>7</answer>", "solution": "7", "latency": 0.5}')
    (ctx,) = load_contexts(str(path), frozenset({"completion", "solution"}))
    table = explain_table(c := RewardComposer.from_dict(TEXT), c(ctx))
    assert "correct" in table and "format: regex_timeouts=0" in table
