"""rewardkit.integrations.trl driven by TRL's own GRPOTrainer on a tiny model built here (CPU, offline).

The reward functions are called by the installed trainer's code: a two-step ``train()`` and its
``_calculate_rewards`` on batches of different sizes, the method through which GRPOTrainer calls
every reward function (keyword arguments prompts, completions, completion_ids, the dataset
columns, trainer_state, log_extra, log_metric).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trl")  # the optional extra "trl"

import torch  # noqa: E402
from trl_support import tiny_trainer  # noqa: E402

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.integrations.trl import TRLRewardFunctions  # noqa: E402

CONFIG = {
    "version": 1,
    "components": {
        "correct": {"type": "info_value", "params": {"key": "correct"}, "weight": 2.0},
        "length": {"type": "linear", "inputs": {"value": "n_words"},
                   "weight": {"schedule": "linear", "start": -0.1, "end": -0.5, "steps": 40}},
    },
}


def features(prompt: str, completion: str, answer: str, **_: object) -> dict[str, float]:
    """One completion's context: whether it contains the row's answer, and its length in words."""
    return {"correct": float(answer in completion.split()), "n_words": float(len(completion.split()))}


def batch(n: int, offset: int = 0) -> tuple[list[dict], list[str], list[str], list[list[int]]]:
    """n dataset rows and completions, as GRPOTrainer hands them to _calculate_rewards."""
    prompts = [f"prompt {i}" for i in range(offset, offset + n)]
    completions = [" ".join(["answer", "is", str(i % 4 + 1)][: i % 3 + 1]) for i in range(offset, offset + n)]
    inputs = [{"prompt": p, "answer": str((i * 7) % 4 + 1)} for i, p in zip(range(offset, offset + n), prompts, strict=True)]
    return inputs, prompts, completions, [[0] * len(c.split()) for c in completions]


def test_per_term_functions_are_named_weighted_and_sum_to_the_total_in_grpo_training(tmp_path):
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features)
    assert [f.__name__ for f in rewards.funcs] == ["correct", "length"]
    assert rewards.reward_weights() == [2.0, -0.1]
    trainer = tiny_trainer(tmp_path, rewards.funcs, rewards.reward_weights())
    rewards.bind(trainer)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == 2
    for row in logs:
        # TRL logs each term by its name, and its weighted sum of them is the reward
        assert "rewards/correct/mean" in row and "rewards/length/mean" in row
        assert "rewardkit/length/weight" in row  # logged through TRL's log_metric
        weights = (2.0, row["rewardkit/length/weight"])
        assert row["reward"] == pytest.approx(weights[0] * row["rewards/correct/mean"]
                                              + weights[1] * row["rewards/length/mean"], abs=1e-4)
    # the schedule follows the trainer's step (trainer_state.global_step), one per batch here
    assert [row["rewardkit/length/weight"] for row in logs] == pytest.approx([-0.1, -0.1 - 0.4 * 1 / 40])
    assert trainer.reward_weights.tolist() == pytest.approx([2.0, -0.11])  # the schedule at step 1, bound
    assert trainer.state.global_step == 2

    # the exact call path, batch sizes changing between calls, all at the trainer's step 2
    check = RewardComposer.from_dict(CONFIG)
    for n, offset in ((4, 0), (7, 4), (3, 11)):
        inputs, prompts, completions, ids = batch(n, offset)
        per_func = trainer._calculate_rewards(inputs, prompts, completions, ids)
        assert per_func.shape == (n, 2)
        expected = check({k: np.array([features(p, c, **{"answer": r["answer"]})[k]
                                       for p, c, r in zip(prompts, completions, inputs, strict=True)])
                          for k in ("correct", "n_words")}, step=2, terminated=np.ones(n, bool))
        np.testing.assert_allclose(per_func[:, 0].numpy(), expected.terms["correct"].normalized, atol=1e-6)
        np.testing.assert_allclose(per_func[:, 1].numpy(), expected.terms["length"].normalized, atol=1e-6)
        total = (per_func * trainer.reward_weights.unsqueeze(0)).sum(dim=1)
        np.testing.assert_allclose(total.numpy(), expected.total, rtol=1e-5, atol=1e-5)


def test_one_total_function_logs_terms_through_log_metric(tmp_path):
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features, per_term=False)
    assert [f.__name__ for f in rewards.funcs] == ["rewardkit_total"] and rewards.reward_weights() == [1.0]
    trainer = tiny_trainer(tmp_path, rewards.funcs, rewards.reward_weights())
    check = RewardComposer.from_dict(CONFIG)
    for n in (5, 2):
        inputs, prompts, completions, ids = batch(n)
        per_func = trainer._calculate_rewards(inputs, prompts, completions, ids)
        ctx = {k: np.array([features(p, c, answer=r["answer"])[k] for p, c, r in zip(prompts, completions, inputs, strict=True)])
               for k in ("correct", "n_words")}
        np.testing.assert_allclose(per_func[:, 0].numpy(), check(ctx, step=0, terminated=np.ones(n, bool)).total, atol=1e-6)
    assert set(trainer._pending_metrics) >= {"rewardkit/correct/contribution", "rewardkit/length/contribution"}


def test_bad_features_and_total_transforms_are_refused():
    with pytest.raises(ValueError, match="per_term=False"):
        TRLRewardFunctions(RewardComposer.from_dict({**CONFIG, "total": {"transforms": ["tanh"]}}), features)
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG),
                                 lambda p, c, **kw: {"correct": 1.0} if p == "a" else {"correct": 1.0, "n_words": 2})
    with pytest.raises(ValueError, match="'n_words' for completion 0 but not for completion 1"):
        rewards.funcs[0](prompts=["b", "a"], completions=["x", "y"])


# ---- inputs checked like the composer's, no stale cache ----------------------------
@pytest.mark.parametrize("bad", ["12", b"1", True, np.bool_(False), None, 1j, {"v": 1}, ["1", "2"]], ids=repr)
def test_features_values_are_checked_like_composer_inputs(bad):
    from rewardkit.errors import InvalidInputError

    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG),
                                 lambda p, c, **kw: {"correct": bad if p == "b" else 1.0, "n_words": 2.0})
    with pytest.raises(InvalidInputError, match=r"features returned 'correct' = .* for completion 1: expected"):
        rewards.funcs[0](prompts=["a", "b"], completions=["x", "y"])
    assert rewards.composer.step == 0  # nothing was scored


def test_numpy_and_torch_numbers_are_accepted():
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG),
                                 lambda p, c, **kw: {"correct": np.float32(1.0), "n_words": torch.tensor(3.0)})
    assert rewards.funcs[0](prompts=["a"], completions=["x"]) == [1.0]


def test_a_batch_edited_in_place_is_scored_again_not_served_from_the_cache():
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features)
    prompts, completions, answers = ["p", "q"], ["answer is 1", "no"], ["1", "2"]
    correct, length = rewards.funcs
    assert correct(prompts=prompts, completions=completions, answer=answers) == [1.0, 0.0]
    assert length(prompts=prompts, completions=completions, answer=answers) == [3.0, 1.0]  # same batch: cached
    assert rewards.composer.step == 2
    completions[1] = "answer is 2"  # the same list objects, new contents
    assert correct(prompts=prompts, completions=completions, answer=answers) == [1.0, 1.0]
    answers[0] = "3"  # a dataset column edited in place
    assert correct(prompts=prompts, completions=completions, answer=answers) == [0.0, 1.0]
    assert length(prompts=prompts, completions=completions, answer=answers) == [3.0, 3.0]
    assert rewards.composer.step == 6  # three batches scored, the last one shared by both functions


# ---- no features function, the trainer's clock, weights applied once ------------------
def test_without_features_the_context_is_prompt_completion_text_and_dataset_columns():
    from rewardkit.integrations.trl import completion_text, prompt_text

    chat_prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 2+2?"}]
    chat_completion = [{"role": "assistant", "content": [{"type": "text", "text": "Answer: "}, {"type": "text", "text": "4"}]}]
    assert prompt_text(chat_prompt) == "What is 2+2?" and prompt_text("2+2=") == "2+2="
    assert completion_text(chat_completion) == "Answer: 4" and completion_text(" 4") == " 4"
    with pytest.raises(Exception, match="completion: expected a string or a list of chat messages"):
        completion_text(42)
    config = {"version": 1, "components": {"difficulty": {"type": "linear", "inputs": {"value": "level"}}}}
    rewards = TRLRewardFunctions(RewardComposer.from_dict(config))
    (difficulty,) = rewards.funcs
    assert difficulty(prompts=[chat_prompt, chat_prompt], completions=[chat_completion] * 2, completion_ids=[[1], [2]],
                      level=[1, 3], answer=["4", "4"], trainer_state=None) == [1.0, 3.0]  # unread columns are ignored
    with pytest.raises(ValueError, match=r"reads 'level', which is neither the prompt, the completion nor a dataset "
                                         r"column \(available: prompt, completion, completion_tokens, completion_ids, answer\)"):
        difficulty(prompts=["a"], completions=["b"], answer=["4"])


class _State:
    """What TRL hands reward functions as trainer_state (the field read here)."""

    def __init__(self, global_step: int) -> None:
        self.global_step = global_step


@pytest.mark.parametrize("clock", ["trainer", "completions"])
def test_schedules_follow_the_trainer_step_or_the_completions_scored(clock):
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features, clock=clock)

    class Trainer:  # the attribute bind() reads and writes, as GRPOTrainer holds it
        reward_weights = torch.tensor(rewards.reward_weights())
        state = _State(0)

    rewards.bind(Trainer)
    for global_step in (0, 10, 20):
        rewards.funcs[1](prompts=["p"] * 4, completions=["a b"] * 4, answer=["1"] * 4, trainer_state=_State(global_step))
    expected_step = 20 if clock == "trainer" else 8  # the trainer's step, or 4 + 4 completions scored before
    assert Trainer.reward_weights.tolist() == pytest.approx([2.0, -0.1 - 0.4 * expected_step / 40])


def test_weights_given_twice_or_a_schedule_left_unbound_are_refused(tmp_path):
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features)
    with pytest.raises(ValueError, match="follow a schedule.*rewards.bind"):
        rewards.funcs[0](prompts=["p"], completions=["a"], answer=["1"], trainer_state=_State(0))

    class Trainer:
        reward_weights = torch.tensor([1.0, 1.0])  # weights of the user's own on top of the config's
        state = _State(0)

    with pytest.raises(ValueError, match=r"reward_weights \[1.0, 1.0\] are not the reward config's weights"):
        rewards.bind(Trainer)


def test_normalize_then_sum_trains_with_the_config_weights_applied_once_by_trl(tmp_path):
    rewards = TRLRewardFunctions(RewardComposer.from_dict(CONFIG), features)
    trainer = tiny_trainer(tmp_path, rewards.funcs, rewards.reward_weights(), multi_objective_aggregation="normalize_then_sum")
    rewards.bind(trainer)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == 2
    for row in logs:
        for term in ("correct", "length"):
            assert {f"rewardkit/{term}/{k}" for k in ("raw", "weight", "contribution")} <= set(row)
        assert row["rewardkit/length/contribution"] == pytest.approx(
            row["rewardkit/length/weight"] * row["rewards/length/mean"], abs=1e-4)
    assert trainer.reward_weights.tolist() == pytest.approx([2.0, -0.11])


# ---- remote terms through TRL's async reward functions --------------------------------------------
@pytest.fixture
def stub_scorer():
    """A real HTTP scorer on 127.0.0.1 (score = the completion's length in characters)."""
    from schedulers.engines.replicas import free_port
    from schedulers.engines.stub import ServerThread
    from schedulers.engines.stub_scorer import StubScorer

    stub = StubScorer()
    server = ServerThread(stub.app(), free_port()).start()
    try:
        yield stub, server.url + "/score"
    finally:
        server.stop()


def test_remote_terms_run_as_trl_async_functions_sharing_one_evaluation_per_batch(tmp_path, stub_scorer):
    stub, url = stub_scorer
    stub.delay_s = 0.2
    config = {"version": 1, "components": {
        "format": {"type": "regex_match", "params": {"pattern": r"answer is \d"}, "weight": 1.0},
        "length": {"type": "length_penalty", "params": {"unit": "words", "max": 2}, "weight": 0.5},
        "rm": {"type": "remote_score", "params": {"url": url, "batch_size": 4, "max_concurrency": 2}, "weight": 0.1},
    }}
    from trl.trainer.utils import is_async_callable

    rewards = TRLRewardFunctions(RewardComposer.from_dict(config))
    assert rewards.asynchronous and all(is_async_callable(f) for f in rewards.funcs)
    trainer = tiny_trainer(tmp_path, rewards.funcs, rewards.reward_weights())
    rewards.bind(trainer)
    inputs, prompts, completions, ids = batch(6)
    per_func = trainer._calculate_rewards(inputs, prompts, completions, ids)  # on TRL's own event loop
    np.testing.assert_allclose(per_func[:, 0].numpy(), [float("answer is" in c and len(c.split()) == 3) for c in completions])
    np.testing.assert_allclose(per_func[:, 1].numpy(), [-max(0, len(c.split()) - 2) for c in completions])
    np.testing.assert_allclose(per_func[:, 2].numpy(), [len(c) for c in completions])  # the stub's score
    # one evaluation for the three functions: 6 completions sent once, as two concurrent requests
    # (which arrives first at the stub is up to the scheduler)
    assert sorted(stub.batch_sizes) == [2, 4]
    assert trainer._pending_metrics["rewardkit/rm/requests"] == [2.0]
    assert trainer._pending_metrics["rewardkit/rm/contribution"] == pytest.approx([0.1 * np.mean([len(c) for c in completions])])
    trainer.train()  # two GRPO steps with the async functions
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == 2 and all("rewardkit/rm/latency_s" in row and "rewards/rm/mean" in row for row in logs)
    rewards.composer.close()
