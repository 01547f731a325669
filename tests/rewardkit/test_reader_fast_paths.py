"""The reader's and the output's fast paths give what the general paths give: text columns and
integer columns checked in one pass (integers written from a table of digits), NumPy episode flags
taken as they are, one term's values read without the breakdown, an empty transaction entered
without a generator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError, MissingInputError
from rewardkit.inputs import IntegerColumn, TextColumn, integer_texts


def build(components: dict) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components})


TEXT = build({"t": {"type": "answer_match", "params": {"mode": "strict"}, "inputs": {"reference": "answer"}}})
NUMERIC = build({"t": {"type": "answer_match", "params": {"mode": "numeric"}, "inputs": {"reference": "answer"}}})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2000, 12_000) | st.integers(), max_size=30))
def test_integers_are_written_as_str_writes_them(values: list[int]) -> None:
    assert integer_texts(values) == [str(i) for i in values]
    assert IntegerColumn(values).texts() == [str(i) for i in values]


@pytest.mark.parametrize("values", [[], ["a", "b"], [1, 2, -3], [1, "b"], ["a", 2.5], [10**400, 3], [True, 1],
                                    [np.int64(4), 5]])
def test_a_text_column_is_read_as_item_by_item(values: list[Any]) -> None:
    reader = TEXT.reader
    try:
        expected = [v if isinstance(v, str) else reader.scalar_text(v, "answer") for v in values]
    except InvalidInputError:  # not text nor a number (a boolean): refused as a column too
        for integers in (False, True):
            with pytest.raises(InvalidInputError, match="'answer'"):
                NUMERIC.reader.text_list(list(values), "answer", integers=integers)
        return
    got = reader.text_list(list(values), "answer")
    assert list(got) == expected
    ints = NUMERIC.reader.text_list(list(values), "answer", integers=True)
    if values and all(type(v) is int for v in values):
        assert ints.__class__ is IntegerColumn and list(ints) == values
    else:
        assert list(ints) == expected


@pytest.mark.parametrize("bad", [None, [1], {"a": 1}, b"x"])
def test_a_bad_item_is_still_named_by_its_index(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"'completion'.*at index 1"):
        TEXT.reader.text_list(["fine", bad], "completion")
    if bad is None:  # a sample without a reference: answer_match reads it as None (and scores it 0.0)
        assert TEXT.reader.text_list(["fine", None], "answer") == ["fine", None]
    else:
        with pytest.raises(InvalidInputError, match=r"'answer'.*at index 1"):
            TEXT.reader.text_list(["fine", bad], "answer")


def test_a_checked_text_column_is_taken_as_it_is() -> None:
    column = TextColumn(["a", "b"])
    assert TEXT.reader.text_list(column, "answer") is column
    out = TEXT({"completion": TextColumn(["x", "y"]), "answer": TextColumn(["x", "z"])})
    assert out.total.tolist() == [1.0, 0.0]


FLAGGED = build({"ema": {"type": "ema_delta", "params": {"ema_alpha": 0.5, "signal": "v"}}})


@pytest.mark.parametrize("terminated, truncated", [
    (np.array([True, False, True]), np.array([False, False, True])),
    (np.array([True, False, True]), None), (None, np.array([False, True, False])), (True, False), (None, None),
    ([True, False, False], [False, False, True])])
def test_numpy_flags_are_taken_as_given_like_any_other_flags(terminated: Any, truncated: Any) -> None:
    reader = FLAGGED.reader
    inputs = reader.read_batch({"v": np.array([1.0, 2.0, 3.0])})
    term, trunc, done = reader.episode_flags(inputs, terminated, truncated)
    want_term = np.broadcast_to(np.asarray(False if terminated is None else terminated), (3,))
    want_trunc = np.broadcast_to(np.asarray(False if truncated is None else truncated), (3,))
    assert term.tolist() == want_term.tolist() and trunc.tolist() == want_trunc.tolist()
    assert done.tolist() == (want_term | want_trunc).tolist()


@pytest.mark.parametrize("bad", [np.ones(2, dtype=bool), np.ones(3, dtype=np.int64), np.ones((3, 1), dtype=bool)])
def test_numpy_flags_of_the_wrong_shape_or_dtype_are_still_refused(bad: np.ndarray) -> None:
    inputs = FLAGGED.reader.read_batch({"v": np.array([1.0, 2.0, 3.0])})
    with pytest.raises(InvalidInputError, match="terminated"):
        FLAGGED.reader.episode_flags(inputs, bad, np.zeros(3, dtype=bool))


def test_one_terms_values_are_the_breakdowns() -> None:
    composer = build({"correct": {"type": "answer_match", "params": {"mode": "strict"},
                                  "inputs": {"reference": "answer"}, "applies_to": {"task": "math"}},
                      "group": {"type": "group", "components": {"len": {"type": "length_target", "params": {"target": 2,
                                                                                           "unit": "chars"}}}}})
    batch = composer({"completion": ["a", "bb", "c"], "answer": ["a", "x", "c"], "task": ["math", "math", "code"]})
    single = composer({"completion": "a", "answer": "a", "task": "code"})
    for out in (batch, single):
        fresh = composer({"completion": ["a", "bb", "c"], "answer": ["a", "x", "c"],
                          "task": ["math", "math", "code"]}) if out is batch else single
        for name in composer.term_names:
            normalized, applies = out.normalized_of(name)
            term = fresh.terms[name]
            assert np.array_equal(np.asarray(normalized), np.asarray(term.normalized))
            assert (applies is None) == (term.applies is None)
            if applies is not None:
                assert np.array_equal(np.asarray(applies), np.asarray(term.applies))
        with pytest.raises(KeyError):
            out.normalized_of("missing")


def test_an_empty_transaction_does_nothing_and_a_guarded_one_still_puts_state_back() -> None:
    plain = build({"len": {"type": "length_target", "params": {"target": 2, "unit": "chars"}}})
    with plain.store.transaction():
        pass
    guarded = build({"ema": {"type": "ema_delta", "params": {"ema_alpha": 0.5, "signal": "v"}}})
    guarded({"v": np.array([1.0, 2.0])})
    before = guarded.state_dict()
    with pytest.raises(RuntimeError), guarded.store.transaction():
        guarded.store.components[0].reset(None)
        raise RuntimeError("fails after a change")
    assert guarded.state_dict() == before


@pytest.mark.parametrize("ctx", [{"completion": ["a", "bb", "c"], "answer": ["a", "x", "c"], "task": ["math"] * 3},
                                 {"completion": "a", "answer": "a", "task": "code"}])
def test_the_batched_entry_gives_the_calls_numbers_and_state(ctx: dict) -> None:
    def composer() -> RewardComposer:
        return build({"correct": {"type": "answer_match", "params": {"mode": "strict"},
                                  "inputs": {"reference": "answer"}, "applies_to": {"task": "math"}},
                      "len": {"type": "length_target", "params": {"target": 2, "unit": "chars"},
                              "normalize": {"type": "running_zscore"}}})

    called, entered = composer(), composer()
    for _ in range(2):
        a, b = called(ctx, terminated=True), entered.evaluate_batch(ctx, terminated=True)
        assert np.asarray(a.total).tolist() == np.asarray(b.total).tolist()
        assert {k: np.asarray(v).tolist() for k, v in a.as_dict().items()} == \
            {k: np.asarray(v).tolist() for k, v in b.as_dict().items()}
    assert called.state_dict() == entered.state_dict()
    for call in (called, entered.evaluate_batch):
        with pytest.raises(MissingInputError, match="missing key 'answer'"):
            call({"completion": ["a"], "task": ["math"]})
        with pytest.raises(InvalidInputError, match="context mapping"):
            call(["a"])  # type: ignore[arg-type]
    assert called.state_dict() == entered.state_dict()
