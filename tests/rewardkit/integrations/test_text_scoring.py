"""The shared core of the text adapters (``TextScorer``): the context it builds from columns given
by name or per sample and from keys an adapter derives, the columns' conversions, its errors, and
one composer evaluation per batch (reset only where it clears something)."""

from __future__ import annotations

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError
from rewardkit.inputs import TextColumn
from rewardkit.integrations.text_scoring import TextScorer, as_floats

CONFIG = {"version": 1, "components": {
    "correct": {"type": "answer_match", "params": {"extract": "last_number", "mode": "numeric"},
                "inputs": {"reference": "answer"}},
    "level": {"type": "linear", "inputs": {"value": "level"}, "weight": 0.5},
    "tokens": {"type": "linear", "inputs": {"value": "n_tokens"}, "weight": -0.25}}}


def scorer(config: dict = CONFIG, **kwargs) -> TextScorer:
    return TextScorer(RewardComposer.from_dict(config), **kwargs)


def test_columns_by_name_and_per_sample_give_the_same_context_and_scores() -> None:
    s = scorer()
    derived = {"n_tokens": lambda: np.array([3.0, 5.0])}
    by_name = s.context(["so 4", "it is 5"], columns={"answer": [4, 4], "level": [1, 2]}, derived=derived)
    by_row = s.context(["so 4", "it is 5"], rows=[{"answer": 4, "level": 1}, {"answer": 4, "level": 2}], derived=derived)
    assert by_name.keys() == by_row.keys() == {"completion", "answer", "level", "n_tokens"}
    assert by_name["answer"] == [4, 4]  # a column a text term reads stays the list it is (read as digits)
    assert by_name["level"].dtype == np.float64 and by_name["level"].tolist() == [1.0, 2.0]
    assert isinstance(by_name["completion"], TextColumn)
    a, b = s.score(by_name, 2), s.score(by_row, 2)
    assert a.totals == b.totals == [1.0 + 0.5 - 0.75, 0.0 + 1.0 - 1.25]
    assert a.terms["correct"] == [1.0, 0.0]


def test_a_derived_key_is_built_only_when_read_and_a_column_of_its_name_wins() -> None:
    calls = []
    s = scorer({"version": 1, "components": {"level": {"type": "linear", "inputs": {"value": "level"}}}})
    ctx = s.context(["a"], columns={"level": [2]}, derived={"level": lambda: calls.append(1), "unread": calls.append})
    assert ctx["level"].tolist() == [2.0] and calls == []
    ctx = s.context(["a"], derived={"level": lambda: calls.append(1) or np.array([7.0])})
    assert ctx["level"].tolist() == [7.0] and calls == [1]


def test_bad_columns_are_errors_naming_the_column_and_what_was_expected() -> None:
    s = scorer(column="dataset column")
    with pytest.raises(InvalidInputError,
                       match=r"dataset column 'level': expected one value per completion \(2\), got list of length 1"):
        s.context(["a", "b"], columns={"answer": ["1", "2"], "level": [1], "n_tokens": [1, 2]})
    with pytest.raises(InvalidInputError, match=r"reads 'level', which is neither the prompt, the completion nor a "
                                                r"dataset column \(available: prompt, completion, n_tokens, answer\)"):
        s.context(["a"], prompts=["p"], columns={"answer": ["1"]}, derived={"n_tokens": lambda: np.ones(1)})
    with pytest.raises(InvalidInputError, match="completion 1: expected a string, got int"):
        s.context(["a", 3], columns={"answer": ["1", "2"], "level": [1, 2], "n_tokens": [1, 2]})
    with pytest.raises(InvalidInputError, match="reads 'level', which sample 1 lacks"):
        s.context(["a", "b"], rows=[{"answer": 1, "level": 1, "n_tokens": 1}, {"answer": 1, "n_tokens": 1}])


def test_reset_only_when_the_composer_keeps_state_and_flags_are_kept_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = scorer()
    normalized = scorer({"version": 1, "components": {"level": {"type": "linear", "inputs": {"value": "level"},
                                                                 "normalize": {"type": "running_zscore"}}}})
    assert not plain.stateful and normalized.stateful
    resets = []
    for s in (plain, normalized):
        monkeypatch.setattr(s.composer, "reset", lambda *a, _s=s: resets.append(_s))
    plain.evaluate(plain.context(["4"], columns={"answer": [4], "level": [1], "n_tokens": [1]}), 1)
    normalized.evaluate({"level": np.array([1.0, 2.0])}, 2)
    assert resets == [normalized]
    t, u = plain._episode_flags(3)
    assert t.tolist() == [True] * 3 and u.tolist() == [False] * 3 and not t.flags.writeable
    assert plain._episode_flags(3)[0] is t


def test_as_floats_broadcasts_a_number_and_reads_arrays() -> None:
    assert as_floats(2.0, 3) == [2.0, 2.0, 2.0]
    assert as_floats(np.array([1, 2], dtype=np.float32), 2) == [1.0, 2.0]
