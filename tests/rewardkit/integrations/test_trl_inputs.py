"""TRL inputs the recipes meet: which assistant message is the completion, tool-call turns without
content, token ids, empty batches (no TRL needed: the functions are called as GRPOTrainer calls them)."""

from __future__ import annotations

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError
from rewardkit.integrations.trl import TRLRewardFunctions, completion_text

LENGTH = {"version": 1, "components": {"chars": {"type": "length_target", "params": {"target": 0, "unit": "chars"}}}}
TOOL_TURN = [{"role": "assistant", "content": "abc"}, {"role": "tool", "content": "result"},
             {"role": "assistant", "content": None, "tool_calls": [{"name": "f"}]},
             {"role": "assistant", "content": "final!"}]


@pytest.mark.parametrize("which, expected", [("first", "abc"), ("last", "final!"), ("all", "abc\n\nfinal!")])
def test_assistant_message_picks_the_completion_text(which: str, expected: str) -> None:
    assert completion_text(TOOL_TURN, which) == expected
    (chars,) = TRLRewardFunctions(RewardComposer.from_dict(LENGTH), assistant_message=which).funcs
    assert chars(prompts=["q"], completions=[TOOL_TURN]) == [-float(len(expected))]


def test_the_default_is_the_first_assistant_message_as_trl_examples_read_it() -> None:
    (chars,) = TRLRewardFunctions(RewardComposer.from_dict(LENGTH)).funcs
    assert chars(prompts=["q"], completions=[TOOL_TURN]) == [-3.0]
    with pytest.raises(ValueError, match="assistant_message: expected one of 'first', 'last', 'all', got 'second'"):
        TRLRewardFunctions(RewardComposer.from_dict(LENGTH), assistant_message="second")


def test_a_message_with_content_none_reads_as_empty_like_one_without_content() -> None:
    (chars,) = TRLRewardFunctions(RewardComposer.from_dict(LENGTH)).funcs
    none = [[{"role": "assistant", "content": None, "tool_calls": []}]]
    missing = [[{"role": "assistant", "tool_calls": []}]]
    assert chars(prompts=["q"], completions=none) == chars(prompts=["q"], completions=missing) == [0.0]


def test_an_empty_batch_gives_empty_lists_and_counts_nothing() -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "correct": {"type": "answer_match", "inputs": {"reference": "answer"}},
        "long": {"type": "length_penalty", "params": {"unit": "tokens", "max": 1}}}})
    rewards = TRLRewardFunctions(composer)
    for f in rewards.funcs:
        assert f(prompts=[], completions=[], completion_ids=[], answer=[], trainer_state=None) == []
    assert composer.step == 0
    (total,) = TRLRewardFunctions(composer, per_term=False).funcs
    assert total(prompts=[], completions=[], answer=[]) == []


def test_token_counts_come_from_completion_ids() -> None:
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "long": {"type": "length_penalty", "params": {"unit": "tokens", "max": 2}},
        "loops": {"type": "repetition_rate", "params": {"n": 1}, "inputs": {"completion": "completion_ids"}}}})
    long, loops = TRLRewardFunctions(composer).funcs
    ids = [[1, 2, 3, 4], np.array([5, 5]), (7, 7, 7, 8)]
    assert long(prompts=["q"] * 3, completions=["a"] * 3, completion_ids=ids) == [-2.0, 0.0, -2.0]
    assert loops(prompts=["q"] * 3, completions=["a"] * 3, completion_ids=ids) == [0.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="passed no completion_ids"):
        long(prompts=["q"], completions=["a"])
    with pytest.raises(InvalidInputError, match=r"completion_ids\[1\]: expected a sequence of token ids"):
        long(prompts=["q"] * 2, completions=["a"] * 2, completion_ids=[[1], "12"])
