"""The batched paths of the recipe terms give the per-text values: answer_match's one-pass
extraction and comparison (an integer reference column compared as integers, extract patterns on
``re`` where both engines read them alike), lengths counted into arrays, and repetition_rate
counting TRL's token ids as ids."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit import RewardComposer
from rewardkit.components import AnswerMatch, RepetitionRate
from rewardkit.components.regex_match import same_in_re as same_on_both_engines
from rewardkit.inputs import IntegerColumn, TokenIdColumn
from rewardkit.integrations.trl import TRLRewardFunctions

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_pieces = st.sampled_from(["\\boxed{", "}", "{", "#### ", "####", "1,234", "-", "\u2212", "7", "42", "3.5", " ", "\n",
                           "x", "The answer is", ".", "e5", "é", "9" * 400, "+"])
texts = st.lists(_pieces, max_size=12).map("".join)
EXTRACTS = ["none", "boxed", "gsm8k", "last_number", r"\\boxed\{(.*?)\}", r"answer is (\S+)", r"(\d+)\.?$"]
MODES = ["exact", "strict", "numeric"]


def composer(components: dict) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components})


def per_text(comp: AnswerMatch, completions: list[str], references: list[str]) -> list[float]:
    return [comp.score(c, r) for c, r in zip(completions, references, strict=True)]


@SETTINGS
@given(completions=st.lists(texts, min_size=1, max_size=8), data=st.data(),
       extract=st.sampled_from(EXTRACTS), extract_reference=st.sampled_from(["none", "gsm8k", "last_number"]),
       mode=st.sampled_from(MODES))
def test_answer_match_batch_equals_per_text_scores(completions: list[str], data: st.DataObject, extract: str,
                                                    extract_reference: str, mode: str) -> None:
    references = data.draw(st.lists(texts, min_size=len(completions), max_size=len(completions)))
    comp = AnswerMatch(extract=extract, extract_reference=extract_reference, mode=mode)
    got = comp.compute({"completion": completions, "reference": references}, None, None)
    assert got.tolist() == per_text(comp, completions, references)


@SETTINGS
@given(completions=st.lists(texts, min_size=1, max_size=8), data=st.data(), extract=st.sampled_from(EXTRACTS))
def test_an_integer_column_compared_as_integers_scores_as_its_digits(completions: list[str], data: st.DataObject,
                                                                      extract: str) -> None:
    integers = data.draw(st.lists(st.integers(-10**20, 10**20) | st.sampled_from([10**400, -10**400, 7, 42, 1234]),
                                  min_size=len(completions), max_size=len(completions)))
    comp = AnswerMatch(extract=extract, mode="numeric")
    got = comp.compute({"completion": completions, "reference": IntegerColumn(integers)}, None, None)
    assert got.tolist() == per_text(comp, completions, [str(i) for i in integers])


def test_the_composer_reads_an_integer_column_as_integers_only_for_readers_of_numbers() -> None:
    numeric = composer({"correct": {"type": "answer_match", "params": {"extract": "gsm8k", "mode": "numeric"},
                                    "inputs": {"reference": "answer"}}})
    assert numeric.reader.integer_keys == {"answer"}
    shared = composer({"correct": {"type": "answer_match", "params": {"extract": "gsm8k", "mode": "numeric"},
                                   "inputs": {"reference": "answer"}},
                       "same": {"type": "answer_match", "params": {"mode": "strict"}, "inputs": {"reference": "answer"}}})
    assert shared.reader.integer_keys == set()
    gated = composer({"correct": {"type": "answer_match", "params": {"mode": "numeric"},
                                  "inputs": {"reference": "answer"}, "applies_to": {"answer": 3}}})
    assert gated.reader.integer_keys == set()
    ctx = {"completion": ["#### 3", "#### 1,234", "#### -5", "no", "#### 7"], "answer": [3, 1234, -5, 0, 10**400]}
    for comp in (numeric, shared):
        batch = comp(ctx).total.tolist()
        one_by_one = [comp({"completion": c, "answer": a}).total for c, a in zip(ctx["completion"], ctx["answer"],
                                                                               strict=True)]
        assert batch == one_by_one
    assert numeric(ctx).total.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert ctx["answer"] == [3, 1234, -5, 0, 10**400]  # the caller's column is left as it was


# ---- extract patterns: re where both engines read the pattern alike --------------------------
_atoms = st.sampled_from(["a", "b", ".", "\\{", "\\}", "[ab]", "[^a]", "[a-c]", "x", "\\.", "(?:ab)", "(a|b)", "^", "$",
                          "\\A", "\\Z", "[]a]", "é"])
_quantifiers = st.sampled_from(["", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{,2}", "{2,}?", "*+", "?+"])
_flat = st.lists(st.tuples(_atoms, _quantifiers), min_size=1, max_size=4).map(
    lambda parts: "".join(a + (q if a not in ("^", "$", "\\A", "\\Z") else "") for a, q in parts))
# nested groups, alternations and repeats of repeats (captures inside repeats included)
patterns = st.recursive(_flat, lambda inner: st.one_of(
    st.tuples(inner, _quantifiers).map(lambda p: f"({p[0]}){p[1]}"),
    st.tuples(inner, inner, _quantifiers).map(lambda p: f"(?:{p[0]}|{p[1]}){p[2]}"),
    st.tuples(inner, inner).map("".join),
    st.tuples(st.sampled_from(["?=", "?!", "?<=a", "?>"]), inner).map(
        lambda p: f"({p[0]}{p[1]})" if not p[0].startswith("?<=") else f"(?<=a){p[1]}")), max_leaves=4)
subjects = st.text(alphabet="ab{}x.c\né", max_size=20)


@settings(max_examples=300, deadline=None)
@given(body=patterns, subject=subjects)
def test_patterns_read_alike_find_the_same_first_match_on_both_engines(body: str, subject: str) -> None:
    pattern = f"({body})"
    try:
        ours = re.compile(pattern)
    except re.error:
        return
    assert same_on_both_engines(pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = regex.compile(pattern)
    a, b = ours.search(subject), theirs.search(subject)
    assert (a is None) == (b is None)
    if a is not None:
        assert (a.span(), a.groups()) == (b.span(), b.groups())


@pytest.mark.parametrize("pattern", [r"[[:alpha:]]+", r"(\w+)", r"(\d+)", r"(\s)", r"\b(x)", r"(?i)(k)", r"(a)\1",
                                     r"[\w](x)", r"\p{L}(x)"])
def test_patterns_the_engines_may_read_differently_stay_on_regex(pattern: str) -> None:
    assert not same_on_both_engines(pattern)
    if pattern == r"[[:alpha:]]+":  # the difference itself: regex reads a POSIX class, re a set and a bracket
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            assert re.fullmatch(pattern, "abc") is None and regex.fullmatch(pattern, "abc") is not None


def test_extract_pattern_engine_is_chosen_by_pattern() -> None:
    docs = AnswerMatch(extract=r"\\boxed\{(.*?)\}", mode="strict")
    assert docs._answer._fast_search.__self__.__class__ is re.Pattern
    digits = AnswerMatch(extract=r"answer (\d+)", mode="strict")
    assert digits._answer._fast_search.__self__.__class__ is not re.Pattern


# ---- lengths and repetition -------------------------------------------------------------------
@SETTINGS
@given(batch=st.lists(st.text(max_size=40), min_size=1, max_size=8), unit=st.sampled_from(["words", "chars"]))
def test_length_target_batch_equals_per_text(batch: list[str], unit: str) -> None:
    comp = composer({"len": {"type": "length_target", "params": {"target": 5, "unit": unit, "per_unit": 0.5}}})
    assert comp({"completion": batch}).total.tolist() == [comp({"completion": t}).total for t in batch]


ids_lists = st.lists(st.lists(st.integers(0, 6), max_size=20) | st.lists(st.sampled_from([1, 1.0, True, -0.0, 0, "1"]),
                                                                          max_size=8), min_size=1, max_size=8)


@SETTINGS
@given(ids=ids_lists, n=st.integers(1, 4))
def test_repetition_counts_token_ids_as_their_text(ids: list[list], n: int) -> None:
    comp = RepetitionRate(n=n)
    as_ids = comp.compute({"completion": TokenIdColumn(ids)}, None, None).tolist()
    as_text = comp.compute({"completion": TokenIdColumn(ids).texts()}, None, None).tolist()
    assert as_ids == as_text


def test_trl_repetition_reads_ids_as_ids_and_other_terms_as_text() -> None:
    ids = [[1, 2, 1, 2, 1, 2], [5, 6, 7], [3, 3, 3, 3]]
    comp = composer({"rep": {"type": "repetition_rate", "params": {"n": 2}, "inputs": {"completion": "completion_ids"}},
                     "words": {"type": "length_penalty", "params": {"unit": "words", "max": 3},
                               "inputs": {"completion": "completion_ids"}}})
    assert comp.reader.token_id_keys == set()  # a second reader takes the text
    texts = [" ".join(map(str, i)) for i in ids]
    for name, fn in zip(comp.term_names, TRLRewardFunctions(comp).funcs, strict=True):
        got = fn(prompts=["q"] * 3, completions=["a", "b", "c"], completion_ids=ids)
        assert got == [float(comp({"completion_ids": t}).terms[name].contribution) for t in texts]
    alone = composer({"rep": {"type": "repetition_rate", "params": {"n": 2}, "inputs": {"completion": "completion_ids"}}})
    assert alone.reader.token_id_keys == {"completion_ids"}
    (fn,) = TRLRewardFunctions(alone).funcs
    assert fn(prompts=["q"] * 3, completions=["a", "b", "c"], completion_ids=ids) == [
        alone({"completion_ids": t}).total for t in texts]
    assert np.isclose(alone({"completion_ids": texts[0]}).total, 3 / 5)
