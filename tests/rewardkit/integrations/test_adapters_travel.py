"""Adapters that travel: TRL's reward functions and veRL's compute_score pickle and score the same in a
spawned process (as TRL's async trainer and veRL's reward workers receive them), with the composer's
state carried over; the inputs the adapters used to read silently are refused by name."""

from __future__ import annotations

import multiprocessing
import pickle
from typing import Any

import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError
from rewardkit.integrations.trl import TRLRewardFunctions
from rewardkit.integrations.verl import make_batch_compute_score, make_compute_score

CONFIG = {"version": 1, "components": {
    "correct": {"type": "answer_match", "params": {"mode": "numeric"}, "weight": 2.0,
                "inputs": {"reference": "answer"}},
    "short": {"type": "length_penalty", "params": {"unit": "words", "max": 3}, "normalize": "running_zscore"},
}}
VERL_CONFIG = {"version": 1, "components": {
    "correct": {"type": "answer_match", "params": {"mode": "numeric"}, "weight": 2.0},
    "short": {"type": "length_penalty", "params": {"unit": "words", "max": 3}, "normalize": "running_zscore"},
}}
PROMPTS = ["What is 8 * 9?", "What is 2 + 2?", "What is 10 - 3?"]
COMPLETIONS = ["The answer is 72.", "5", "It is seven, so the answer is 7 for sure"]
ANSWERS = ["72", "4", "7"]


def _call_in_child(payload: bytes) -> Any:
    """Run in a spawned interpreter: unpickle the functions and call each as its trainer would."""
    kind, funcs, args, kwargs = pickle.loads(payload)
    if kind == "trl_async":
        import asyncio

        async def run() -> list[Any]:
            return [await f(*args, **kwargs) for f in funcs]
        return asyncio.run(run())
    return [f(*args, **kwargs) for f in funcs]


def _spawned(kind: str, funcs: list[Any], *args: Any, **kwargs: Any) -> Any:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_call_in_child, (pickle.dumps((kind, funcs, args, kwargs)),))


def test_trl_functions_pickle_and_score_the_same_in_a_spawned_process_with_the_state_carried() -> None:
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG))
    batch = {"prompts": PROMPTS, "completions": COMPLETIONS, "answer": ANSWERS}
    rewards.evaluate(prompts=["q"] * 2, completions=["one two three four five six seven", "x"], answer=["1", "2"])
    # the running normalizer saw another batch first: the copy must carry its statistics
    here_copy = pickle.loads(pickle.dumps(rewards.funcs))
    expected = [f(**batch) for f in here_copy]
    there = _spawned("trl", rewards.funcs, **batch)
    assert there == expected
    assert [f.__name__ for f in here_copy] == ["correct", "short"]
    from trl.trainer.utils import is_async_callable
    assert not any(is_async_callable(f) for f in here_copy)
    # not the values of a fresh composer: the normalizer's statistics travelled
    fresh = [f(**batch) for f in TRLRewardFunctions(RewardComposer.from_dict(CONFIG)).funcs]
    assert fresh[1] != expected[1]


def test_trl_async_functions_stay_coroutine_functions_after_pickling() -> None:
    from trl.trainer.utils import get_callable_name, is_async_callable

    from rewardkit.integrations import trl as trl_module

    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG))
    rewards.asynchronous = True  # the path a config with a remote term takes
    rewards.funcs = [rewards._function(n) for n in rewards.term_names]
    copies = pickle.loads(pickle.dumps(rewards.funcs))
    assert all(is_async_callable(f) for f in copies)  # TRL's own checks, as its trainer reads them
    assert [get_callable_name(f) for f in copies] == ["correct", "short"]
    batch = {"prompts": PROMPTS, "completions": COMPLETIONS, "answer": ANSWERS}
    assert _spawned("trl_async", rewards.funcs, **batch)[0] == [1.0, 0.0, 1.0]
    assert trl_module.TOTAL_NAME == pickle.loads(pickle.dumps(TRLRewardFunctions(
        RewardComposer.from_dict(CONFIG), per_term=False).funcs[0])).__name__


def test_a_bound_trainer_stays_behind_and_a_copy_refuses_scheduled_per_term_weights() -> None:
    scheduled = {"version": 1, "components": {"short": {
        "type": "length_penalty", "params": {"unit": "words", "max": 3},
        "weight": {"schedule": "linear", "start": 0.0, "end": 1.0, "steps": 10}}}}
    rewards = TRLRewardFunctions(RewardComposer.from_dict(scheduled))

    class Unpicklable:
        reward_weights = [0.0]

        def __reduce__(self) -> Any:
            raise TypeError("a trainer does not pickle")

    rewards._trainer = Unpicklable()
    (copy,) = pickle.loads(pickle.dumps(rewards.funcs))

    class State:
        global_step = 3

    with pytest.raises(ValueError, match="another process.*per_term=False"):
        copy(prompts=["q"], completions=["a b c d e"], trainer_state=State())
    (total,) = pickle.loads(pickle.dumps(TRLRewardFunctions(RewardComposer.from_dict(scheduled), per_term=False).funcs))
    assert total(prompts=["q"], completions=["a b c d e"], trainer_state=State()) == [pytest.approx(-0.6)]


def test_verl_functions_pickle_and_score_the_same_in_a_spawned_process() -> None:
    single, batched = make_compute_score(VERL_CONFIG, return_dict=True), make_batch_compute_score(VERL_CONFIG)
    batched(["gsm8k"] * 2, ["one two three four five six seven", "x"], ["1", "2"])  # warms the normalizer
    single("gsm8k", COMPLETIONS[0], ANSWERS[0])
    copies = pickle.loads(pickle.dumps([single, batched]))
    assert copies[0].composer.state_dict() == single.composer.state_dict()
    expected_single = copies[0]("gsm8k", COMPLETIONS[2], ANSWERS[2])
    expected_batch = copies[1](["gsm8k"] * 3, COMPLETIONS, ANSWERS)
    there = _spawned("verl", [single], "gsm8k", COMPLETIONS[2], ANSWERS[2])
    assert there == [expected_single]
    assert _spawned("verl", [batched], ["gsm8k"] * 3, COMPLETIONS, ANSWERS) == [expected_batch]
    assert set(expected_single) == {"score", "correct", "short"}


def test_verl_batched_form_takes_an_empty_batch() -> None:
    batched = make_batch_compute_score(VERL_CONFIG)
    assert batched([], [], [], []) == [] and batched([], [], []) == []
    assert batched.composer.step == 0
    with pytest.raises(InvalidInputError, match="extra_infos: expected one per solution"):
        batched([], [], [], [{"a": 1}])


def test_a_chat_completion_with_no_assistant_turn_is_refused_by_its_index() -> None:
    (short,) = TRLRewardFunctions(RewardComposer.from_dict({"version": 1, "components": {
        "short": {"type": "length_penalty", "params": {"unit": "words", "max": 3}}}})).funcs
    ok = [{"role": "assistant", "content": "fine"}]
    with pytest.raises(InvalidInputError, match=r"completions\[1\]: a chat completion with no assistant message "
                                                r"\(roles: tool, user\)"):
        short(prompts=["q", "q"], completions=[ok, [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]])
