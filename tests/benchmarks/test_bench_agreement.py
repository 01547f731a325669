"""bench_agreement: its generator is seeded and labelled, and rewardkit's configurations a user of
MATH or GSM8K data writes pay no wrong answer in any class (a subset of the recorded run)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_agreement  # noqa: E402


def subset() -> list[bench_agreement.Case]:
    rng = random.Random(48)
    return bench_agreement.own_cases() + bench_agreement.math_cases(rng, 84) + bench_agreement.gsm8k_cases(rng, 30)


def test_the_generator_is_seeded_and_covers_every_class_with_both_verdicts() -> None:
    cases = subset()
    assert cases == subset()
    classes = {(c.family, c.cls) for c in cases}
    assert len([c for c in classes if c[0] == "math"]) >= 14 and len([c for c in classes if c[0] == "gsm8k"]) >= 10
    assert {c.right for c in cases if c.family == "math"} == {c.right for c in cases if c.family == "gsm8k"} == {True,
                                                                                                                 False}
    kinds = {bench_agreement.KINDS[i](random.Random(i)).kind for i in range(len(bench_agreement.KINDS))}
    assert {"interval", "set", "tuple", "matrix", "units", "thousands", "fraction"} <= kinds


def test_no_wrong_answer_is_paid_and_the_right_forms_are() -> None:
    pytest.importorskip("math_verify", reason="needs math-verify: pip install 'rewardkit[math]'")
    cases = subset()
    for config in ("math", "boxed math", "gsm8k numeric", "last_number numeric"):
        scores = bench_agreement.rewardkit_scores(cases, config)
        paid = bench_agreement.wrong_paid(cases, scores)
        users = [c for c in paid if config in bench_agreement.FAMILY_CONFIGS[c.family]]
        assert users == [], f"{config} paid wrong answers: {users[:3]}"
    math = [c for c in cases if c.family == "math" and c.cls not in bench_agreement.CHOICES]
    scores = bench_agreement.rewardkit_scores(math, "math")
    wrong = [c for c, s in zip(math, scores, strict=True) if not bench_agreement._right(c, s)]
    assert wrong == [], f"mode: math wrong outside the documented choices: {wrong[:3]}"


def test_the_instruction_terms_are_right_wherever_ifeval_is_and_pass_no_reply_that_does_not_follow() -> None:
    import agreement_ifeval

    cases = agreement_ifeval.ifeval_cases(random.Random(48), 200)
    assert cases == agreement_ifeval.ifeval_cases(random.Random(48), 200) and len(cases) >= 200
    assert {c.follows for c in cases} == {True, False}
    assert set(agreement_ifeval.CHOICES) <= {c.cls for c in cases}
    lines, totals = agreement_ifeval.run(random.Random(48), 200, show=0)
    assert totals["rk_wrong_passed"] == 0 and totals["ifeval_only"] == 0
    assert totals["rk_right"] == totals["cases"] > totals["ifeval_right"]
    assert any(line.startswith("| all") for line in lines)
