"""The reasoning-recipe terms: answer_match's extract and modes, length in tokens, length_target,
overlong_penalty, applies_to on any term, and the input fixes they rely on (numbers read as text,
Unicode minus signs, a finite floor on float32)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardkit import ConfigError, RewardComposer
from rewardkit.components import AnswerMatch, LengthPenalty, LengthTarget, OverlongPenalty
from rewardkit.components.answer_match import final_number, gsm8k_answer, last_boxed
from rewardkit.errors import InvalidInputError, MissingInputError
from rewardkit.testing import check_component
from rewardkit.testing.static_proofs import prove_range


def composer(components: dict) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components})


# ---- answer_match: extract ------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    (r"so \boxed{42}", "42"), (r"\boxed{1} then \boxed{2}", "2"), (r"\boxed{\frac{1}{3}}", r"\frac{1}{3}"),
    (r"\boxed{a{b{c}}d}", "a{b{c}}d"), (r"\boxed{x} \boxed{unclosed", "x"), ("no box", None), (r"\boxed{}", ""),
])
def test_boxed_takes_the_last_box_with_nested_braces(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Natalia sold 48/2 = 24 clips.\n#### 72", "72"), ("#### 1,234", "1234"), ("####-3", "-3"),
    ("#### \u22123.5", "-3.5"), ("no answer line", None), ("#### none", None),
])
def test_gsm8k_takes_the_number_after_the_hashes(text: str, expected: str | None) -> None:
    assert gsm8k_answer(text) == expected


@pytest.mark.parametrize("extract, completion, reference, expected", [
    ("boxed", r"it is \boxed{Paris}", "paris", 1.0),
    ("boxed", "Paris", "paris", 0.0),                      # no box: no answer
    ("gsm8k", "work...\n#### 72", "72", 1.0),
    ("last_number", "3 apples then 5", "5", 1.0),
    (r"answer: (\w+)", "answer: Lyon. answer: Paris", "lyon", 1.0),  # the first match, as re.search finds it
    (r"answer: (\w+)", "no marker", "lyon", 0.0),
])
def test_extract_picks_the_answer_then_compares(extract: str, completion: str, reference: str, expected: float) -> None:
    assert AnswerMatch(extract=extract).score(completion, reference) == expected


def test_extract_reference_reads_a_gsm8k_answer_column() -> None:
    match = AnswerMatch(extract="boxed", extract_reference="gsm8k", mode="numeric")
    assert match.score(r"\boxed{72}", "48 + 24 = 72\n#### 72") == 1.0
    assert match.score(r"\boxed{71}", "#### 72") == 0.0
    assert match.score(r"\boxed{72}", "no hashes") == 0.0


@pytest.mark.parametrize("extract, message", [
    ("(a)(b)", "exactly one capture group"), ("no group", "exactly one capture group"),
    ("(unclosed", "compiles"), (3, "'boxed'"),
])
def test_bad_extract_is_a_located_config_error(extract, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"components\.correct\.params\.extract: .*{message}"):
        composer({"correct": {"type": "answer_match", "params": {"extract": extract}}})


def test_strict_mode_compares_texts_as_written() -> None:
    assert AnswerMatch(mode="strict").score("72", "72") == 1.0
    assert AnswerMatch(mode="strict").score("72.", "72") == 0.0
    assert AnswerMatch(mode="exact").score("72.", "72") == 1.0


def test_math_mode_uses_math_verify() -> None:
    pytest.importorskip("math_verify", reason="needs math-verify: pip install 'rewardkit[math]'")
    match = AnswerMatch(mode="math")
    assert match.score(r"My answer is \boxed{\frac{1}{3}}", r"\frac{1}{3}") == 1.0
    assert match.score(r"My answer is \boxed{\frac{2}{6}}", r"\frac{1}{3}") == 1.0
    assert match.score(r"My answer is \boxed{\frac{1}{2}}", r"\frac{1}{3}") == 0.0
    boxed = AnswerMatch(mode="math", extract="boxed")
    assert boxed.score(r"\boxed{0.5}", r"\frac{1}{2}") == 1.0
    import copy
    import pickle
    assert pickle.loads(pickle.dumps(match)).score(r"\boxed{2}", "2") == copy.deepcopy(match).score(r"\boxed{2}", "2") == 1.0


# ---- numeric signs ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("\u22125", -5.0), ("\uff0d5", -5.0), ("\ufe635", -5.0), ("between 5-7", 7.0), ("5 - 7", 7.0),
    ("x = -7", -7.0), ("-7", -7.0), ("3 + -2", -2.0), ("1e-3", 0.001),
])
def test_unicode_minus_is_a_sign_and_a_hyphen_between_numbers_is_not(text: str, expected: float) -> None:
    assert final_number(text) == expected


def test_numeric_mode_reads_signs_the_same_whatever_the_minus() -> None:
    numeric = AnswerMatch(mode="numeric")
    assert numeric.score("The answer is 5", "\u22125") == 0.0
    assert numeric.score("\u22125", "-5") == 1.0
    assert numeric.score("between 5-7", "7") == 1.0
    assert numeric.score("between 5-7", "-7") == 0.0


# ---- numbers read as text -----------------------------------------------------------------------
def test_an_integer_answer_column_feeds_answer_match_in_batched_and_scalar_calls() -> None:
    c = composer({"correct": {"type": "answer_match", "params": {"mode": "numeric", "extract": "boxed"},
                              "inputs": {"reference": "answer"}}})
    completions = [r"\boxed{72}", r"\boxed{10}", r"\boxed{3}"]
    for answers in ([72, 10, 4], np.array([72, 10, 4]), np.array([72.0, 10.0, 4.0]), np.array([72, 10, 4], np.int32)):
        np.testing.assert_array_equal(c({"completion": completions, "answer": answers}).total, [1.0, 1.0, 0.0])
    assert c({"completion": r"\boxed{72}", "answer": 72}).total == 1.0
    assert c({"completion": r"\boxed{72}", "answer": np.int64(72)}).total == 1.0
    exact = composer({"correct": {"type": "answer_match", "params": {"extract": "boxed"},
                                  "inputs": {"reference": "answer"}}})
    np.testing.assert_array_equal(exact({"completion": completions, "answer": np.array([72.0, 10.5, 3.0])}).total,
                                  [1.0, 0.0, 1.0])  # 72.0 reads "72", 10.5 "10.5"


# ---- length in tokens, length_target, overlong_penalty -----------------------------------------
def test_unit_tokens_reads_completion_tokens() -> None:
    c = composer({"long": {"type": "length_penalty", "params": {"unit": "tokens", "max": 10, "per_unit": 0.5}}})
    assert c.context_keys() == {"completion_tokens"}
    np.testing.assert_array_equal(c({"completion_tokens": np.array([3, 10, 14])}).total, [0.0, 0.0, -2.0])
    assert c({"completion_tokens": 12}).total == -1.0
    with pytest.raises(MissingInputError, match="completion_tokens"):
        c({"completion": "a b c"})


@pytest.mark.parametrize("cls", [LengthPenalty, LengthTarget, OverlongPenalty])
def test_length_components_in_tokens_keep_their_promises(cls) -> None:
    params = {"unit": "tokens"}
    checked = check_component(cls, params=params, examples=30)
    assert "scalar_fn equals compute" in checked
    assert ("monotone as declared" in checked) == (cls is not LengthTarget)


def test_length_penalty_on_float32_floors_at_the_float32_minimum_never_minus_inf() -> None:
    for components in ({"long": {"type": "length_penalty", "params": {"unit": "chars", "max": 0, "per_unit": 1e307}},
                        "x": {"type": "linear"}},
                       {"long": {"type": "length_penalty", "params": {"unit": "tokens", "max": 0, "per_unit": 1e307}}}):
        c = composer(components)
        ctx = {"completion": ["a" * 50], "value": np.array([0.0], np.float32),
               "completion_tokens": np.array([50.0], np.float32)}
        out = c({k: v for k, v in ctx.items() if k in c.context_keys()})
        raw = out.terms["long"].raw
        assert raw.dtype == np.float32 and np.isfinite(raw).all()
        assert raw[0] == -np.finfo(np.float32).max


@pytest.mark.parametrize("unit, text, expected", [
    ("chars", "x" * 20, 0.0), ("chars", "x" * 25, -5.0), ("chars", "", -20.0), ("words", "a b", -18.0),
])
def test_length_target(unit: str, text: str, expected: float) -> None:
    assert LengthTarget(target=20, unit=unit).score(text) == expected
    assert LengthTarget(target=20, unit=unit, per_unit=0.5).score(text) == expected * 0.5


@pytest.mark.parametrize("n, expected", [(0, 0.0), (80, 0.0), (81, -0.05), (90, -0.5), (100, -1.0), (101, -1.0)])
def test_overlong_penalty_ramps_from_max_minus_cache_to_max(n: int, expected: float) -> None:
    assert OverlongPenalty(max_length=100, cache_length=20).of_length(n) == pytest.approx(expected, abs=1e-15)
    got = composer({"o": {"type": "overlong_penalty", "params": {"max_length": 100, "cache_length": 20}}})(
        {"completion_tokens": np.array([float(n)])}).total
    assert got[0] == pytest.approx(expected, abs=1e-15)


# ---- applies_to -------------------------------------------------------------------------------
APPLIES = {
    "acc": {"type": "answer_match", "params": {"mode": "numeric"}, "applies_to": {"task": "math"}},
    "fmt": {"type": "regex_match", "params": {"pattern": "^<a>"}, "weight": 0.5,
            "applies_to": {"task": ["code", "math"], "level": [1, 2]}},
    "short": {"type": "length_target", "params": {"target": 3}, "weight": 0.1, "transforms": [{"shift": 1}]},
}
CTX = {"completion": ["<a> 5", "<a> 7", "x 5 y z"], "reference": [5, 5, "5"], "task": ["math", "code", "poem"],
       "level": np.array([1, 2.0, 3])}


def test_applies_to_masks_the_term_and_marks_the_breakdown() -> None:
    out = composer(APPLIES)(CTX)
    terms = out.terms
    np.testing.assert_array_equal(terms["acc"].applies, [True, False, False])
    np.testing.assert_array_equal(terms["fmt"].applies, [True, True, False])
    assert terms["short"].applies is None
    np.testing.assert_array_equal(terms["acc"].raw, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(terms["fmt"].contribution, [0.5, 0.5, 0.0])
    np.testing.assert_allclose(out.total, [1.0 + 0.5, 0.5, 0.0])  # short: 2 or 4 words, one off: -1 + 1
    assert set(out.as_dict()) >= {"acc/applies", "fmt/applies"}


def test_applies_to_scalar_calls_agree_with_the_batch() -> None:
    batched = composer(APPLIES)(CTX)
    single = composer(APPLIES)
    for i in range(3):
        out = single({k: v[i] for k, v in CTX.items()})
        assert out.total == pytest.approx(float(batched.total[i]), rel=1e-12)
        assert out.terms["acc"].applies is bool(batched.terms["acc"].applies[i])
        assert out.terms["acc"].contribution == float(batched.terms["acc"].contribution[i])


def test_applies_to_in_float32_and_torch_keeps_the_dtype() -> None:
    torch = pytest.importorskip("torch")
    c = composer({"lat": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "applies_to": {"task": "a"}}})
    out = c({"latency": torch.tensor([2.0, 3.0], dtype=torch.float32), "task": ["a", "b"]})
    assert out.total.dtype == torch.float32
    assert out.total.tolist() == [out.terms["lat"].raw[0].item(), 0.0]


def test_applies_to_round_trips_and_proofs_count_its_zero() -> None:
    c = composer({"t": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "transforms": [{"shift": 5}],
                        "applies_to": {"task": ["a", 2]}}})
    again = RewardComposer.from_dict(c.to_dict())
    assert again.to_dict() == c.to_dict() and again.to_dict()["components"]["t"]["applies_to"] == {"task": ["2", "a"]}
    # shifted by 5 the term is >= 5 where it applies, and 0 elsewhere: a range proof must allow 0
    assert not prove_range(c, 5.0, math.inf).proved
    assert prove_range(c, 0.0, math.inf).proved


@pytest.mark.parametrize("applies_to, path, message", [
    ({}, "applies_to", "non-empty mapping"), ([], "applies_to", "non-empty mapping"),
    ({"task": []}, "applies_to.task", "non-empty list"), ({"task": True}, "applies_to.task", "not a boolean"),
    ({"task": ["a", None]}, r"applies_to.task\[1\]", "a string or a finite number"),
    ({" task": "a"}, "applies_to", "context keys"),
])
def test_bad_applies_to_is_a_located_config_error(applies_to, path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"components\.t\.{path}: expected .*{message}"):
        composer({"t": {"type": "length_target", "params": {"target": 1}, "applies_to": applies_to}})


def test_applies_to_refuses_a_normalizer_and_groups() -> None:
    with pytest.raises(ConfigError, match=r"components\.t\.normalize: expected no normalize on a term with applies_to"):
        composer({"t": {"type": "length_target", "params": {"target": 1}, "applies_to": {"k": 1},
                        "normalize": "running_zscore"}})
    with pytest.raises(ConfigError, match=r"components\.g\.applies_to: unknown key"):
        composer({"g": {"type": "group", "applies_to": {"k": 1},
                        "components": {"t": {"type": "length_target", "params": {"target": 1}}}}})
    with pytest.raises(ConfigError, match=r"components\.b\.inputs\.value: .*'task' is read as numbers here but as text"):
        composer({"a": {"type": "length_target", "params": {"target": 1}, "applies_to": {"task": 1}},
                  "b": {"type": "linear", "inputs": {"value": "task"}}})


def test_applies_to_column_missing_or_bad_at_call_time_names_the_key_and_changes_nothing() -> None:
    c = composer(APPLIES)
    state = c.state_dict()
    ctx = {k: v for k, v in CTX.items() if k != "task"}
    with pytest.raises(MissingInputError, match=r"missing key 'task', needed by acc \(input 'applies_to.task'\)"):
        c(ctx)
    with pytest.raises(InvalidInputError, match=r"context key 'task' \(read by acc, fmt\): expected text .* index 1"):
        c({**CTX, "task": ["math", None, "x"]})
    assert c.state_dict() == state


def test_property_checks_draw_applies_to_columns() -> None:
    """``rewardkit check`` draws a term's applies_to column among its values (and other text)."""
    from rewardkit.testing import assert_finite, assert_range
    from rewardkit.testing.strategies import context_keys

    c = composer({"t": {"type": "length_target", "params": {"target": 3}, "applies_to": {"task": ["a", "b"]}}})
    task = next(k for k in context_keys(c) if k.name == "task")
    assert task.text and task.choices == ("a", "b") and not task.optional
    assert_finite(c, examples=30)
    assert_range(c, None, 0.0, examples=30)


@pytest.mark.parametrize("params", [
    {"extract": "boxed", "mode": "numeric"}, {"extract": "gsm8k", "mode": "exact"},
    {"extract": "last_number", "mode": "strict"}, {"extract": r"answer[:\s]+(\S+)", "mode": "numeric"},
    {"extract": "boxed", "extract_reference": "last_number", "mode": "numeric"},
])
def test_answer_match_keeps_its_promises_with_every_extract(params: dict) -> None:
    checked = check_component(AnswerMatch, params=params, examples=25)
    assert "scalar_fn equals compute" in checked and "deep copies are independent" in checked


def test_applies_to_on_a_term_inside_a_group() -> None:
    c = composer({"g": {"type": "group", "weight": 2.0, "components": {
        "a": {"type": "length_target", "params": {"target": 0, "unit": "chars"}, "applies_to": {"task": "x"}},
        "b": {"type": "length_target", "params": {"target": 0, "unit": "chars"}}}}})
    out = c({"completion": ["ab", "abc"], "task": ["x", "y"]})
    np.testing.assert_array_equal(out.terms["g/a"].applies, [True, False])
    np.testing.assert_array_equal(out.terms["g"].raw, [-4.0, -3.0])
    np.testing.assert_array_equal(out.total, [-8.0, -6.0])


def test_a_catastrophic_extract_pattern_cannot_hang_a_call() -> None:
    import time
    import warnings

    from rewardkit.components.regex_match import RegexTimeoutWarning

    match = AnswerMatch(extract=r"^((?:a|aa)+)$", mode="strict")
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert match.score("a" * 3000 + "b", "a") == 0.0
    assert time.perf_counter() - started < 5.0
    assert any(issubclass(w.category, RegexTimeoutWarning) for w in caught)
    assert match.score("aaa", "aaa") == 1.0


def test_explain_reads_numeric_answers_as_text_and_shows_where_a_term_applies(capsys, tmp_path) -> None:
    import json

    from rewardkit import cli

    config = tmp_path / "r.yaml"
    config.write_text("version: 1\ncomponents:\n  acc: {type: answer_match, params: {extract: boxed, mode: numeric},"
                      " applies_to: {task: math}}\n")
    ctx = tmp_path / "ctx.json"
    ctx.write_text(json.dumps({"completion": [r"\boxed{4}", r"\boxed{4}"], "reference": [4, 4],
                               "task": ["math", "code"]}))
    assert cli.main(["explain", str(config), "--context", str(ctx)]) == 0
    out = capsys.readouterr().out
    assert "acc: applies=[yes, no]" in out and "[1, 0]" in out


def test_a_batched_call_of_a_catastrophic_extract_pattern_is_bounded_as_a_whole() -> None:
    import time
    import warnings

    c = composer({"t": {"type": "answer_match", "params": {"extract": r"^((?:a|aa)+)$", "mode": "strict"}}})
    texts = ["a" * 3000 + "b"] * 100  # 100 x 50 ms per text without the call's budget of 1 s
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = c({"completion": texts, "reference": ["a"] * 100})
    assert time.perf_counter() - started < 3.0
    assert not out.total.any()
    assert c({"completion": ["aaaa"], "reference": ["aaaa"]}).total[0] == 1.0  # the next call has its own budget
