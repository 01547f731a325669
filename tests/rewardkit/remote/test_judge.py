"""``judge`` against a real stub OpenAI-compatible server on 127.0.0.1: scores from first-token
logprobs (chat and completions shapes), the text fallback, answers without a label, and its
parameters' located errors."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from rewardkit.components import Judge
from rewardkit.errors import RemoteScoreError
from rewardkit.remote.judge_answers import LabelScale, chat_answer, completion_answers

RUBRIC = "Rate this answer with one digit from 0 to 9.\nQuestion: {prompt}\nAnswer: {completion}"
#: the stub puts 0.8 on its verdict and 0.15 on the other label (" 9" or " 1"), 0.05 on a non-label
GOOD = (0.8 * 9 / 9 + 0.15 * 1 / 9) / 0.95
BAD = (0.8 * 1 / 9 + 0.15 * 9 / 9) / 0.95


def ask(judge: Judge, completions: list[str]) -> np.ndarray:
    flags = np.zeros(len(completions), dtype=bool)
    return asyncio.run(judge.compute_async({"completion": completions, "prompt": ["q"] * len(completions)},
                                           flags, flags))


def judge(base: str, endpoint: str = "/v1/chat/completions", **params: Any) -> Judge:
    return Judge(name="judge", url=base + endpoint, model="stub", rubric=RUBRIC, **params)


@pytest.mark.parametrize(("endpoint", "batch_size", "requests"), [
    ("/v1/chat/completions", 1, 3),
    ("/v1/completions", 2, 2),
])
def test_the_score_is_the_probability_weighted_label_value(judge_server, endpoint: str, batch_size: int,
                                                           requests: int) -> None:
    stub, base = judge_server
    term = judge(base, endpoint, batch_size=batch_size)
    values = ask(term, ["a good answer", "nonsense", "good again"])
    np.testing.assert_allclose(values, [GOOD, BAD, GOOD])
    info = term.last_call_info()
    assert info["requests"] == requests and info.get("text_answers", 0.0) == 0.0
    assert sorted(stub.batch_sizes) == sorted([1] * 3 if batch_size == 1 else [1, 2])


def test_without_logprobs_the_text_is_read(judge_server) -> None:
    stub, base = judge_server
    stub.logprobs = False
    term = judge(base)
    np.testing.assert_allclose(ask(term, ["good", "bad"]), [1.0, 1 / 9])
    assert term.last_call_info()["text_answers"] == 2.0
    stub.logprobs = True
    text_only = judge(base, score_from="text")
    np.testing.assert_allclose(ask(text_only, ["good"]), [1.0])


def test_an_answer_without_a_label_is_a_failure_of_that_item(judge_server) -> None:
    _, base = judge_server
    term = judge(base, labels=["no", "yes"], on_failure="default", default=0.5)
    np.testing.assert_allclose(ask(term, ["good"]), [0.5])  # the stub answers "9": not a label here
    assert term.last_call_info()["defaults_used"] == 1.0 and term.last_call_info()["failures"] == 1.0
    strict = judge(base, labels=["no", "yes"])
    with pytest.raises(RemoteScoreError, match=r"judge: http://127.0.0.1:\d+/v1/chat/completions: 1 of 1 item\(s\) "
                                               r"not scored: the judge's answer has none of the labels no, yes: '9'"):
        ask(strict, ["good"])


def test_label_scale_reads_vllm_shapes() -> None:
    scale = LabelScale(["No", "Yes"])
    value, mass = scale.from_logprobs([("Yes", math.log(0.6)), (" yes", math.log(0.2)), ("No", math.log(0.1)),
                                       ("Maybe", math.log(0.1))])
    assert math.isclose(value, 0.8 / 0.9) and math.isclose(mass, 0.9)
    assert scale.from_logprobs([("Maybe", 0.0)]) is None
    assert scale.from_text("I think YES.") == 1.0 and scale.from_text("yesterday") is None
    assert math.isclose(LabelScale([str(d) for d in range(10)]).from_text("score: 10, or 7"), 7 / 9)
    chat = {"choices": [{"message": {"content": "7"}, "logprobs": {"content": [
        {"token": "7", "logprob": -0.1, "top_logprobs": [{"token": "7", "logprob": -0.1}, {"token": "8", "logprob": -2.0}]}]}}]}
    assert chat_answer(chat) == ("7", [("7", -0.1), ("8", -2.0)])
    assert chat_answer({"choices": [{"message": {"content": "7"}, "logprobs": None}]}) == ("7", None)
    completions = {"choices": [{"index": 1, "text": " b", "logprobs": None},
                               {"index": 0, "text": " a", "logprobs": {"top_logprobs": [{" a": -0.5}]}}]}
    assert completion_answers(completions, 2) == [(" a", [(" a", -0.5)]), (" b", None)]


@pytest.mark.parametrize(("params", "path", "expected"), [
    ({"url": "ftp://127.0.0.1/v1/chat/completions"}, "params.url", "an http:// or https:// URL with a host"),
    ({"url": "http://127.0.0.1:8000/v1/embeddings"}, "params.url", "ending in /v1/chat/completions or /v1/completions"),
    ({"batch_size": 4}, "params.batch_size", "expected 1 for a chat endpoint"),
    ({"rubric": "Rate {answer}"}, "params.rubric", "a template naming {completion}"),
    ({"rubric": "Rate it"}, "params.rubric", "a template naming {completion}"),
    ({"labels": ["yes"]}, "params.labels", "at least two distinct labels"),
    ({"labels": ["yes", "YES"]}, "params.labels", "at least two distinct labels"),
    ({"default": 2.0}, "params.default", "expected a number in [0, 1], got 2.0"),
    ({"score_from": "vibes"}, "params.score_from", "expected one of 'logprobs', 'text'"),
    ({"top_logprobs": 0}, "params.top_logprobs", "expected an integer from 1 to 20"),
])
def test_bad_judge_params_are_located_config_errors(params: dict[str, Any], path: str, expected: str) -> None:
    from rewardkit import ConfigError, RewardComposer

    given = {"url": "http://127.0.0.1:8000/v1/chat/completions", "model": "m", "rubric": RUBRIC, **params}
    config = {"version": 1, "components": {"judge": {"type": "judge", "params": given}}}
    with pytest.raises(ConfigError) as caught:
        RewardComposer.from_dict(config, source="judge.yaml")
    assert f"judge.yaml: components.judge.{path}: " in str(caught.value)
    assert expected in str(caught.value)
