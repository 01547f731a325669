"""answer_match held against the scorers reasoning-RL users already trust, case by case.

Peers (each as far as it imports here): veRL's ``verl.utils.reward_score`` (``gsm8k`` strict and
flexible, ``math_reward``, ``math_dapo``, ``math_verify``, ``prime_math``), TRL's
``trl.rewards.accuracy_reward`` and math-verify called as its README shows (``parse`` both, then
``verify``). Each peer is paired with the ``answer_match`` configuration a user moving from it
would write (``PAIRS``). The cases: a few written after each peer's documented behaviour (class
``own: ...``), and completions generated from a seeded RNG in labelled classes (right answers in
the reference's form and in other forms, wrong answers in the right form, bare-LaTeX and
``$``-wrapped references, intervals, sets, tuples, matrices, ``\\dfrac``, units, thousands
separators, several answer markers, long preambles and long tails). Every case says whether its
completion's final answer is right (the class's intent); a scorer is right on a case when it pays
exactly the right ones.

Printed per peer and class: cases, agreements with rewardkit's paired configuration, how many each
got right, the cases the peer got right and rewardkit did not, and wrong answers each paid.
The instruction terms are held against lm-eval's IFEval checkers the same way, on generated
replies in labelled classes (``agreement_ifeval.py``).

Run: ``.venv/bin/python benchmarks/bench_agreement.py [--math N] [--gsm8k N] [--ifeval N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import os
import random
import sys
import time
import warnings
from contextlib import redirect_stdout
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import agreement_ifeval  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Case:
    """One completion and its reference; ``right``: the completion's final answer is the reference's."""

    family: str  # "math" or "gsm8k"
    cls: str
    completion: str
    reference: str
    right: bool


# ---- MATH-style answers: a canonical form, equal forms, unequal forms -------------------------------
@dataclasses.dataclass(frozen=True)
class Answer:
    kind: str
    reference: str  # as MATH's ``answer`` column writes it (bare LaTeX)
    same: tuple[str, ...]  # other ways to write the same answer
    wrong: tuple[str, ...]  # different answers written the same way


def _integer(rng: random.Random) -> Answer:
    n = rng.randint(2, 999) * rng.choice([1, 1, 1, -1])
    return Answer("integer", str(n), (f"{n}.0", f"{n:d}", f"\\left({n}\\right)" if n > 0 else f"{n}"),
                  (str(n + rng.randint(1, 9)), str(-n), str(n * 10)))


def _fraction(rng: random.Random) -> Answer:
    while True:
        a, b = rng.randint(1, 30), rng.randint(2, 30)
        f = Fraction(a, b)
        if f.denominator > 1 and f.numerator != f.denominator:
            break
    p, q = f.numerator, f.denominator
    k = rng.randint(2, 5)
    same = [f"\\dfrac{{{p}}}{{{q}}}", f"\\tfrac{{{p}}}{{{q}}}", f"{p}/{q}", f"\\frac{{{k * p}}}{{{k * q}}}"]
    d = q
    for prime in (2, 5):
        while d % prime == 0:
            d //= prime
    if d == 1:  # a terminating decimal: written exactly
        same.append(str(p / q))
    wrong = (f"\\frac{{{q}}}{{{p}}}" if p != 1 else f"\\frac{{2}}{{{q}}}", f"\\frac{{{p + 1}}}{{{q}}}" if
             Fraction(p + 1, q) != f else f"\\frac{{{p + 2}}}{{{q}}}", f"-\\frac{{{p}}}{{{q}}}")
    return Answer("fraction", f"\\frac{{{p}}}{{{q}}}", tuple(same), wrong)


def _sqrt(rng: random.Random) -> Answer:
    k, m = rng.randint(2, 20), rng.choice([2, 3, 5, 6, 7, 10, 11, 13])
    bare = f"{k}\\sqrt{m}" if m < 10 else f"{k}\\sqrt{{{m}}}"  # \sqrt10 is \sqrt{1}0 in TeX
    return Answer("sqrt", f"{k}\\sqrt{{{m}}}", (f"\\sqrt{{{k * k * m}}}", f"{k} \\sqrt{{{m}}}", bare),
                  (str(k), f"{k + 1}\\sqrt{{{m}}}", f"\\sqrt{{{k * m}}}"))


def _power(rng: random.Random) -> Answer:
    b, p = rng.choice([2, 3, 5, 7]), rng.randint(3, 12)
    return Answer("power", f"{b}^{{{p}}}", (str(b ** p), f"{b}^{p}" if p < 10 else f"{b}^{{{p}}}"),
                  (str(b), f"{b}^{{{p + 1}}}", str(b * p)))


def _complex(rng: random.Random) -> Answer:
    a, b = rng.randint(1, 60), rng.randint(1, 60)
    return Answer("complex", f"{a}+{b}i", (f"{b}i+{a}", f"{a} + {b} i"), (str(a), f"{a}-{b}i", f"{b}+{a}i" if a != b
                                                                                          else f"{a}+{b + 1}i"))


def _pi(rng: random.Random) -> Answer:
    k = rng.randint(2, 24)
    return Answer("pi", f"\\frac{{\\pi}}{{{k}}}", (f"\\dfrac{{\\pi}}{{{k}}}", f"\\frac{{1}}{{{k}}}\\pi", f"\\pi/{k}"),
                  (f"\\frac{{\\pi}}{{{k + 1}}}", f"\\frac{{1}}{{{k}}}", f"{k}\\pi"))


def _interval(rng: random.Random) -> Answer:
    a = rng.randint(-20, 20)
    b = a + rng.randint(1, 20)
    left, right = rng.choice(["[", "("]), rng.choice(["]", ")"])
    flip_left = "(" if left == "[" else "["
    flip_right = ")" if right == "]" else "]"
    ref = f"{left}{a},{b}{right}"
    return Answer("interval", ref, (f"{left}{a}, {b}{right}", f"\\left{left}{a},{b}\\right{right}"),
                  (f"{flip_left}{a},{b}{right}", f"{left}{a},{b}{flip_right}", f"{left}{a},{b + 1}{right}"))


def _union(rng: random.Random) -> Answer:
    a = rng.randint(-10, 5)
    b = a + rng.randint(1, 8)
    ref = f"(-\\infty,{a})\\cup({b},\\infty)"
    return Answer("union", ref, (f"(-\\infty, {a}) \\cup ({b}, \\infty)", f"({b},\\infty)\\cup(-\\infty,{a})"),
                  (f"(-\\infty,{a}]\\cup({b},\\infty)", f"({a},{b})", f"(-\\infty,{a})\\cup({b + 1},\\infty)"))


def _tuple(rng: random.Random) -> Answer:
    a, b = rng.randint(-30, 30), rng.randint(-30, 30)
    while b == a or b == -a or b == 0:
        b = rng.randint(-30, 30)
    return Answer("tuple", f"({a},{b})", (f"({a}, {b})", f"\\left({a},{b}\\right)"),
                  (f"({b},{a})", f"({a},{-b})", f"({a},{b},0)"))


def _set(rng: random.Random) -> Answer:
    items = rng.sample(range(-9, 20), 3)
    shuffled = items[1:] + items[:1]
    changed = items[:2] + [max(items) + 1]
    write = lambda xs: "\\{" + ",".join(map(str, xs)) + "\\}"  # noqa: E731
    return Answer("set", write(items), (write(shuffled), "\\{" + ", ".join(map(str, items)) + "\\}"),
                  (write(items[:2]), write(changed)))


def _matrix(rng: random.Random) -> Answer:
    a, b = rng.randint(-9, 9), rng.randint(-9, 9)
    ref = f"\\begin{{pmatrix}} {a} \\\\ {b} \\end{{pmatrix}}"
    return Answer("matrix", ref, (f"\\begin{{bmatrix}} {a} \\\\ {b} \\end{{bmatrix}}",
                                  f"\\begin{{pmatrix}}{a}\\\\{b}\\end{{pmatrix}}"),
                  (f"\\begin{{pmatrix}} {b + 20} \\\\ {a} \\end{{pmatrix}}",
                   f"\\begin{{pmatrix}} {a} \\\\ {b + 1} \\end{{pmatrix}}"))


def _choice(rng: random.Random) -> Answer:
    letter = rng.choice("ABCDE")
    other = rng.choice([c for c in "ABCDE" if c != letter])
    return Answer("choice", f"\\text{{({letter})}}", (letter, f"({letter})", f"\\text{{{letter}}}"),
                  (other, f"\\text{{({other})}}"))


def _units(rng: random.Random) -> Answer:
    n, unit = rng.randint(2, 500), rng.choice(["cm", "inches", "meters", "degrees", "square units"])
    return Answer("units", f"{n}\\text{{ {unit}}}", (str(n), f"{n} \\text{{{unit}}}"),
                  (str(n + 1), f"{n + 3}\\text{{ {unit}}}"))


def _thousands(rng: random.Random) -> Answer:
    n = rng.randint(1001, 999_999)
    grouped = f"{n:,}"
    wrong = n + rng.choice([1, 9, 90, 900])
    return Answer("thousands", str(n), (grouped, grouped.replace(",", "{,}"), grouped.replace(",", "\\,")),
                  (f"{wrong:,}", str(n // 10)))


def _money(rng: random.Random) -> Answer:
    cents = rng.randint(101, 99_999)
    if cents % 100 == 0:
        cents += 1
    text = f"{cents // 100}.{cents % 100:02d}"
    return Answer("money", f"\\${text}", (text, f"\\$ {text}", f"\\${text}"),
                  (f"{(cents + 7) // 100}.{(cents + 7) % 100:02d}", f"\\${cents // 100}"))


def _degrees(rng: random.Random) -> Answer:
    n = rng.randint(10, 170)
    return Answer("degrees", f"{n}^\\circ", (str(n), f"{n}^{{\\circ}}"), (str(n + 5), f"{180 - n if n != 90 else 45}^\\circ"))


def _polynomial(rng: random.Random) -> Answer:
    a = rng.randint(1, 9)
    return Answer("polynomial", f"x^2+{2 * a}x+{a * a}", (f"(x+{a})^2", f"x^2 + {2 * a}x + {a * a}"),
                  (f"x^2+{a * a}", f"(x-{a})^2", f"x^2+{2 * a}x+{a * a + 1}"))


KINDS: list[Callable[[random.Random], Answer]] = [_integer, _fraction, _sqrt, _power, _complex, _pi, _interval, _union,
                                                  _tuple, _set, _matrix, _choice, _units, _thousands, _money,
                                                  _degrees, _polynomial]

_STEPS = ["First we simplify the expression.", "Substituting the values gives a new equation.",
          "We factor and cancel the common terms.", "Checking the boundary cases shows nothing changes.",
          "By symmetry the two cases agree.", "Adding both sides, we get {n} + {m} = {s}.",
          "So the ratio is {n}/{m}.", "The discriminant is {s}, which is positive."]


def _steps(rng: random.Random, count: int) -> str:
    out = []
    for _ in range(count):
        n, m = rng.randint(1, 99), rng.randint(1, 99)
        out.append(rng.choice(_STEPS).format(n=n, m=m, s=n + m))
    return " ".join(out)


UNANCHORED = "plain 'The answer is x.' (no LaTeX delimiters)"
#: classes where rewardkit's MATH configuration is wrong by choice, and why (docs/results/agreement.md);
#: none at present: a class added here is excluded from tests/benchmarks' "right" check, never from
#: its "no wrong answer paid" check
CHOICES: dict[str, str] = {}


def math_cases(rng: random.Random, n: int) -> list[Case]:
    """``n`` MATH-style cases, classes in turn, each drawing an answer of every kind in turn."""
    classes: list[Callable[[random.Random, Answer], tuple[str, str, bool]]] = [
        lambda r, a: (f"{_steps(r, 3)} Therefore the answer is $\\boxed{{{a.reference}}}$.", a.reference, True),
        lambda r, a: (f"{_steps(r, 3)} So the answer is $\\boxed{{{r.choice(a.same)}}}$.", a.reference, True),
        lambda r, a: (f"{_steps(r, 3)} So the answer is $\\boxed{{{r.choice(a.wrong)}}}$.", a.reference, False),
        lambda r, a: (f"{_steps(r, 2)} The answer is $\\boxed{{{r.choice(a.same + (a.reference,))}}}$.",
                      f"${a.reference}$", True),
        lambda r, a: (f"{_steps(r, 2)} The answer is $\\boxed{{{r.choice(a.wrong)}}}$.", f"${a.reference}$", False),
        lambda r, a: (f"A first try gives $\\boxed{{{r.choice(a.wrong)}}}$. Wait, that misses a case. {_steps(r, 2)} "
                      f"The answer is $\\boxed{{{a.reference}}}$.", a.reference, True),
        lambda r, a: (f"A first try gives $\\boxed{{{a.reference}}}$. Wait, that double counts. {_steps(r, 2)} "
                      f"The answer is $\\boxed{{{r.choice(a.wrong)}}}$.", a.reference, False),
        lambda r, a: _long_preamble(r, a),
        lambda r, a: _long_tail(r, a),
        lambda r, a: (f"{_steps(r, 2)} Final Answer: The final answer is ${r.choice(a.same + (a.reference,))}$. "
                      "I hope it is correct.", a.reference, True),
        lambda r, a: (f"{_steps(r, 2)} Final Answer: The final answer is ${r.choice(a.wrong)}$. I hope it is correct.",
                      a.reference, False),
        lambda r, a: (f"{_steps(r, 2)} The answer is {a.reference}.", a.reference, True),
        lambda r, a: (f"{_steps(r, 2)} The answer is $\\boxed{{{r.choice(a.wrong)}}}$. Check against the first case: "
                      f"{a.reference}", a.reference, False),
        lambda r, a: (f"{_steps(r, 2)} The answer is {r.choice(a.wrong)}. Check against the first case: {a.reference}",
                      a.reference, False),
    ]
    names = ["right, reference's form", "right, other form", "wrong, right form", "$-wrapped reference, right",
             "$-wrapped reference, wrong", "several markers, last right", "several markers, last wrong",
             "long preamble (3-6 KB)", "long tail after the box", "Minerva 'final answer is $x$', right",
             "Minerva 'final answer is $x$', wrong", UNANCHORED, "boxed wrong, then a check ending in the reference",
             "plain wrong, then a check ending in the reference"]
    cases = []
    for i in range(n):
        c = i % len(classes)
        answer = KINDS[(i // len(classes)) % len(KINDS)](rng)
        completion, reference, right = classes[c](rng, answer)
        cases.append(Case("math", names[c], completion, reference, right))
    return cases


def _long_preamble(rng: random.Random, a: Answer) -> tuple[str, str, bool]:
    right = rng.random() < 0.5
    shown = rng.choice(a.same + (a.reference,)) if right else rng.choice(a.wrong)
    body = _steps(rng, rng.randint(40, 80))
    return f"{body} The answer is $\\boxed{{{shown}}}$.", a.reference, right


def _long_tail(rng: random.Random, a: Answer) -> tuple[str, str, bool]:
    right = rng.random() < 0.5
    shown = rng.choice(a.same + (a.reference,)) if right else rng.choice(a.wrong)
    tail = _steps(rng, rng.randint(6, 14))
    return f"{_steps(rng, 2)} The answer is $\\boxed{{{shown}}}$. To double-check: {tail}", a.reference, right


# ---- GSM8K-style ------------------------------------------------------------------------------------
def _gsm8k_body(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(2, 5)):
        a, b = rng.randint(2, 90), rng.randint(2, 90)
        out.append(rng.choice([f"She sold {a} + {b} = {a + b} clips.", f"Each box holds {a} * {b} = {a * b} pens.",
                               f"He has {a * b} / {b} = {a} apples left."]))
    return " ".join(out)


def gsm8k_cases(rng: random.Random, n: int) -> list[Case]:
    """``n`` GSM8K-style cases (an integer or decimal reference, as veRL's data preparation writes it)."""
    def answer() -> int:
        return rng.randint(2, 900)

    def c_right(r):
        x = answer()
        return f"{_gsm8k_body(r)}\n#### {x}", str(x), True

    def c_wrong(r):
        x = answer()
        return f"{_gsm8k_body(r)}\n#### {x + r.randint(1, 9)}", str(x), False

    def c_sign(r):
        x = answer()
        return f"{_gsm8k_body(r)}\n#### -{x}", str(x), False

    def c_decimal(r):
        x = r.randint(101, 9999)
        return f"{_gsm8k_body(r)}\n#### {x // 10}.{x % 10}", str(x), False

    def c_thousands(r):
        x = r.randint(1001, 99_999)
        return f"{_gsm8k_body(r)}\n#### {x:,}", str(x), True

    def c_several_right(r):
        x = answer()
        return f"{_gsm8k_body(r)}\n#### {x + 3}\nWait, I forgot the last step. {_gsm8k_body(r)}\n#### {x}", str(x), True

    def c_several_wrong(r):
        x = answer()
        return f"{_gsm8k_body(r)}\n#### {x}\nWait, I forgot the last step. {_gsm8k_body(r)}\n#### {x + 3}", str(x), False

    def c_long_tail(r):
        x, right = answer(), r.random() < 0.5
        shown = x if right else x + 1
        return (f"{_gsm8k_body(r)}\n#### {shown}\nTo double-check: {_gsm8k_body(r)} {_gsm8k_body(r)} "
                f"{_gsm8k_body(r)}", str(x), right)

    def c_negative(r):
        x = -answer()
        return f"{_gsm8k_body(r)}\n#### {x}", str(x), True

    def c_no_marker(r):
        x = answer()
        return f"{_gsm8k_body(r)} I am not sure about {x}, maybe {x + 2}.", str(x), False

    classes = [("#### right", c_right), ("#### wrong", c_wrong), ("#### sign dropped (-x vs x)", c_sign),
               ("#### decimal point (x.y vs xy)", c_decimal), ("#### thousands separator", c_thousands),
               ("several ####, last right", c_several_right), ("several ####, last wrong", c_several_wrong),
               ("long tail after ####", c_long_tail), ("#### negative", c_negative), ("no answer line", c_no_marker)]
    cases = []
    for i in range(n):
        name, make = classes[i % len(classes)]
        completion, reference, right = make(rng)
        cases.append(Case("gsm8k", name, completion, reference, right))
    return cases


def own_cases() -> list[Case]:
    """Cases written after each peer's documented behaviour (its docstrings and README examples)."""
    return [
        # TRL accuracy_reward's docstring: a boxed 1/3 is right, a boxed 1/2 is not
        Case("math", "own: TRL accuracy_reward", r"My answer is \boxed{\frac{1}{3}}", r"\frac{1}{3}", True),
        Case("math", "own: TRL accuracy_reward", r"My answer is \boxed{\frac{1}{2}}", r"\frac{1}{3}", False),
        # math-verify's README: a set written two ways, a fraction as a decimal, an interval
        Case("math", "own: math-verify README", r"The answer is $\boxed{\{1,2,3,4\}}$", r"\{1,3\} \cup \{2,4\}", True),
        Case("math", "own: math-verify README", r"So $\boxed{0.5}$", r"\frac{1}{2}", True),
        Case("math", "own: math-verify README", r"It is $\boxed{(1,2]}$", "(1,2]", True),
        Case("math", "own: math-verify README", r"It is $\boxed{(1,2)}$", "(1,2]", False),
        # veRL's gsm8k: the last '#### ' line, as its tests expect
        Case("gsm8k", "own: veRL gsm8k", "First answer:\n#### 7\nFinal answer:\n#### 8", "8", True),
        Case("gsm8k", "own: veRL gsm8k", "Natalia sold 48/2 = 24 clips in May.\n#### 72", "72", True),
        Case("gsm8k", "own: veRL gsm8k", "#### 71", "72", False),
        # veRL's math_reward (MATH's string normalization): \dfrac and \frac, a units suffix
        Case("math", "own: veRL math_reward", r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}", True),
        Case("math", "own: veRL math_reward", r"\boxed{5\text{ cm}}", "5", True),
        # veRL's math_dapo (Minerva's 'Answer:' format and its \boxed fallback)
        Case("math", "own: veRL math_dapo", r"The sum is \boxed{12}.", "12", True),
        Case("math", "own: veRL math_dapo", r"The sum is \boxed{13}.", "12", False),
    ]


# ---- the scorers ---------------------------------------------------------------------------------
def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A peer call with its prints and warnings kept off the table; an exception reads as 0."""
    def call(*args: Any) -> Any:
        sink = io.StringIO()
        try:
            with redirect_stdout(sink), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn(*args)
        except Exception:  # noqa: BLE001 - a peer that raises pays nothing
            return 0.0
    return call


#: a peer that scores both families: MATH-style against ``{mode: math}``, GSM8K-style against
#: ``{extract: gsm8k, mode: numeric}`` (what a user of each writes)
BOTH = {"math": "math", "gsm8k": "gsm8k numeric"}
Peer = tuple[dict[str, str], Callable[[str, str], "float | None"]]


def peers() -> dict[str, Peer]:
    """Each importable peer: (the rewardkit configuration paired with it per family it scores,
    ``fn(completion, reference)``: 1.0 paid, 0.0 not, ``None`` skipped)."""
    logging.disable(logging.WARNING)
    found: dict[str, Peer] = {}
    try:
        from verl.utils.reward_score import gsm8k, math_dapo, math_reward
        found["veRL gsm8k strict"] = ({"gsm8k": "gsm8k numeric"}, _quiet(lambda c, r: float(gsm8k.compute_score(c, r) == 1.0)))
        found["veRL gsm8k flexible"] = ({"gsm8k": "last_number numeric"}, _quiet(
            lambda c, r: float(gsm8k.compute_score(c, r, method="flexible") == 1.0)))
        found["veRL math_reward"] = ({"math": "boxed math"}, _quiet(lambda c, r: float(math_reward.compute_score(c, r) == 1.0)))
        found["veRL math_dapo"] = ({"math": "math"}, _quiet(lambda c, r: float(bool(math_dapo.compute_score(c, r)["acc"]))))
    except ImportError as exc:
        print(f"veRL's gsm8k/math scorers not measured: {exc}")
    try:
        from verl.utils.reward_score import prime_math
        found["veRL prime_math"] = ({"math": "math"}, _quiet(lambda c, r: float(bool(prime_math.compute_score(c, r)[0]))))
    except ImportError as exc:
        print(f"veRL's prime_math not measured: {exc}")
    try:
        import math_verify  # noqa: F401
        from verl.utils.reward_score import math_verify as verl_math_verify
        found["veRL math_verify"] = (BOTH, _quiet(lambda c, r: float(verl_math_verify.compute_score(c, r))))
    except ImportError as exc:
        print(f"veRL's math_verify not measured: {exc}")
    try:
        from trl.rewards import accuracy_reward

        def trl(c: str, r: str) -> float | None:
            return accuracy_reward([[{"role": "assistant", "content": c}]], [r])[0]
        found["TRL accuracy_reward"] = (BOTH, _quiet(trl))
    except ImportError as exc:
        print(f"TRL's accuracy_reward not measured: {exc}")
    try:
        from math_verify import parse, verify
        found["math-verify (README use)"] = (BOTH, _quiet(lambda c, r: float(verify(parse(r), parse(c)))))
    except ImportError as exc:
        print(f"math-verify not measured: {exc}")
    return found


#: rewardkit's configurations (answer_match params), by the name PAIRS use
CONFIGS = {
    "math": {"mode": "math"},
    "boxed math": {"extract": "boxed", "mode": "math"},
    "gsm8k numeric": {"extract": "gsm8k", "mode": "numeric"},
    "last_number numeric": {"extract": "last_number", "mode": "numeric"},
}
#: the configurations a user of each family writes (the "no wrong answer paid" check runs on these)
FAMILY_CONFIGS = {"math": ("math", "boxed math"), "gsm8k": ("gsm8k numeric", "math")}


def rewardkit_scores(cases: list[Case], config: str) -> list[float]:
    """``answer_match`` with ``CONFIGS[config]`` over the cases, one batched call."""
    from rewardkit.components import AnswerMatch

    term = AnswerMatch(**CONFIGS[config])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = term.compute({"completion": [c.completion for c in cases],
                               "reference": [c.reference for c in cases]}, None, None)
    return [float(v) for v in values]


def wrong_paid(cases: list[Case], scores: list[float]) -> list[Case]:
    """The cases whose completion is wrong and was paid."""
    return [c for c, s in zip(cases, scores, strict=True) if not c.right and s == 1.0]


def _right(case: Case, score: float | None) -> bool:
    return score is not None and (score == 1.0) == case.right


def table(name: str, pairs: dict[str, str], cases: list[Case], mine: list[float],
          theirs: list[float | None]) -> list[str]:
    """One peer's rows: per class cases, agreements, right (rewardkit / peer), peer right where
    rewardkit is not, wrong answers paid (rewardkit / peer), skipped by the peer (None)."""
    against = "; ".join(f"{family}: {CONFIGS[config]}" for family, config in pairs.items())
    lines = [f"\n### {name}\n\nagainst answer_match {against}\n",
             f"| {'family: class':<52} | cases | agree | rk right | peer right | peer only | wrong paid rk/peer | skipped |",
             f"|{'-' * 54}|------:|------:|---------:|-----------:|----------:|-------------------:|--------:|"]
    classes: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(cases):
        classes.setdefault((c.family, c.cls), []).append(i)
    totals = [0] * 7
    for (family, cls), idx in classes.items():
        n = len(idx)
        agree = sum(theirs[i] is not None and mine[i] == theirs[i] for i in idx)
        rk = sum(_right(cases[i], mine[i]) for i in idx)
        peer = sum(_right(cases[i], theirs[i]) for i in idx)
        peer_only = sum(_right(cases[i], theirs[i]) and not _right(cases[i], mine[i]) for i in idx)
        paid_rk = sum(not cases[i].right and mine[i] == 1.0 for i in idx)
        paid_peer = sum(not cases[i].right and theirs[i] == 1.0 for i in idx)
        skipped = sum(theirs[i] is None for i in idx)
        for j, v in enumerate((n, agree, rk, peer, peer_only, paid_rk, paid_peer)):
            totals[j] += v
        lines.append(f"| {family + ': ' + cls:<52} | {n:>5} | {agree:>5} | {rk:>8} | {peer:>10} | {peer_only:>9} | "
                     f"{paid_rk:>8} / {paid_peer:<7} | {skipped:>7} |")
    n, agree, rk, peer, peer_only, paid_rk, paid_peer = totals
    lines.append(f"| {'all':<52} | {n:>5} | {agree:>5} | {rk:>8} | {peer:>10} | {peer_only:>9} | "
                 f"{paid_rk:>8} / {paid_peer:<7} |         |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math", type=int, default=550, help="generated MATH-style cases (at least 500 for the record)")
    parser.add_argument("--gsm8k", type=int, default=220, help="generated GSM8K-style cases")
    parser.add_argument("--ifeval", type=int, default=1000, help="generated IFEval replies (at least 1,000 for the record)")
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--show", type=int, default=3, help="examples printed of each disagreement kind")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = own_cases() + math_cases(rng, args.math) + gsm8k_cases(rng, args.gsm8k)
    started = time.perf_counter()
    found = peers()
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    print(f"{len(cases)} cases ({args.math} MATH-style, {args.gsm8k} GSM8K-style generated, seed {args.seed}, "
          f"{len(own_cases())} written after the peers' docs); load average {' '.join(load)}")
    mine = {config: rewardkit_scores(cases, config) for config in CONFIGS}
    failures = []
    for config in CONFIGS:
        for c in wrong_paid(cases, mine[config]):
            if config in FAMILY_CONFIGS[c.family]:
                failures.append((config, c))
    results: dict[str, dict[int, float | None]] = {}
    for name, (pairs, fn) in found.items():
        chosen = [c for c in cases if c.family in pairs]
        index = {id(c): i for i, c in enumerate(cases)}
        theirs = [fn(c.completion, c.reference) for c in chosen]
        results[name] = {id(c): t for c, t in zip(chosen, theirs, strict=True)}
        ours = [mine[pairs[c.family]][index[id(c)]] for c in chosen]
        print("\n".join(table(name, pairs, chosen, ours, theirs)))
        only = [(c, t, o) for c, t, o in zip(chosen, theirs, ours, strict=True) if _right(c, t) and not _right(c, o)]
        for c, t, o in only[:args.show]:
            print(f"    peer right, rewardkit not: [{c.cls}] ref={c.reference!r} completion=...{c.completion[-90:]!r} "
                  f"peer={t} rk={o}")
    print("\nright on MATH-style cases (generated and own):")
    math_only = [c for c in cases if c.family == "math"]
    for config in FAMILY_CONFIGS["math"]:
        scores = [mine[config][i] for i, c in enumerate(cases) if c.family == "math"]
        print(f"  answer_match {CONFIGS[config]}: {sum(_right(c, s) for c, s in zip(math_only, scores, strict=True))} "
              f"of {len(math_only)}")
    for name, (pairs, _) in found.items():
        if "math" in pairs:
            theirs = [results[name][id(c)] for c in math_only]
            print(f"  {name}: {sum(_right(c, t) for c, t in zip(math_only, theirs, strict=True))} of {len(math_only)}")
    print("\nclasses where rewardkit's MATH configuration is wrong by choice:")
    for cls, why in CHOICES.items():
        print(f"  {cls}: {why}")
    print(f"\nwrong answers paid by rewardkit's family configurations: {len(failures)}")
    for config, c in failures[:10]:
        print(f"  {config}: [{c.cls}] ref={c.reference!r} completion=...{c.completion[-100:]!r}")
    lines, totals = agreement_ifeval.run(random.Random(args.seed), args.ifeval, args.show)
    print("\n".join(lines))
    print(f"\nIFEval replies: rewardkit right on {totals['rk_right']} of {totals['cases']}, IFEval's checkers on "
          f"{totals['ifeval_right']}; IFEval right where rewardkit is not: {totals['ifeval_only']}; replies that do not "
          f"follow yet pass: rewardkit {totals['rk_wrong_passed']}, IFEval {totals['ifeval_wrong_passed']}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
