"""The rewards of TRL's GRPOTrainer docs and of ``trl.rewards``, each written in rewardkit YAML,
give TRL's values through ``TRLRewardFunctions`` on plain and on conversational completions.

TRL's own functions are called where the installed ``trl`` has them; the docs' examples are
written here as the docs write them. A docs function that reads ``completion[0]["content"]`` is
called on the conversational form of the same completions.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.config import parse_yaml

trl_rewards = pytest.importorskip("trl.rewards", reason="needs TRL: pip install 'rewardkit[trl]'")
from rewardkit.integrations.trl import TRLRewardFunctions  # noqa: E402


def functions(yaml_text: str, **kwargs) -> TRLRewardFunctions:
    return TRLRewardFunctions(RewardComposer.from_dict(parse_yaml(yaml_text)), **kwargs)


def chat(texts: list[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "assistant", "content": t}] for t in texts]


def token_ids(texts: list[str]) -> list[list[int]]:
    """Stand-in token ids: one per character, few distinct values (so n-grams repeat)."""
    return [[ord(c) % 7 for c in t] for t in texts]


def scores(rewards: TRLRewardFunctions, texts: list[str], conversational: bool, **columns) -> dict[str, list]:
    completions = chat(texts) if conversational else list(texts)
    prompts = [[{"role": "user", "content": "q"}]] * len(texts) if conversational else ["q"] * len(texts)
    ids = token_ids(texts)
    return {f.__name__: f(prompts=prompts, completions=completions, completion_ids=ids, trainer_state=None,
                          **columns) for f in rewards.funcs}


BOTH = pytest.mark.parametrize("conversational", [False, True], ids=["plain", "conversational"])


# ---- trl.rewards -------------------------------------------------------------------------------
THINK = ["<think>\nThis is my reasoning.\n</think>\nThis is my answer.", "<think>\nThis is my reasoning.\nThis is my "
         "answer.", "<think>a</think> then <think>b</think>", "x<think>a</think>", "", "<think></think>",
         "<think>multi\nline\n</think>", " <think>a</think>", "<think>a</think>\n\n\nend"]


@BOTH
def test_think_format_reward(conversational: bool) -> None:
    rewards = functions(r"""
version: 1
components:
  think_format:
    type: regex_match
    params: {pattern: '(?s)^<think>(?!.*<think>)(.*?)</think>.*$'}
""")
    got = scores(rewards, THINK, conversational)["think_format"]
    assert got == trl_rewards.think_format_reward(chat(THINK))
    assert 0.0 in got and 1.0 in got


MATH = [r"My answer is \boxed{\frac{1}{3}}", r"My answer is \boxed{\frac{1}{2}}", r"so $x = \frac{2}{6}$",
        r"\boxed{0.5}", "I do not know", r"\boxed{3}", r"The answer is \boxed{\sqrt{4}}"]
SOLUTIONS = [r"\frac{1}{3}", r"\frac{1}{3}", r"\frac{1}{3}", r"\frac{1}{2}", "7", "$3$", "2"]


@BOTH
def test_accuracy_reward_math_verify(conversational: bool) -> None:
    pytest.importorskip("math_verify", reason="needs math-verify: pip install 'rewardkit[math]'")
    rewards = functions(r"""
version: 1
components:
  accuracy:
    type: answer_match
    params: {mode: math}
    inputs: {reference: solution}
""")
    got = scores(rewards, MATH, conversational, solution=SOLUTIONS)["accuracy"]
    assert got == trl_rewards.accuracy_reward(chat(MATH), SOLUTIONS)
    assert got.count(1.0) >= 3 and 0.0 in got


def test_accuracy_reward_gold_it_cannot_parse_scores_zero_where_trl_skips() -> None:
    pytest.importorskip("math_verify", reason="needs math-verify: pip install 'rewardkit[math]'")
    rewards = functions("version: 1\ncomponents:\n  accuracy: {type: answer_match, params: {mode: math}, "
                        "inputs: {reference: solution}}\n")
    texts, gold = [r"\boxed{1}"], ["no mathematics here"]
    assert trl_rewards.accuracy_reward(chat(texts), gold) == [None]
    assert scores(rewards, texts, False, solution=gold)["accuracy"] == [0.0]


LENGTHS = [0, 10, 79, 80, 81, 90, 99, 100, 101, 150]


@pytest.mark.parametrize("max_length, cache", [(100, 20), (100, 0), (50, 50)])
@BOTH
def test_soft_overlong_punishment(conversational: bool, max_length: int, cache: int) -> None:
    rewards = functions(f"""
version: 1
components:
  overlong:
    type: overlong_penalty
    params: {{max_length: {max_length}, cache_length: {cache}}}
""")
    texts = ["a" * n for n in LENGTHS]
    trl = trl_rewards.get_soft_overlong_punishment(max_completion_len=max_length, soft_punish_cache=cache)
    got = scores(rewards, texts, conversational)["overlong"]
    assert got == pytest.approx(trl(token_ids(texts)), rel=1e-12, abs=0)
    assert got[0] == 0.0 and got[-1] == -1.0


REPEATS = ["abcd", "aaaaa", "", "a", "ab", "abababab", "the cat the cat the cat", "hello world, hello"]


@pytest.mark.parametrize("n, max_penalty", [(2, -1.0), (3, -0.5), (1, -2.0)])
@BOTH
def test_repetition_penalty_over_token_ids(conversational: bool, n: int, max_penalty: float) -> None:
    rewards = functions(f"""
version: 1
components:
  repetition:
    type: repetition_rate
    params: {{n: {n}}}
    inputs: {{completion: completion_ids}}   # the completion's token ids, as TRL passes them
    transforms: [{{scale: {-max_penalty}}}, {{scale: -1}}]
""")
    trl = trl_rewards.get_repetition_penalty_reward(ngram_size=n, max_penalty=max_penalty)
    got = scores(rewards, REPEATS, conversational)["repetition"]
    assert got == pytest.approx(trl(token_ids(REPEATS)), rel=1e-12, abs=1e-15)
    assert min(got) < 0.0


# ---- the GRPOTrainer docs ------------------------------------------------------------------
def content(completion) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def docs_reward_len(completions, **kwargs):
    """The quick start's reward: completions close to 20 characters."""
    return [-abs(20 - len(content(completion))) for completion in completions]


def docs_format_reward_func(completions, **kwargs):
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, c) for c in completion_contents]
    return [1.0 if match else 0.0 for match in matches]


def docs_boxed_reward_func(completions, ground_truth, **kwargs):
    matches = [re.search(r"\\boxed\{(.*?)\}", completion[0]["content"]) for completion in completions]
    contents = [match.group(1) if match else "" for match in matches]
    return [1.0 if c == gt else 0.0 for c, gt in zip(contents, ground_truth, strict=True)]


def docs_length_in_tokens(completion_ids, **kwargs):
    return [float(len(ids)) for ids in completion_ids]


TEXTS = ["short", "exactly twenty chars", "a completion that runs well past twenty characters", "",
         "<think>a</think><answer>b</answer>", "<think>a\nb</think><answer>c</answer>",
         "<think>x</think><answer>y</answer>\n", "<think></think><answer></answer>", "<answer>b</answer>",
         r"...Calculating the answer. \boxed{72}", r"\boxed{71} then \boxed{72}", r"\boxed{72.}", r"\boxed{ 72}",
         r"\boxed{\frac{1}{2}}"]
GROUND_TRUTH = ["72"] * len(TEXTS)


@BOTH
def test_docs_length_reward(conversational: bool) -> None:
    rewards = functions("""
version: 1
components:
  reward_len:
    type: length_target
    params: {target: 20, unit: chars}
""")
    got = scores(rewards, TEXTS, conversational)["reward_len"]
    assert got == docs_reward_len(chat(TEXTS)) == docs_reward_len(TEXTS)
    assert 0.0 in got


@BOTH
def test_docs_format_regex(conversational: bool) -> None:
    rewards = functions(r"""
version: 1
components:
  format:
    type: regex_match
    params: {pattern: '^<think>.*?</think><answer>.*?</answer>$'}
""")
    got = scores(rewards, TEXTS, conversational)["format"]
    assert got == docs_format_reward_func(chat(TEXTS))
    assert got.count(1.0) == 3


@BOTH
def test_docs_boxed_accuracy_against_a_ground_truth_column(conversational: bool) -> None:
    rewards = functions(r"""
version: 1
components:
  correct:
    type: answer_match
    params: {extract: '\\boxed\{(.*?)\}', mode: strict}
    inputs: {reference: ground_truth}
""")
    got = scores(rewards, TEXTS, conversational, ground_truth=GROUND_TRUTH)["correct"]
    assert got == docs_boxed_reward_func(chat(TEXTS), GROUND_TRUTH)
    assert got.count(1.0) == 1  # the first box counts, as re.search finds it; "72." and " 72" are not "72"


@BOTH
def test_boxed_answer_against_an_integer_column_in_a_batch(conversational: bool) -> None:
    """GSM8K-style answers as integers: the column is read as text, the last box compared numerically."""
    rewards = functions("""
version: 1
components:
  correct: {type: answer_match, params: {extract: boxed, mode: numeric}, inputs: {reference: answer}}
""")
    texts = [r"\boxed{72}", r"\boxed{71} no, \boxed{72}", r"\boxed{1,234}", "\\boxed{\u22125}", r"\boxed{5-7}", "72"]
    got = scores(rewards, texts, conversational, answer=[72, 72, 1234, -5, -7, 72])["correct"]
    assert got == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]  # a Unicode minus is a sign, a hyphen between numbers is not


@BOTH
def test_docs_reward_over_completion_ids(conversational: bool) -> None:
    rewards = functions("""
version: 1
components:
  length:
    type: length_penalty
    params: {unit: tokens, max: 0}
    transforms: [{scale: -1}]    # the penalty's opposite: the number of tokens
""")
    got = scores(rewards, TEXTS, conversational)["length"]
    assert got == docs_length_in_tokens(token_ids(TEXTS))


# the docs' multi-task example: rewards that return None for the samples they do not apply to
MULTI_PROMPTS = ["What is 2+2?", "Write a function that returns the sum of two numbers.", "What is 3*4?",
                 "Write a function that returns the product of two numbers."]
MULTI_TASKS = ["math", "code", "math", "code"]
MULTI_ANSWERS = {"What is 2+2?": "4", "What is 3*4?": "12"}


def check_math_solution(prompt: str, completion: str) -> bool:  # left to the reader by the docs
    numbers = re.findall(r"-?\d+", completion)
    return bool(numbers) and numbers[-1] == MULTI_ANSWERS[prompt]


def test_solution(prompt: str, completion: str) -> bool:  # left to the reader by the docs
    return "return" in completion


test_solution.__test__ = False  # a docs helper, not a pytest test


def docs_math_reward_func(prompts, completions, task, **kwargs):
    rewards = []
    for prompt, completion, t in zip(prompts, completions, task, strict=True):
        if t == "math":
            rewards.append(1.0 if check_math_solution(prompt, content(completion)) else -1.0)
        else:
            rewards.append(None)
    return rewards


def docs_coding_reward_func(prompts, completions, task, **kwargs):
    rewards = []
    for prompt, completion, t in zip(prompts, completions, task, strict=True):
        if t == "coding":  # the docs' dataset says "code": this function applies to no sample, as written
            rewards.append(1.0 if test_solution(prompt, content(completion)) else -1.0)
        else:
            rewards.append(None)
    return rewards


MULTI_YAML = r"""
version: 1
components:
  math:
    type: answer_match
    params: {mode: numeric}
    inputs: {reference: answer}
    transforms: [{scale: 2}, {shift: -1}]   # correct 1, else -1
    applies_to: {task: math}
  coding:
    type: regex_match
    params: {pattern: return}
    transforms: [{scale: 2}, {shift: -1}]
    applies_to: {task: coding}
"""


@BOTH
def test_docs_rewards_that_return_none_where_they_do_not_apply(conversational: bool) -> None:
    texts = ["2+2 = 4", "def f(a, b): return a + b", "3*4 = 13", "def g(a, b): pass"]
    rewards = functions(MULTI_YAML)
    completions = chat(texts) if conversational else texts
    prompts = MULTI_PROMPTS
    answers = [MULTI_ANSWERS.get(p, "") for p in prompts]
    math, coding = rewards.funcs
    got_math = math(prompts=prompts, completions=completions, task=MULTI_TASKS, answer=answers)
    got_coding = coding(prompts=prompts, completions=completions, task=MULTI_TASKS, answer=answers)
    assert got_math == docs_math_reward_func(prompts, completions, MULTI_TASKS) == [1.0, None, -1.0, None]
    assert got_coding == docs_coding_reward_func(prompts, completions, MULTI_TASKS) == [None] * 4
    # TRL sums the functions that apply (nansum): the composer's total is that sum
    out = rewards.evaluate(prompts, completions, task=MULTI_TASKS, answer=answers)
    np.testing.assert_array_equal(out.total, [1.0, 0.0, -1.0, 0.0])
    np.testing.assert_array_equal(out.terms["math"].applies, [True, False, True, False])
    total_fn = functions(MULTI_YAML, per_term=False).funcs[0]
    assert total_fn(prompts=prompts, completions=completions, task=MULTI_TASKS, answer=answers) == [1.0, 0.0, -1.0, 0.0]


def test_none_reaches_trl_aggregation_as_nan() -> None:
    """What TRL does with None: the trainer's own aggregation over the functions (nansum)."""
    torch = pytest.importorskip("torch")
    rewards = functions(MULTI_YAML)
    texts = ["4", "return 1", "12", "pass"]
    answers = [MULTI_ANSWERS.get(p, "") for p in MULTI_PROMPTS]
    per_func = [f(prompts=MULTI_PROMPTS, completions=texts, task=MULTI_TASKS, answer=answers) for f in rewards.funcs]
    table = torch.tensor([[np.nan if v is None else v for v in column] for column in per_func]).T
    weights = torch.tensor(rewards.reward_weights())
    summed = (table * weights).nansum(dim=1).tolist()
    assert summed == [1.0, 0.0, 1.0, 0.0]


# ---- in GRPOTrainer itself ---------------------------------------------------------------------
GRPO_YAML = """
version: 1
components:
  correct:
    type: answer_match
    params: {mode: numeric}
    inputs: {reference: answer}
    applies_to: {task: math}
    weight: 2.0
  overlong:
    type: overlong_penalty
    params: {max_length: 4, cache_length: 2}
  chars:
    type: length_target
    params: {target: 5, unit: chars, per_unit: 0.1}
"""


def test_grpo_trainer_gets_none_where_a_term_does_not_apply_and_token_lengths_from_its_ids(tmp_path) -> None:
    pytest.importorskip("datasets", reason="needs TRL's stack: pip install 'rewardkit[trl]'")
    from trl_support import tiny_trainer

    rewards = functions(GRPO_YAML)
    data = {"prompt": ["the cat sat", "a dog ran", "the answer is", "yes no"], "answer": [1, 2, 3, 4],
            "task": ["math", "chat", "math", "chat"]}
    trainer = tiny_trainer(tmp_path, rewards.funcs, rewards.reward_weights(), data=data)
    rewards.bind(trainer)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == 2 and all("rewards/overlong/mean" in row and "rewards/correct/mean" in row for row in logs)
    # the exact path GRPOTrainer calls the functions through, with rows the term does not apply to
    inputs = [{"prompt": p, "answer": a, "task": t} for p, a, t in zip(*data.values(), strict=True)]
    prompts = data["prompt"]
    completions = ["1", "answer is 2", "the the the 3", "no"]
    ids = [[5] * n for n in (1, 3, 4, 6)]
    per_func = trainer._calculate_rewards(inputs, prompts, completions, ids).numpy()
    assert np.isnan(per_func[[1, 3], 0]).all()  # TRL turns None into NaN: the term does not apply there
    np.testing.assert_allclose(per_func[[0, 2], 0], [1.0, 1.0])
    soft = trl_rewards.get_soft_overlong_punishment(max_completion_len=4, soft_punish_cache=2)
    np.testing.assert_allclose(per_func[:, 1], soft(ids))
    np.testing.assert_allclose(per_func[:, 2], docs_chars(completions, 5, 0.1))
    total = np.nansum(per_func * trainer.reward_weights.numpy()[None, :], axis=1)
    out = RewardComposer.from_dict(parse_yaml(GRPO_YAML))({
        "completion": completions, "answer": data["answer"], "task": data["task"],
        "completion_tokens": np.array([len(i) for i in ids], dtype=float)})
    np.testing.assert_allclose(total, out.total, rtol=1e-6)


def docs_chars(completions: list[str], target: int, per_unit: float) -> list[float]:
    return [-per_unit * abs(len(c) - target) for c in completions]
