"""The TRL function's fast paths give the numbers of the plain path: text checked once (a
``TextColumn``), token ids and numeric columns checked in one C pass, episode flags kept per batch
size, ``reset`` skipped when nothing is per-environment, one term's values read without the whole
breakdown. The plain path here is the composer called on a context of plain lists, built item by
item, with fresh flag arrays, after ``reset()``."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError, NonFiniteInputError
from rewardkit.inputs import TextColumn, TokenIdColumn
from rewardkit.integrations.trl import TRLRewardFunctions, completion_text, prompt_text

CONFIGS = {
    "length_target chars": {"len": {"type": "length_target", "params": {"target": 20, "unit": "chars"}}},
    "overlong tokens": {"overlong": {"type": "overlong_penalty", "params": {"max_length": 12, "cache_length": 4}}},
    "gsm8k numeric": {"correct": {"type": "answer_match", "params": {"extract": "gsm8k", "mode": "numeric"},
                                  "inputs": {"reference": "answer"}}},
    "regex strict": {"correct": {"type": "answer_match", "params": {"extract": "\\\\boxed\\{(.*?)\\}", "mode": "strict"},
                                 "inputs": {"reference": "answer"}}},
    "repetition ids": {"rep": {"type": "repetition_rate", "params": {"n": 2}, "inputs": {"completion": "completion_ids"},
                               "transforms": [{"scale": -1}]}},
    "applies_to, two terms": {
        "correct": {"type": "answer_match", "params": {"extract": "boxed", "mode": "numeric"},
                    "inputs": {"reference": "answer"}, "applies_to": {"task": "math"}},
        "long": {"type": "length_penalty", "params": {"unit": "tokens", "max": 5, "per_unit": 0.5}, "weight": 0.5}},
    "normalized (reset runs)": {"len": {"type": "length_target", "params": {"target": 10, "unit": "words"},
                                        "normalize": {"type": "running_zscore"}}},
    "prompt and a number column": {"len": {"type": "length_target", "params": {"target": 3, "unit": "chars"},
                                           "inputs": {"completion": "prompt"}},
                                   "score": {"type": "linear", "params": {"scale": 2.0}, "inputs": {"value": "score"}}},
}

COMPLETIONS = ["<think>so</think> \\boxed{12}", "#### 1,234", "#### −5", "no answer here", "\\boxed{7} #### 7",
               "the the the the cat", ""]
IDS = [[1, 2, 1, 2, 1], [3], [], [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], [5, 6, 7], [8, 8], [9, 1, 9, 1]]
COLUMNS = {"answer": [12, 1234, -5, 0, 7, 3, 10**400], "task": ["math", "math", "code", "math", "code", "math", "math"],
           "score": [1.5, -2.0, 0.0, 3.0, 4.25, 1.0, 2.0]}
CHAT = [[{"role": "assistant", "content": text}] for text in COMPLETIONS]
CHAT[3] = [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "assistant", "content": "x"}]
CHAT[5] = [{"role": "assistant", "content": [{"type": "text", "text": "the the "}, {"type": "image"},
                                             {"type": "text", "text": "the cat"}]}]


def build(components: dict) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": components})


def plain_path(composer: RewardComposer, prompts: list[Any], completions: list[Any], ids: list[Any],
               columns: dict[str, list]) -> dict[str, list[float | None]]:
    """What each per-term function returns, computed the plain way (lists built item by item)."""
    ctx: dict[str, Any] = {}
    keys = composer.context_keys()
    texts = {slot.key for slot in composer.reader.slots if slot.text}
    if "prompt" in keys:
        ctx["prompt"] = [prompt_text(p) for p in prompts]
    if "completion" in keys:
        ctx["completion"] = [completion_text(c) for c in completions]
    if "completion_tokens" in keys:
        ctx["completion_tokens"] = np.array([float(len(seq)) for seq in ids])
    if "completion_ids" in keys:
        ctx["completion_ids"] = [" ".join(str(i) for i in seq) for seq in ids]
    for key, values in columns.items():
        if key in keys:
            ctx[key] = list(values) if key in texts else np.array(values, dtype=np.float64)
    composer.reset()
    n = len(completions)
    out = composer(ctx, terminated=np.ones(n, dtype=bool), truncated=np.zeros(n, dtype=bool))
    result = {}
    for name in composer.term_names:
        term = out.terms[name]
        values = np.asarray(term.normalized, dtype=np.float64).tolist()
        if term.applies is not None:
            values = [v if a else None for v, a in zip(values, np.asarray(term.applies).tolist(), strict=True)]
        result[name] = values
    return result


def same(a: list[float | None], b: list[float | None]) -> bool:
    return len(a) == len(b) and all((x is None and y is None) or (x is not None and y is not None and
                                                                  (x == y or (math.isnan(x) and math.isnan(y))))
                                    for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("chat", [False, True], ids=["plain", "conversational"])
def test_every_function_gives_the_plain_paths_numbers(name: str, chat: bool) -> None:
    composer = build(CONFIGS[name])
    reference = copy.deepcopy(composer)
    rewards = TRLRewardFunctions(composer)
    completions = CHAT if chat else COMPLETIONS
    prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(len(completions))] if chat else \
        [f"q{i}" for i in range(len(completions))]
    for _ in range(3):  # the same batch size again: the kept flag arrays serve, the numbers stay
        batch = list(completions)  # a new list each call: nothing is served from the batch cache
        got = {fn.__name__: fn(prompts=prompts, completions=batch, completion_ids=IDS, trainer_state=None, **COLUMNS)
               for fn in rewards.funcs}
        want = plain_path(reference, prompts, completions, IDS, COLUMNS)
        for term in rewards.term_names:
            assert same(got[term], want[term]), (term, got[term], want[term])
    # a smaller batch, then the full one again: new flag arrays of the new size each time
    for size in (3, len(completions)):
        asked, batch, columns = prompts[:size], list(completions[:size]), {k: v[:size] for k, v in COLUMNS.items()}
        got = [fn(prompts=asked, completions=batch, completion_ids=IDS[:size], trainer_state=None, **columns)
               for fn in rewards.funcs]
        want = plain_path(reference, prompts[:size], completions[:size], IDS[:size],
                          {k: v[:size] for k, v in COLUMNS.items()})
        assert all(same(g, want[t]) for g, t in zip(got, rewards.term_names, strict=True))
    assert composer.step == reference.step
    assert composer.state_dict() == reference.state_dict()


def test_an_empty_batch_gives_empty_lists() -> None:
    rewards = TRLRewardFunctions(build(CONFIGS["applies_to, two terms"]))
    assert [fn(prompts=[], completions=[], completion_ids=[], answer=[], task=[]) for fn in rewards.funcs] == [[], []]


def test_token_ids_other_than_lists_are_counted_like_lists() -> None:
    composer = build({**CONFIGS["overlong tokens"], **CONFIGS["repetition ids"]})
    rewards = TRLRewardFunctions(composer)
    prompts = ["q"] * len(IDS)
    as_lists = [fn(prompts=prompts, completions=list(COMPLETIONS), completion_ids=IDS) for fn in rewards.funcs]
    for ids in ([tuple(seq) for seq in IDS], [np.array(seq, dtype=np.int64) for seq in IDS]):
        assert [fn(prompts=prompts, completions=list(COMPLETIONS), completion_ids=ids) for fn in rewards.funcs] \
            == as_lists


def test_a_batch_mixing_text_and_chat_completions_reads_each() -> None:
    rewards = TRLRewardFunctions(build(CONFIGS["length_target chars"]))
    (fn,) = rewards.funcs
    mixed = [COMPLETIONS[0], CHAT[1], COMPLETIONS[2]]
    assert fn(prompts=["a", "b", "c"], completions=mixed) == fn(prompts=["a", "b", "c"], completions=COMPLETIONS[:3])


@pytest.mark.parametrize("bad", [5, None, b"bytes", [{"role": "assistant", "content": 3}]])
def test_a_completion_that_is_not_text_or_chat_is_still_refused(bad: Any) -> None:
    (fn,) = TRLRewardFunctions(build(CONFIGS["length_target chars"])).funcs
    with pytest.raises(InvalidInputError):
        fn(prompts=["a", "b"], completions=["fine", bad])


def test_bad_token_ids_and_columns_are_still_refused() -> None:
    composer = build({**CONFIGS["overlong tokens"], **CONFIGS["prompt and a number column"]})
    (overlong, length, score) = TRLRewardFunctions(composer).funcs
    with pytest.raises(InvalidInputError, match=r"completion_ids\[1\]"):
        overlong(prompts=["a", "b"], completions=["x", "y"], completion_ids=[[1], "12"], score=[1.0, 2.0])
    with pytest.raises(ValueError, match="completion_ids"):
        overlong(prompts=["a", "b"], completions=["x", "y"], completion_ids=[[1]], score=[1.0, 2.0])
    with pytest.raises(NonFiniteInputError, match="score"):
        score(prompts=["a", "b"], completions=["x", "y"], completion_ids=[[1], [2]], score=[1.0, float("nan")])
    with pytest.raises(InvalidInputError, match="score"):
        score(prompts=["a", "b"], completions=["x", "y"], completion_ids=[[1], [2]], score=[1.0, "2"])
    with pytest.raises(ValueError, match="dataset column 'score'"):
        score(prompts=["a", "b"], completions=["x", "y"], completion_ids=[[1], [2]], score=[1.0])


def test_the_logged_breakdown_is_the_outputs() -> None:
    composer = build(CONFIGS["applies_to, two terms"])
    reference = copy.deepcopy(composer)
    rewards = TRLRewardFunctions(composer)
    metrics: dict[str, float] = {}
    extra: dict[str, list[float]] = {}
    prompts = ["q"] * len(COMPLETIONS)
    for fn in rewards.funcs:
        fn(prompts=prompts, completions=list(COMPLETIONS), completion_ids=IDS, trainer_state=None,
           log_metric=metrics.__setitem__, log_extra=extra.__setitem__, **COLUMNS)
    ctx = {"completion": list(COMPLETIONS), "completion_tokens": np.array([float(len(s)) for s in IDS]),
           "answer": list(COLUMNS["answer"]), "task": list(COLUMNS["task"])}
    n = len(COMPLETIONS)
    out = reference(ctx, terminated=np.ones(n, dtype=bool), truncated=np.zeros(n, dtype=bool))
    for name in rewards.term_names:
        term = out.terms[name]
        assert metrics[f"rewardkit/{name}/raw"] == float(np.mean(term.raw))
        assert metrics[f"rewardkit/{name}/weight"] == float(np.mean(term.weight))
        assert metrics[f"rewardkit/{name}/contribution"] == float(np.mean(term.contribution))
        assert extra[f"rewardkit/{name}"] == np.asarray(term.contribution, dtype=np.float64).tolist()


def test_the_context_text_is_a_checked_text_column_read_as_it_is() -> None:
    composer = build(CONFIGS["prompt and a number column"])
    rewards = TRLRewardFunctions(composer)
    asked = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}], "plain"]
    ctx = rewards._text_context(asked, CHAT[:2], {"score": [1.0, 2.0]})
    assert ctx["prompt"].__class__ is TextColumn and ctx["prompt"] == ["q", "plain"]
    assert composer.reader.text_list(ctx["prompt"], "prompt") is ctx["prompt"]
    assert ctx["score"].dtype == np.float64 and ctx["score"].tolist() == [1.0, 2.0]
    ids = TRLRewardFunctions(build(CONFIGS["repetition ids"]))._text_context(["a"], ["b"], {}, [[1, 2]])
    assert ids["completion_ids"].__class__ is TokenIdColumn


def test_reset_runs_only_where_it_clears_something(monkeypatch: pytest.MonkeyPatch) -> None:
    resets = []
    for name in ("length_target chars", "normalized (reset runs)"):
        composer = build(CONFIGS[name])
        monkeypatch.setattr(composer, "reset", lambda *a, _name=name, _real=composer.reset: (resets.append(_name), _real(*a)))
        (fn,) = TRLRewardFunctions(composer).funcs
        fn(prompts=["p", "q"], completions=["one two", "three"])
    assert resets == ["normalized (reset runs)"]


def test_the_kept_flag_arrays_are_read_only() -> None:
    rewards = TRLRewardFunctions(build(CONFIGS["length_target chars"]))
    flags = rewards.scorer._episode_flags  # the shared core keeps them (TextScorer)
    terminated, truncated = flags(3)
    assert terminated.tolist() == [True] * 3 and truncated.tolist() == [False] * 3
    assert not terminated.flags.writeable and not truncated.flags.writeable
    assert flags(3)[0] is terminated and len(flags(4)[0]) == 4
