"""The reasoning-recipe terms beside hand-written Python of the same rule, batch of 1,024 completions.

For each term (answer_match's extract modes, length in tokens, length_target, overlong_penalty, the
repetition penalty over token ids, a term with applies_to) two rewardkit paths are timed against
one hand-written reward function with TRL's signature (``f(completions, completion_ids, **columns)
-> list``), TRL's own function where ``trl.rewards`` has it:

- ``composer``: ``composer(ctx)`` on a context of lists and arrays already built (what a trainer
  loop that builds its own context pays);
- ``TRL function``: the function ``TRLRewardFunctions`` gives GRPOTrainer, called with TRL's
  arguments (it builds the context: the completion text, ``completion_tokens`` from
  ``completion_ids``, the columns; a new batch each call, so nothing is served from its cache).

Every hand-written function is checked to give rewardkit's numbers before it is timed. Each ratio
comes from runs in alternation (rewardkit, hand-written, rewardkit, ...; best of ``--repeats``
each), so a change of machine load falls on both sides alike. The goal is 1.3x.
Run: ``.venv/bin/python benchmarks/bench_recipe_terms.py [--quick] [--math]``.
"""

from __future__ import annotations

import argparse
import math
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit import RewardComposer  # noqa: E402
from rewardkit.integrations.trl import TRLRewardFunctions  # noqa: E402

N = 1024
WORDS = ["the", "answer", "is", "so", "we", "add", "then", "carry", "one", "step", "think", "and", "result", "-", "5"]


def batch(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Completions of 20-120 words ending in a boxed answer, GSM8K lines or neither; token ids of
    50-600 tokens; integer answers; a task column (two thirds math)."""
    completions, ids, answers, tasks = [], [], [], []
    for _ in range(n):
        body = " ".join(rng.choice(WORDS, size=int(rng.integers(20, 120))))
        answer = int(rng.integers(0, 1000))
        shown = answer if rng.random() < 0.6 else answer + 1
        kind = rng.random()
        tail = f"\\boxed{{{shown}}}" if kind < 0.5 else f"#### {shown}" if kind < 0.8 else f"{shown}."
        completions.append(f"<think>{body}</think> {tail}")
        ids.append(rng.integers(0, 50, size=int(rng.integers(50, 600))).tolist())
        answers.append(answer)
        tasks.append("math" if rng.random() < 0.67 else "code")
    return {"completions": completions, "completion_ids": ids, "answer": answers, "task": tasks}


# ---- hand-written rules (what a user writes without rewardkit) ---------------------------------
_NUMBER = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def _last_number(text: str) -> float | None:
    found = _NUMBER.findall(text.replace("\u2212", "-"))
    return float(found[-1].replace(",", "")) if found else None


def _last_boxed(text: str) -> str | None:
    end = len(text)
    while (start := text.rfind("\\boxed{", 0, end)) >= 0:
        depth = 0
        for i in range(start + 6, len(text)):
            depth += (text[i] == "{") - (text[i] == "}")
            if depth == 0:
                return text[start + 7:i]
        end = start
    return None


def hand_boxed_numeric(completions: list[str], answer: list[int], **_: Any) -> list[float]:
    out = []
    for c, a in zip(completions, answer, strict=True):
        box = _last_boxed(c)
        got = None if box is None else _last_number(box)
        out.append(1.0 if got is not None and abs(got - a) <= 1e-6 else 0.0)
    return out


_GSM8K = re.compile(r"####\s*([-+]?[\d,]*\.?\d+)")


def hand_gsm8k(completions: list[str], answer: list[int], **_: Any) -> list[float]:
    out = []
    for c, a in zip(completions, answer, strict=True):
        m = _GSM8K.search(c)
        out.append(1.0 if m is not None and abs(float(m.group(1).replace(",", "")) - a) <= 1e-6 else 0.0)
    return out


_DOCS_BOX = re.compile(r"\\boxed\{(.*?)\}")


def hand_docs_boxed(completions: list[str], answer: list[int], **_: Any) -> list[float]:
    out = []
    for c, a in zip(completions, answer, strict=True):
        m = _DOCS_BOX.search(c)
        out.append(1.0 if (m.group(1) if m else "") == str(a) else 0.0)
    return out


def hand_length_tokens(completion_ids: list[list[int]], **_: Any) -> list[float]:
    return [-0.01 * max(0, len(ids) - 300) for ids in completion_ids]


def hand_length_target(completions: list[str], **_: Any) -> list[float]:
    return [-abs(20 - len(c)) for c in completions]


def hand_applies(completions: list[str], answer: list[int], task: list[str], **_: Any) -> list[float | None]:
    scores = hand_boxed_numeric(completions, answer)
    return [s if t == "math" else None for s, t in zip(scores, task, strict=True)]


def trl_function(name: str, *args: Any) -> Callable[..., list]:
    import trl.rewards as rewards

    return getattr(rewards, name)(*args)


CASES: list[tuple[str, str, Callable[[], Callable[..., list]]]] = [
    ("answer_match extract: boxed, numeric, int column",
     "correct: {type: answer_match, params: {extract: boxed, mode: numeric}, inputs: {reference: answer}}",
     lambda: hand_boxed_numeric),
    ("answer_match extract: gsm8k, numeric",
     "correct: {type: answer_match, params: {extract: gsm8k, mode: numeric}, inputs: {reference: answer}}",
     lambda: hand_gsm8k),
    ("answer_match regex '\\\\boxed\\{(.*?)\\}', strict (TRL docs)",
     "correct: {type: answer_match, params: {extract: '\\\\boxed\\{(.*?)\\}', mode: strict}, "
     "inputs: {reference: answer}}",
     lambda: hand_docs_boxed),
    ("length_penalty unit: tokens",
     "long: {type: length_penalty, params: {unit: tokens, max: 300, per_unit: 0.01}}",
     lambda: hand_length_tokens),
    ("length_target chars (TRL quick start)",
     "len: {type: length_target, params: {target: 20, unit: chars}}",
     lambda: hand_length_target),
    ("overlong_penalty (TRL get_soft_overlong_punishment)",
     "overlong: {type: overlong_penalty, params: {max_length: 512, cache_length: 128}}",
     lambda: trl_function("get_soft_overlong_punishment", 512, 128)),
    ("repetition_rate on completion_ids (TRL repetition penalty)",
     "repetition: {type: repetition_rate, params: {n: 3}, inputs: {completion: completion_ids}, "
     "transforms: [{scale: -1}]}",
     lambda: trl_function("get_repetition_penalty_reward", 3, -1.0)),
    ("answer_match with applies_to: {task: math}",
     "correct: {type: answer_match, params: {extract: boxed, mode: numeric}, inputs: {reference: answer}, "
     "applies_to: {task: math}}",
     lambda: hand_applies),
]
MATH_CASE = ("answer_match mode: math (TRL accuracy_reward)",
             "accuracy: {type: answer_match, params: {mode: math}, inputs: {reference: answer}}",
             lambda: _trl_accuracy)


def _trl_accuracy(completions: list[str], answer: list[Any], **_: Any) -> list[float | None]:
    from trl.rewards import accuracy_reward

    return accuracy_reward([[{"content": c}] for c in completions], [str(a) for a in answer])


# ---- measuring ---------------------------------------------------------------------------------
def context(b: dict[str, Any], composer: RewardComposer) -> dict[str, Any]:
    """The composer's context for a batch, built once (outside the clock)."""
    full = {"completion": b["completions"], "completion_tokens": np.array([len(i) for i in b["completion_ids"]],
                                                                         dtype=np.float64),
            "completion_ids": [" ".join(map(str, i)) for i in b["completion_ids"]], "answer": b["answer"],
            "task": b["task"]}
    return {k: v for k, v in full.items() if k in composer.context_keys()}


def best_seconds(run: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def measure(name: str, yaml_component: str, hand_factory: Callable[[], Callable[..., list]], b: dict[str, Any],
            repeats: int) -> tuple[float, float, float]:
    from rewardkit.config import parse_yaml

    composer = RewardComposer.from_dict(parse_yaml(f"version: 1\ncomponents:\n  {yaml_component}\n"))
    hand = hand_factory()
    rewards = TRLRewardFunctions(composer)
    (fn,) = rewards.funcs
    ctx = context(b, composer)
    prompts = ["q"] * len(b["completions"])
    columns = {"answer": b["answer"], "task": b["task"]}
    expected = hand(completions=b["completions"], completion_ids=b["completion_ids"], **columns)
    got_trl = fn(prompts=prompts, completions=list(b["completions"]), completion_ids=b["completion_ids"],
                 trainer_state=None, **columns)
    term = next(iter(composer.term_names))
    got = composer(ctx).terms[term].normalized.tolist()
    close = all((e is None and g is None) or (e is not None and g is not None and math.isclose(e, g, abs_tol=1e-12))
                for e, g in zip(expected, got_trl, strict=True))
    if not close:
        raise AssertionError(f"{name}: the TRL function disagrees with the hand-written rule")
    applies = composer(ctx).terms[term].applies
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if (e is None) != (applies is not None and not applies[i]) or (e is not None and not math.isclose(e, g, abs_tol=1e-12)):
            raise AssertionError(f"{name}: the composer disagrees with the hand-written rule at {i}: {g} vs {e}")
    # fresh list objects per TRL call (its cache serves only the same batch again), made outside the clock
    calls = [(list(b["completions"]), list(b["completion_ids"])) for _ in range(repeats)]
    composer_s = trl_s = hand_s = math.inf
    for r in range(repeats):
        composer_s = min(composer_s, best_seconds(lambda: composer(ctx)))
        hand_s = min(hand_s, best_seconds(lambda: hand(completions=b["completions"], completion_ids=b["completion_ids"],
                                                     **columns)))
        comps, ids = calls[r]
        trl_s = min(trl_s, best_seconds(lambda: fn(prompts=prompts, completions=comps, completion_ids=ids,  # noqa: B023
                                                   trainer_state=None, **columns)))
    return composer_s, trl_s, hand_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--math", action="store_true", help="also time mode: math against TRL's accuracy_reward "
                                                            "(math-verify; seconds per batch)")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)
    b = batch(np.random.default_rng(0), N)
    cases = CASES + ([MATH_CASE] if args.math else [])
    print(f"batch of {N} completions, best of {repeats} in alternation; Python {platform.python_version()}, "
          f"{platform.machine()}", flush=True)
    header = f"{'term':<58} {'composer ms':>11} {'TRL fn ms':>10} {'hand ms':>8} {'composer/hand':>13} {'TRL fn/hand':>11}"
    print(header)
    print("-" * len(header))
    for name, yaml_component, hand in cases:
        composer_s, trl_s, hand_s = measure(name, yaml_component, hand, b, repeats)
        print(f"{name:<58} {composer_s * 1e3:>11.2f} {trl_s * 1e3:>10.2f} {hand_s * 1e3:>8.2f} "
              f"{composer_s / hand_s:>12.2f}x {trl_s / hand_s:>10.2f}x", flush=True)


if __name__ == "__main__":
    main()
