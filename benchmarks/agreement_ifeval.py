"""The instruction terms held against IFEval's own checkers (lm-eval), on generated replies in
labelled classes: bench_agreement's IFEval part.

Each case is one reply to one IFEval instruction (word counts, bullet lists, keywords included and
forbidden, no commas, an end phrase), built so that whether it follows the instruction is known by
construction (the class's intent). Each instruction is paired with the rewardkit term a user moving
from IFEval would write (``TERMS``), at full credit only (``partial: false``). A scorer is right on a
case when it passes exactly the replies that follow.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable

WORDS = ("river", "stone", "garden", "lamp", "orbit", "candle", "forest", "window", "quiet", "marble", "bridge",
         "copper", "meadow", "signal", "harbor", "pillow", "rocket", "saddle", "velvet", "anchor")


@dataclasses.dataclass(frozen=True)
class IfevalCase:
    """One reply to one instruction; ``follows``: it follows the instruction (by construction)."""

    instruction: str  # IFEval's instruction id
    cls: str
    text: str
    kwargs: dict[str, Any]
    follows: bool


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _words(rng: random.Random) -> list[IfevalCase]:
    n = rng.randint(5, 60)
    relation = rng.choice(("at least", "less than"))
    make = lambda cls, count, follows: IfevalCase(  # noqa: E731
        "length_constraints:number_words", cls, _sentence(rng, count) + ".", {"num_words": n, "relation": relation},
        follows)
    if relation == "at least":
        return [make("words: at least N, N given", n, True), make("words: at least N, one short", n - 1, False),
                make("words: at least N, long tail (1,000+)", n + 1000, True)]
    return [make("words: less than N, N-1 given", n - 1, True), make("words: less than N, N given", n, False),
            make("words: less than N, far over", n + 40, False)]


def _bullets(rng: random.Random) -> list[IfevalCase]:
    n = rng.randint(1, 6)
    items = [f"{rng.choice('*-')} {_sentence(rng, rng.randint(1, 5))}" for _ in range(n)]
    kw = {"num_bullets": n}
    name = "detectable_format:number_bullet_lists"
    bold = ["**Summary**"] + items + ["**Done**"]
    lone = items[:1] + ["*"] + items[1:]
    return [IfevalCase(name, "bullets: exactly N", "\n".join(items), kw, True),
            IfevalCase(name, "bullets: one missing", "\n".join(items[:-1]) or "no list", kw, False),
            IfevalCase(name, "bullets: one extra", "\n".join(items + ["- and one more"]), kw, False),
            IfevalCase(name, "bullets: N with bold lines around", "\n".join(bold), kw, True),
            IfevalCase(name, "bullets: N, indented", "\n".join("   " + line for line in items), kw, True),
            IfevalCase(name, "bullets: N plus a lone '*' line", "\n".join(lone), kw, True),
            IfevalCase(name, "bullets: numbered, not bulleted", "\n".join(f"{i + 1}. {line[2:]}"
                                                                         for i, line in enumerate(items)), kw, False)]


def _keywords(rng: random.Random) -> list[IfevalCase]:
    word = rng.choice(WORDS)
    others = [w for w in WORDS if word not in w and w not in word]
    filler = _sentence(random.Random(rng.random()), 12).split()
    filler = " ".join(w for w in filler if w in others) or "plain text"
    inc, exc = "keywords:existence", "keywords:forbidden_words"
    return [IfevalCase(inc, "include: present", f"{filler} {word} here.", {"keywords": [word]}, True),
            IfevalCase(inc, "include: present in capitals", f"{filler} {word.upper()}!", {"keywords": [word]}, True),
            IfevalCase(inc, "include: absent", f"{filler}.", {"keywords": [word]}, False),
            IfevalCase(inc, "include: only inside a longer word", f"{filler} {word}ward bound.", {"keywords": [word]},
                       False),
            IfevalCase(exc, "forbid: absent", f"{filler}.", {"forbidden_words": [word]}, True),
            IfevalCase(exc, "forbid: present", f"{filler}, {word}.", {"forbidden_words": [word]}, False),
            IfevalCase(exc, "forbid: present in capitals", f"{word.capitalize()} {filler}.", {"forbidden_words": [word]},
                       False),
            IfevalCase(exc, "forbid: only inside a longer word", f"{filler} {word}ward.", {"forbidden_words": [word]},
                       True)]


def _commas(rng: random.Random) -> list[IfevalCase]:
    a, b = _sentence(rng, rng.randint(3, 9)), _sentence(rng, rng.randint(3, 9))
    return [IfevalCase("punctuation:no_comma", "no comma: none", f"{a}. {b}.", {}, True),
            IfevalCase("punctuation:no_comma", "no comma: one", f"{a}, {b}.", {}, False)]


LOOK_ALIKES = {"s": "ſ", "o": "о", "a": "а", "e": "е"}  # long s, Cyrillic o, a, e


def _endings(rng: random.Random) -> list[IfevalCase]:
    phrase = rng.choice(("Thank you.", "That is all.", "Is there anything else I can help with?",
                         "Let me know if you have additional questions.", "Any other questions?"))
    body = _sentence(rng, rng.randint(4, 30))
    kw = {"end_phrase": phrase}
    name = "startend:end_checker"
    swap = next(ch for ch in phrase.lower() if ch in LOOK_ALIKES)
    fake = phrase.replace(swap, LOOK_ALIKES[swap], 1) if swap in phrase else phrase
    return [IfevalCase(name, "ending: exact", f"{body}. {phrase}", kw, True),
            IfevalCase(name, "ending: exact, trailing spaces", f"{body}. {phrase}  \n", kw, True),
            IfevalCase(name, "ending: other case", f"{body}. {phrase.upper()}", kw, True),
            IfevalCase(name, "ending: phrase, then more", f"{body}. {phrase} {body}.", kw, False),
            IfevalCase(name, "ending: look-alike letter", f"{body}. {fake}", kw, fake == phrase),
            IfevalCase(name, "ending: absent", f"{body}.", kw, False)]


def own_cases() -> list[IfevalCase]:
    """Cases written after IFEval's own tests (``instruction_following_eval/instructions_test.py``): the same properties, in
    texts of our own (a star with no space after it is a bullet, ``***`` separators are not,
    a leading dash without a space is; letters and digits mixed count as words; a forbidden word
    inside a longer one is not used; a multi-word keyword is found whole)."""
    bullets, words, inc, exc = ("detectable_format:number_bullet_lists", "length_constraints:number_words",
                                "keywords:existence", "keywords:forbidden_words")
    return [
        IfevalCase(bullets, "own: bullets", "Lists use stars:\n* one point.\n*(no space) a second.\n* a third",
                   {"num_bullets": 3}, True),
        IfevalCase(bullets, "own: bullets", "An inline * does not count, nor this *:\n  * first\n  * second\n  . a dot",
                   {"num_bullets": 2}, True),
        IfevalCase(bullets, "own: bullets", "Dashes:\n- one\n- two\n-three without a space", {"num_bullets": 3}, True),
        IfevalCase(bullets, "own: bullets", "Part one\n***\nPart two\n***\nPart three\n* the only bullet",
                   {"num_bullets": 1}, True),
        IfevalCase(bullets, "own: bullets", "* one\n* two", {"num_bullets": 3}, False),
        IfevalCase(words, "own: words", "s0me m1x3d w0rds c0unt 4s w0rds t00 h3re.", {"num_words": 8, "relation": "at least"},
                   True),
        IfevalCase(words, "own: words", "l3ss th4n s1xt33n w0rds? n0: th1s l1ne h4s a f3w m0re th4n th4t, c0unt3d h3r3 n0w.",
                   {"num_words": 16, "relation": "less than"}, False),
        IfevalCase(words, "own: words", "tw0 w0rds", {"num_words": 3, "relation": "less than"}, True),
        IfevalCase(inc, "own: include", "The romantic river winds past the Mona Lisa's museum.",
                   {"keywords": ["romantic", "river", "Mona Lisa"]}, True),
        IfevalCase(inc, "own: include", "A romance of rivers and museums.", {"keywords": ["romantic", "river", "Mona Lisa"]},
                   False),
        IfevalCase(exc, "own: forbid", "They rose to power quickly.", {"forbidden_words": ["house", "power"]}, False),
        IfevalCase(exc, "own: forbid", "Generative models use a transformer.", {"forbidden_words": ["gene", "transform"]},
                   True),
        IfevalCase("punctuation:no_comma", "own: no comma", "Short and plain.", {}, True),
        IfevalCase("startend:end_checker", "own: ending", "Here it is.\nAny other questions?  ",
                   {"end_phrase": "Any other questions?"}, True),
        IfevalCase("startend:end_checker", "own: ending", "Any other questions? Yes, one more.",
                   {"end_phrase": "Any other questions?"}, False),
    ]


GENERATORS: tuple[Callable[[random.Random], list[IfevalCase]], ...] = (_words, _bullets, _keywords, _commas, _endings)


def ifeval_cases(rng: random.Random, n: int) -> list[IfevalCase]:
    """The cases written after IFEval's tests, then at least ``n`` generated replies (rounds of
    every generator until there are enough)."""
    cases: list[IfevalCase] = own_cases()
    while len(cases) < n + len(own_cases()):
        for generate in GENERATORS:
            cases.extend(generate(rng))
    return cases


def _term(kind: str, **params: Any) -> Any:
    from rewardkit.registry import get_component_class

    return get_component_class(kind)(name=kind, **params)


def rewardkit_passes(case: IfevalCase) -> bool:
    """The paired rewardkit term's verdict on a case: full credit (1.0)."""
    kw = case.kwargs
    if case.instruction == "length_constraints:number_words":
        low, high = (kw["num_words"], 0) if kw["relation"] == "at least" else (0, kw["num_words"] - 1)
        return _term("word_count_bounds").score(case.text, float(low), float(high)) == 1.0
    if case.instruction == "detectable_format:number_bullet_lists":
        return _term("bullet_count", partial=False).score(case.text, float(kw["num_bullets"])) == 1.0
    if case.instruction == "keywords:existence":
        return _term("keywords", partial=False).score(case.text, "|".join(kw["keywords"])) == 1.0
    if case.instruction == "keywords:forbidden_words":
        return _term("keywords", mode="exclude", partial=False).score(case.text, "|".join(kw["forbidden_words"])) == 1.0
    if case.instruction == "punctuation:no_comma":
        return _term("keywords", mode="exclude", match="substring").score(case.text, ",") == 1.0
    if case.instruction == "startend:end_checker":
        return _term("ends_with").score(case.text, kw["end_phrase"]) == 1.0
    raise ValueError(f"no rewardkit term is paired with IFEval's {case.instruction!r}")


#: the rewardkit term paired with each instruction
TERMS = {
    "length_constraints:number_words": "word_count_bounds (min_words N, or max_words N-1 for 'less than N')",
    "detectable_format:number_bullet_lists": "bullet_count, partial: false",
    "keywords:existence": "keywords, match: word, partial: false",
    "keywords:forbidden_words": "keywords, mode: exclude, match: word, partial: false",
    "punctuation:no_comma": "keywords, mode: exclude, match: substring, words ','",
    "startend:end_checker": "ends_with",
}

#: classes where rewardkit and IFEval differ on purpose: why rewardkit's reading is the one kept
CHOICES = {
    "bullets: N plus a lone '*' line": "a line holding a lone '*' is no bullet; IFEval's pattern lets the character "
                                       "after '*' be the line break, so that line and the next count as one star bullet "
                                       "(and a dash bullet after it counts twice)",
    "include: only inside a longer word": "keywords matches whole words by default ('stone' is not in 'stoneward'); "
                                          "IFEval's existence check is a substring search (match: substring agrees)",
}


def ifeval_table(cases: list[IfevalCase], ours: list[bool], theirs: list[bool]) -> list[str]:
    """Per class: cases, agreements, right (rewardkit / IFEval), IFEval right where rewardkit is not,
    replies that do not follow yet pass (rewardkit / IFEval)."""
    lines = ["\n### IFEval's checkers (lm-eval 0.4.13)\n",
             *(f"- {instruction}: {term}" for instruction, term in TERMS.items()), "",
             f"| {'class':<42} | cases | agree | rk right | ifeval right | ifeval only | wrong passed rk/ifeval |",
             f"|{'-' * 44}|------:|------:|---------:|-------------:|------------:|-----------------------:|"]
    classes: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        classes.setdefault(c.cls, []).append(i)
    totals = [0] * 7
    for cls, idx in classes.items():
        row = (len(idx), sum(ours[i] == theirs[i] for i in idx), sum(ours[i] == cases[i].follows for i in idx),
               sum(theirs[i] == cases[i].follows for i in idx),
               sum(theirs[i] == cases[i].follows and ours[i] != cases[i].follows for i in idx),
               sum(ours[i] and not cases[i].follows for i in idx), sum(theirs[i] and not cases[i].follows for i in idx))
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        lines.append(f"| {cls:<42} | {row[0]:>5} | {row[1]:>5} | {row[2]:>8} | {row[3]:>12} | {row[4]:>11} | "
                     f"{row[5]:>11} / {row[6]:<9} |")
    lines.append(f"| {'all':<42} | {totals[0]:>5} | {totals[1]:>5} | {totals[2]:>8} | {totals[3]:>12} | {totals[4]:>11} | "
                 f"{totals[5]:>11} / {totals[6]:<9} |")
    return lines


def run(rng: random.Random, n: int, show: int = 3) -> tuple[list[str], dict[str, int]]:
    """The IFEval part of the benchmark: its table, the disagreements shown, and its totals."""
    from rewardkit.testing.ifeval import ifeval_follows

    cases = ifeval_cases(rng, n)
    ours = [rewardkit_passes(c) for c in cases]
    theirs = [ifeval_follows(c.instruction, c.text, **c.kwargs) for c in cases]
    lines = ifeval_table(cases, ours, theirs)
    only = [(c, o, t) for c, o, t in zip(cases, ours, theirs, strict=True) if t == c.follows and o != c.follows]
    for c, o, t in only[:show]:
        lines.append(f"    ifeval right, rewardkit not: [{c.cls}] {c.text[-80:]!r} rk={o} ifeval={t}")
    lines.append("\nclasses where rewardkit and IFEval differ by choice:")
    lines += [f"  {cls}: {why}" for cls, why in CHOICES.items()]
    totals = {"cases": len(cases), "rk_right": sum(o == c.follows for c, o in zip(cases, ours, strict=True)),
              "ifeval_right": sum(t == c.follows for c, t in zip(cases, theirs, strict=True)),
              "ifeval_only": len(only),
              "rk_wrong_passed": sum(o and not c.follows for c, o in zip(cases, ours, strict=True)),
              "ifeval_wrong_passed": sum(t and not c.follows for c, t in zip(cases, theirs, strict=True))}
    return lines, totals
