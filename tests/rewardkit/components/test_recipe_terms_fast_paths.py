"""The recipe terms' batched paths give the per-text numbers: the length terms' saturated lengths
(their fast paths, unsaturated where no result can overflow and ``length_target``'s one-array
arithmetic, are checked against them in tests/rewardkit/components/test_fast_paths.py), GSM8K
answers read with ``float()``, ``strict`` answers compared as they are found, ``repetition_rate``'s
n-grams zipped from iterators."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.backend import evaluating, saturate
from rewardkit.components import AnswerMatch, LengthPenalty, LengthTarget, OverlongPenalty, RepetitionRate
from rewardkit.components._numeric import FLOAT_MAX
from rewardkit.inputs import IntegerColumn, TokenIdColumn

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_pieces = st.sampled_from(["#### ", "####", "1,234", "-", "\u2212", "7", "42", "3.5", ".5", " ", "\n", "x", "+",
                           "\u0663", "\uff11", "\u00b2", "9" * 400, "\\boxed{", "}", "{", "é", "e5", "0,0"])
texts = st.lists(_pieces, max_size=12).map("".join)
PER_UNIT = st.sampled_from([0.0, 1.0, 0.5, 1e-300, 1e300, FLOAT_MAX])


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=8), PER_UNIT, st.sampled_from([0.0, 20.0, 1e300]),
       st.sampled_from(["chars", "words"]), st.sampled_from([np.float64, np.float32]))
def test_length_terms_give_the_saturated_numbers(completions: list[str], per_unit: float, point: float, unit: str,
                                                 dtype: type) -> None:
    for comp in (LengthTarget(target=point, unit=unit, per_unit=per_unit),
                 LengthPenalty(max=point, unit=unit, per_unit=per_unit),
                 OverlongPenalty(max_length=max(point, 1.0), cache_length=min(point, 4.0), unit=unit)):
        counts = [len(t.split()) if unit == "words" else len(t) for t in completions]
        with evaluating(True, np.dtype(dtype)):
            got = comp.compute({"completion": completions}, None, None)
            want = saturate(comp.of_lengths(np.array(counts, dtype=np.float64).astype(dtype)))
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()  # the same bits: -0.0 stays -0.0
        if dtype is np.float64:
            assert got.tolist() == [comp.score(t) for t in completions]


@SETTINGS
@given(st.lists(texts, min_size=0, max_size=8), st.data(), st.sampled_from(["none", "gsm8k"]))
def test_gsm8k_numbers_score_as_per_text(completions: list[str], data: st.DataObject, extract_reference: str) -> None:
    references = data.draw(st.lists(texts, min_size=len(completions), max_size=len(completions)))
    comp = AnswerMatch(extract="gsm8k", extract_reference=extract_reference, mode="numeric")
    got = comp.compute({"completion": completions, "reference": references}, None, None)
    assert got.tolist() == [comp.score(c, r) for c, r in zip(completions, references, strict=True)]
    if extract_reference == "none":
        integers = data.draw(st.lists(st.integers(-10**6, 10**6) | st.sampled_from([10**400, -10**400]),
                                      min_size=len(completions), max_size=len(completions)))
        got = comp.compute({"completion": completions, "reference": IntegerColumn(integers)}, None, None)
        assert got.tolist() == [comp.score(c, str(i)) for c, i in zip(completions, integers, strict=True)]


@SETTINGS
@given(st.lists(texts, min_size=0, max_size=8), st.data(),
       st.sampled_from([r"\\boxed\{(.*?)\}", r"(x)?7", r"(\d+)", "none", "boxed", "gsm8k", "last_number"]),
       st.booleans())
def test_strict_answers_compare_as_per_text(completions: list[str], data: st.DataObject, extract: str,
                                            long: bool) -> None:
    references = data.draw(st.lists(st.sampled_from(["7", "42", "", "x", "1234", "3.5", "{"]),
                                    min_size=len(completions), max_size=len(completions)))
    comp = AnswerMatch(extract=extract, mode="strict")
    if long and completions:  # beyond the untimed length: the general path
        completions = completions[:-1] + ["x" * (max(comp._answer._max_fast, 0) + 1) + completions[-1]]
    got = comp.compute({"completion": completions, "reference": references}, None, None)
    assert got.dtype == np.float64
    assert got.tolist() == [comp.score(c, r) for c, r in zip(completions, references, strict=True)]


words = st.lists(st.sampled_from(["a", "b", "c", "1", "22"]), max_size=12)


@SETTINGS
@given(words, st.integers(1, 5))
def test_repetition_rates_zipped_iterators_count_the_same_n_grams(sequence: list[str], n: int) -> None:
    comp = RepetitionRate(n=n)
    assert comp._rate()(sequence) == comp.of_words(sequence)
    ids = [int(w) if w.isdigit() else ord(w) for w in sequence]
    assert comp._rate()(ids) == comp.of_words(ids)


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c"]), max_size=10).map(" ".join), min_size=0, max_size=6),
       st.integers(1, 4))
def test_repetition_rate_on_texts_is_the_per_text_score(batch: list[str], n: int) -> None:
    comp = RepetitionRate(n=n)
    got = comp.compute({"completion": batch}, None, None)
    assert got.tolist() == [comp.score(t) for t in batch]


def test_repetition_rate_on_ids_that_are_not_all_ints_reads_their_text() -> None:
    comp = RepetitionRate(n=2)
    ids = [[1, 2, 1, 2], [np.int64(3), 3, 3], [], [True, 1, True, 1], [7]]
    got = comp.compute({"completion": TokenIdColumn(ids)}, None, None).tolist()
    assert got == [comp.score(" ".join(map(str, seq))) for seq in ids]
