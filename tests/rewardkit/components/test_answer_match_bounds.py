"""answer_match against the reference scorers' own expectations, and bounded in time: bare-LaTeX
references (MATH-500's ``answer`` column) read as veRL's ``math_verify`` reads them, ``exact`` keeping
signs and decimal points, the last ``####``, a ``None`` reference scored 0.0, integers compared
exactly, linear scans, and math equivalence bounded in any thread and in asyncio."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import warnings

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.components import AnswerMatch, _math_bound
from rewardkit.components.answer_match import (MathBoundWarning, gsm8k_answer, last_boxed, normalize,
                                               plain_math)
from rewardkit.inputs import IntegerColumn

math_verify = pytest.importorskip("math_verify", reason="needs math-verify: pip install 'rewardkit[math]'")


def composer(components: dict) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components})


# ---- mode: math with bare-LaTeX references ---------------------------------------------------------
BARE = [  # (completion's boxed answer, MATH-500 style reference, right?)
    (r"4\sqrt{2}", r"4\sqrt{2}", True), ("4", r"4\sqrt{2}", False), (r"58\sqrt{2}", r"58\sqrt{2}", True),
    ("256", "2^{8}", True), ("2", "2^{8}", False), ("40+41i", "40+41i", True), ("40", "40+41i", False),
    (r"\dfrac{\pi}{16}", r"\frac{\pi}{16}", True), (r"\frac{\pi}{8}", r"\frac{\pi}{16}", False),
    ("[35,39)", "[35,39)", True), ("(35,39)", "[35,39)", False), ("(16,-17)", "(16,-17)", True),
    ("(16,17)", "(16,-17)", False), (r"\{1,6,8\}", r"\{1,6,8\}", True), (r"\{1,6\}", r"\{1,6,8\}", False),
    (r"\text{(B)}", r"\text{(B)}", True), ("B", r"\text{(B)}", True), ("C", r"\text{(B)}", False),
    (r"\dfrac{3}{4}", "0.75", True), (r"\$18.90", r"\$18.90", True), ("18.9", r"\$18.90", True),
]


@pytest.mark.parametrize("answer, reference, right", BARE)
@pytest.mark.parametrize("extract", ["none", "boxed"])
def test_math_mode_reads_a_bare_latex_reference_whole(answer: str, reference: str, right: bool, extract: str) -> None:
    match = AnswerMatch(mode="math", extract=extract)
    assert match.score(f"So the answer is \\boxed{{{answer}}}.", reference) == float(right)
    assert match.bound_counts()["reference_unparsed"] == 0


def test_math_mode_reads_a_worded_reference_as_trl_does() -> None:
    match = AnswerMatch(mode="math")
    solution = r"We add: $1 + 2 = 3$, so the answer is $\boxed{3}$."
    assert match.score(r"\boxed{3}", solution) == 1.0
    assert match.score(r"\boxed{4}", solution) == 0.0


def test_math_batches_give_the_scalar_scores() -> None:
    match = AnswerMatch(mode="math", extract="boxed")
    completions = [f"\\boxed{{{a}}}" for a, _, _ in BARE]
    references = [r for _, r, _ in BARE]
    got = match.compute({"completion": completions, "reference": references}, None, None)
    assert got.tolist() == [float(right) for _, _, right in BARE]


@pytest.mark.parametrize("completion, reference, expected", [
    (r"So $\boxed{19\sqrt3}$.", r"19\sqrt{3}", 1.0),  # TRL's reading keeps only the text of this box
    (r"Final Answer: The final answer is $20\sqrt7$. I hope it is correct.", r"20\sqrt{7}", 1.0),
    ("We add them. The answer is 960.", "960", 1.0),
    (r"The answer is 7\sqrt{3}.", r"7\sqrt{3}", 1.0),
    ("The answer is 5. Check: 5 * 2 = 10", "10", 0.0),  # a check after the answer is no answer
    ("The answer is 5. Check: 5 * 2 = 10", "5", 0.0),  # not read either way: nothing may follow the statement
    (r"The answer is $\boxed{4}$. Check against the first case: 10", "10", 0.0),
    ("I am not sure, maybe 960", "960", 0.0),
])
def test_a_whole_completion_is_read_where_trls_reading_understands_nothing(completion: str, reference: str,
                                                                           expected: float) -> None:
    assert AnswerMatch(mode="math").score(completion, reference) == expected


def test_a_reference_math_verify_cannot_parse_is_compared_as_text_and_counted() -> None:
    match = AnswerMatch(mode="math", extract=r"answer: (.*)")
    assert match.score("answer: }{", "}{") == 1.0
    assert match.score("answer: x", "}{") == 0.0
    assert match.bound_counts()["reference_unparsed"] == 2
    assert plain_math(r"\left( 1, \dfrac{1}{2} \right)") == r"(1,\frac{1}{2})"
    assert plain_math("(1,2)") != plain_math("[1,2]")


# ---- mode: exact keeps what makes a number that number -----------------------------------------------
@pytest.mark.parametrize("extract, completion, reference, expected", [
    ("gsm8k", "#### -175", "175", 0.0), ("gsm8k", "#### -175", "-175", 1.0), ("gsm8k", "#### 69.1", "691", 0.0),
    ("gsm8k", "#### 69.1", "69.1", 1.0), ("boxed", r"\boxed{-15}", "15", 0.0), ("boxed", r"\boxed{-15}", "\u221215", 1.0),
    ("none", "-.5", ".5", 0.0), ("none", ".5", "5", 0.0), ("none", "1,234", "1234", 1.0), ("none", "5-7", "57", 0.0),
    ("none", "1,2", "12", 0.0), ("none", "The answer: 42.", "the answer 42", 1.0), ("none", "72.", "72", 1.0),
])
def test_exact_mode_keeps_signs_and_decimal_points(extract: str, completion: str, reference: str,
                                                   expected: float) -> None:
    match = AnswerMatch(extract=extract)
    assert match.score(completion, reference) == expected
    assert match.compute({"completion": [completion], "reference": [reference]}, None, None).tolist() == [expected]


def test_normalize_is_unchanged_where_no_number_is_signed_or_split() -> None:
    assert normalize(" The  Answer: Paris! ") == "the answer paris"
    assert normalize("x = 3, y = 4") == "x 3 y 4"


# ---- extract: gsm8k reads the last #### ------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("#### 7 ... wait, that is wrong ... #### 42", "42"), ("#### 42 then #### none", "42"), ("#####5", "5"),
    ("#### 1,234\n#### -3", "-3"),
])
def test_gsm8k_takes_the_last_answer_line(text: str, expected: str) -> None:
    assert gsm8k_answer(text) == expected
    assert AnswerMatch(extract="gsm8k", mode="numeric").score(text, expected) == 1.0
    assert AnswerMatch(extract="gsm8k", mode="numeric").compute({"completion": [text], "reference": [expected]},
                                                                None, None).tolist() == [1.0]


# ---- a None reference -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["exact", "strict", "numeric", "math"])
@pytest.mark.parametrize("extract_reference", ["none", "gsm8k"])
def test_a_none_reference_scores_zero_for_its_sample_only(mode: str, extract_reference: str) -> None:
    c = composer({"correct": {"type": "answer_match", "params": {"mode": mode, "extract": "boxed",
                                                                 "extract_reference": extract_reference}}})
    reference = "#### 72" if extract_reference == "gsm8k" else "72"
    result = c({"completion": [r"\boxed{72}", r"\boxed{72}", r"\boxed{}"], "reference": [reference, None, None]})
    np.testing.assert_array_equal(result.total, [1.0, 0.0, 0.0])
    assert c({"completion": r"\boxed{72}", "reference": None}).total == 0.0
    assert c({"completion": r"\boxed{72}", "reference": reference}).total == 1.0


def test_a_none_reference_through_trls_function() -> None:
    from rewardkit.integrations.trl import TRLRewardFunctions

    (fn,) = TRLRewardFunctions(composer({"correct": {"type": "answer_match", "params": {"mode": "numeric"}}})).funcs
    assert fn(prompts=["q", "q"], completions=["72", "72"], reference=["72", None]) == [1.0, 0.0]


# ---- mode: numeric compares integers exactly ----------------------------------------------------------
def test_numeric_mode_compares_integers_exactly() -> None:
    match = AnswerMatch(mode="numeric", extract="boxed")
    big, next_one = "123456789012345678", "123456789012345679"
    assert match.score(f"\\boxed{{{big}}}", next_one) == 0.0
    assert match.score(f"\\boxed{{{big}}}", big) == 1.0
    assert match.score(r"\boxed{0.1}", "0.1000000001") == 1.0  # floats within the tolerance, as before
    completions = [f"\\boxed{{{big}}}", f"\\boxed{{{big}}}", r"\boxed{7}"]
    for references in ([next_one, big, "7"], IntegerColumn([int(next_one), int(big), 7])):
        got = match.compute({"completion": completions, "reference": references}, None, None)
        assert got.tolist() == [0.0, 1.0, 1.0]
    gsm8k = AnswerMatch(mode="numeric", extract="gsm8k")
    assert gsm8k.compute({"completion": [f"#### {big}"], "reference": [next_one]}, None, None).tolist() == [0.0]


# ---- linear scans -----------------------------------------------------------------------------------
def _last_boxed_by_definition(text: str) -> str | None:
    """The last ``\\boxed{`` whose braces close, each tried from its own start (quadratic: small texts)."""
    for start in sorted((i for i in range(len(text)) if text.startswith("\\boxed{", i)), reverse=True):
        depth = 0
        for i in range(start + 6, len(text)):
            depth += (text[i] == "{") - (text[i] == "}")
            if depth == 0:
                return text[start + 7:i]
    return None


def test_last_boxed_is_the_definition_on_random_texts() -> None:
    rng = random.Random(7)
    pieces = ["\\boxed{", "{", "}", "x", "1", " "]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        assert last_boxed(text) == _last_boxed_by_definition(text), text


def test_unclosed_boxes_are_not_each_rescanned_to_the_end() -> None:
    """40,000 unclosed boxes (280 KB) after a closed one: one pass. Rescanning each box to the end
    would step through about 5.6e9 characters in Python (minutes), where this takes milliseconds."""
    text = r"\boxed{41} " + "\\boxed{" * 40_000
    assert last_boxed(text) == "41"
    assert AnswerMatch(extract="boxed", mode="numeric").score(text, "41") == 1.0
    assert last_boxed("\\boxed{" * 40_000) is None


def test_many_answer_lines_are_read_once() -> None:
    text = "#### x " * 50_000 + "#### 5"
    assert gsm8k_answer(text) == "5"
    assert gsm8k_answer("####" * 50_000) is None


# ---- math equivalence bounded in any thread -----------------------------------------------------------
@pytest.mark.parametrize("text, refused", [
    ("9^{9^{9}}+1", True), ("2^{2^{30}}", True), ("10^{1000000}", True), ("1000000!", True), ("x^{9^{9^{9}}}", True),
    ("9**9**9", True), ("(10^{6})!", True), ("2^{10}", False), ("10^{100000}", False), ("2^{n}", False),
    ("x^{10}", False), ("(x+1)^{2}", False), (r"\frac{9^{9}}{2}", False), ("100!", False), ("e^{i\\pi}", False),
])
def test_refusal_reads_the_size_of_powers_and_factorials(text: str, refused: bool) -> None:
    assert (_math_bound.refusal(text) is not None) == refused


def test_refusal_is_linear_in_its_text() -> None:
    """Each operator reads at most OPERAND_CHARS of its operands: 20,000 unclosed exponents are cheap."""
    assert _math_bound.refusal("2^{" * 20_000) is None
    assert _math_bound.refusal("{" * 20_000 + "}^2" * 20_000) is None
    assert _math_bound.refusal("x" * 2000, max_chars=1000) is not None


def _in_thread(fn, *args):
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn(*args)))
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the call did not end"
    return out["value"]


@pytest.mark.parametrize("extract", ["none", "boxed"])
def test_a_power_tower_is_refused_in_a_thread_and_in_asyncio(extract: str) -> None:
    match = AnswerMatch(mode="math", extract=extract)
    tower = r"so \boxed{9^{9^{9}}+1}"
    with pytest.warns(MathBoundWarning, match="refused before sympy"):
        assert _in_thread(match.score, tower, "5") == 0.0
    assert asyncio.run(asyncio.to_thread(match.score, tower, "5")) == 0.0
    got = asyncio.run(asyncio.to_thread(match.compute, {"completion": [tower, r"\boxed{5}"], "reference": ["5", "5"]},
                                        None, None))
    assert got.tolist() == [0.0, 1.0]
    assert match.bound_counts()["refused"] == 3


def test_an_item_over_its_time_is_killed_in_a_thread_and_counted(monkeypatch) -> None:
    """With the guard off, the tower reaches sympy: the worker is killed at the item's deadline (a
    thread's math-verify has no timeout of its own), the next item is checked in a new worker."""
    monkeypatch.setattr(_math_bound, "refusal", lambda text, max_chars=None: None)
    monkeypatch.setattr(_math_bound, "ITEM_TIMEOUT_S", 1.0)
    match = AnswerMatch(mode="math", extract="boxed")
    batch = {"completion": [r"\boxed{9^{9^{9}}+1}", r"\boxed{3}"], "reference": ["5", "3"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MathBoundWarning)
        assert _in_thread(match.compute, batch, None, None).tolist() == [0.0, 1.0]
        assert asyncio.run(asyncio.to_thread(match.score, batch["completion"][0], "5")) == 0.0
    assert match.bound_counts()["timed_out"] == 2


def test_a_call_past_its_budget_scores_the_rest_zero_and_counts_them(monkeypatch) -> None:
    monkeypatch.setattr(_math_bound, "CALL_TIMEOUT_S", 0.0)
    match = AnswerMatch(mode="math", extract="boxed")
    with pytest.warns(MathBoundWarning, match="spent its"):
        got = match.compute({"completion": [r"\boxed{1}", r"\boxed{2}"], "reference": ["1", "2"]}, None, None)
    assert got.tolist() == [0.0, 0.0]
    assert match.bound_counts()["over_call_budget"] == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_does_not_use_its_parents_workers() -> None:
    match = AnswerMatch(mode="math", extract="boxed")
    assert match.score(r"\boxed{2}", "2") == 1.0  # a worker now idle in the pool
    assert _math_bound.POOL.idle
    pid = os.fork()
    if pid == 0:  # the child: the parent's workers are forgotten, not shared
        os._exit(0 if not _math_bound.POOL.idle else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _math_bound.POOL.idle and match.score(r"\boxed{3}", "3") == 1.0  # the parent's still serve it


def test_where_no_worker_can_start_math_runs_in_process_and_says_so(monkeypatch) -> None:
    def refuse() -> None:
        raise _math_bound.WorkerUnavailable("no worker here (test)")

    monkeypatch.setattr(_math_bound, "_Worker", refuse)
    monkeypatch.setattr(_math_bound.POOL, "idle", [])
    monkeypatch.setattr(_math_bound.POOL, "unavailable", None)
    match = AnswerMatch(mode="math", extract="boxed")
    with pytest.warns(RuntimeWarning, match="no worker here"):
        got = match.compute({"completion": [r"\boxed{4\sqrt{2}}", r"\boxed{4}"], "reference": [r"4\sqrt{2}"] * 2},
                            None, None)
    assert got.tolist() == [1.0, 0.0]
    with pytest.warns(MathBoundWarning, match="refused before sympy"):  # the guard holds in process too
        assert _in_thread(match.score, r"\boxed{9^{9^{9}}+1}", "5") == 0.0
