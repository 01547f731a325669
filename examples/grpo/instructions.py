"""The second task: short writing instructions carrying several verifiable constraints (IFEval's kind).

Each prompt asks for a few sentences about a topic under ``k`` constraints drawn from seven types:
a word-count range, a required word, a forbidden word (the topic's own noun), exactly N bullet
points, no commas, an ending phrase, and a JSON object with given keys (JSON is never combined
with bullets, "no commas" or an ending, which it cannot satisfy together). Prompts come from a
seed. Training and held-out prompts are split **by constraint combination**: no held-out prompt
carries a combination of types that any training prompt carries, so the held-out score measures
constraints composed in new ways, not memorised prompts.

The strict metric is IFEval's: a reply passes a prompt when every one of its constraints holds
(:func:`check`, written here independently of the reward components so that tests can compare
the two and both with IFEval's own checkers in ``lm-eval``). The dataset's columns carry each
constraint's parameters for the reward terms (``min_words``, ``max_words``, ``include``,
``exclude``, ``bullets``, ``commas``, ``ending``, ``keys``); an empty or zero value means "not
asked", for which the terms score 1.0. ``topic_words`` holds words of the topic (never its noun,
which "exclude" may forbid) for the composed reward's "on topic" term: IFEval's rules, and so the
strict checker, do not ask that a reply be about its topic; ``reply_words`` (8) is the fewest
words such a reply has.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import asdict, dataclass
from typing import Any

TYPES = ("words", "include", "exclude", "bullets", "no_commas", "ending", "json")
#: what JSON cannot be combined with (a JSON object with two keys has a comma, cannot be bullets or end in a phrase)
INCOMPATIBLE = {frozenset({"json", other}) for other in ("bullets", "no_commas", "ending")}
#: (topic, its noun: the word "exclude" forbids, its own words: a reply on the topic uses one of them)
TOPICS = (("the ocean", "ocean", "sea|waves|water|tide|shore"), ("cats", "cats", "kitten|purr|whiskers|paws|feline"),
          ("coffee", "coffee", "cup|beans|brew|espresso|mug"), ("winter", "winter", "cold|ice|frost|snow|freezing"),
          ("a city park", "park", "trees|grass|bench|paths|lawn"), ("music", "music", "song|melody|rhythm|sound|notes"),
          ("bicycles", "bicycles", "ride|wheels|pedal|bike|cycling"), ("the moon", "moon", "night|sky|lunar|orbit|stars"),
          ("bread", "bread", "loaf|baked|flour|dough|crust"), ("rain", "rain", "wet|drops|clouds|storm|puddles"),
          ("mountains", "mountains", "peak|climb|summit|rock|hills"), ("books", "books", "read|pages|story|reading|novel"),
          ("gardens", "gardens", "flowers|plants|soil|grow|seeds"), ("trains", "trains", "rail|tracks|station|ride|carriage"),
          ("the forest", "forest", "trees|woods|leaves|pine|wild"),
          ("friendship", "friendship", "friend|friends|trust|together|care"),
          ("tea", "tea", "cup|leaves|brew|pot|kettle"), ("snow", "snow", "cold|white|winter|flakes|ice"),
          ("birds", "birds", "wings|fly|nest|song|feathers"), ("the desert", "desert", "sand|dry|heat|dunes|hot"),
          ("dogs", "dogs", "puppy|bark|walk|loyal|tail"), ("the sun", "sun", "sky|heat|hot|shine|sunlight"),
          ("apples", "apples", "fruit|tree|sweet|red|crisp"), ("rivers", "rivers", "water|flow|stream|banks|current"))
REQUIRED = ("blue", "happy", "morning", "quiet", "green", "light", "small", "warm", "simple", "bright", "slow", "home")
ENDINGS = ("That is all.", "Thank you.", "The end.", "Any questions?")
KEY_PAIRS = (("name", "color"), ("title", "year"), ("city", "country"), ("animal", "sound"), ("food", "taste"),
             ("day", "weather"))
COLUMNS = ("min_words", "max_words", "include", "exclude", "bullets", "commas", "ending", "keys", "topic_words",
           "reply_words")
#: the fewest words a reply "about a topic" has (the composed reward's substance term; every word-count
#: constraint the prompts carry allows at least this many)
REPLY_WORDS = 8


@dataclass(frozen=True)
class Prompt:
    """One instruction: its topic, the constraint types it carries and their parameters."""

    topic: str
    types: tuple[str, ...]
    #: the topic's own words (``|``-separated): the reward's "on topic" term reads them
    topic_words: str = ""
    #: the fewest words a reply has (the reward's substance term reads it)
    reply_words: int = REPLY_WORDS
    min_words: int = 0
    max_words: int = 0
    include: str = ""
    exclude: str = ""
    bullets: int = 0
    commas: str = ""
    ending: str = ""
    keys: str = ""

    def text(self) -> str:
        """The user message: the request, then one sentence per constraint."""
        parts = [f"Write about {self.topic}."]
        for kind in self.types:
            parts.append({
                "words": f"Use between {self.min_words} and {self.max_words} words.",
                "include": f"Include the word '{self.include}'.",
                "exclude": f"Do not use the word '{self.exclude}'.",
                "bullets": f"Answer with exactly {self.bullets} bullet points, each on its own line starting with '- '.",
                "no_commas": "Do not use any commas.",
                "ending": f"End your reply with the exact phrase '{self.ending}'",
                "json": "Reply only with a JSON object with the keys "
                        + " and ".join(f'"{k}"' for k in self.keys.split("|")) + ".",
            }[kind])
        return " ".join(parts)


def combinations(k: int) -> list[tuple[str, ...]]:
    """Every set of ``k`` constraint types that can hold together, in a fixed order."""
    return [c for c in itertools.combinations(TYPES, k)
            if not any(pair <= set(c) for pair in INCOMPATIBLE)]


def make_prompt(types: tuple[str, ...], rng: random.Random) -> Prompt:
    """A prompt carrying ``types``, its topic and parameters drawn from ``rng``."""
    topic, noun, topic_words = rng.choice(TOPICS)
    values: dict[str, Any] = {}
    if "words" in types:
        low = rng.randint(4, 10)
        values.update(min_words=low, max_words=low + rng.randint(8, 16))
    if "include" in types:
        values["include"] = rng.choice(REQUIRED)
    if "exclude" in types:
        values["exclude"] = noun  # the topic's own noun: the word a reply reaches for first
    if "bullets" in types:
        values["bullets"] = rng.randint(2, 3)
    if "no_commas" in types:
        values["commas"] = ","
    if "ending" in types:
        values["ending"] = rng.choice(ENDINGS)
    if "json" in types:
        values["keys"] = "|".join(rng.choice(KEY_PAIRS))
    return Prompt(topic, types, topic_words=topic_words, **values)


def split(train: int = 64, held_out: int = 96, k: int = 2, held_out_share: float = 0.3,
          seed: int = 0) -> tuple[list[Prompt], list[Prompt]]:
    """Training and held-out prompts whose constraint combinations are disjoint (``held_out_share``
    of the combinations, drawn with ``seed``, are held out; each type still appears in training)."""
    rng = random.Random(seed)
    combos = combinations(k)
    while True:
        shuffled = combos[:]
        rng.shuffle(shuffled)
        cut = max(1, round(len(combos) * held_out_share))
        held, kept = shuffled[:cut], shuffled[cut:]
        if set(itertools.chain(*kept)) == set(TYPES):
            break
    train_prompts = [make_prompt(kept[i % len(kept)], rng) for i in range(train)]
    held_prompts = [make_prompt(held[i % len(held)], rng) for i in range(held_out)]
    rng.shuffle(train_prompts)
    return train_prompts, held_prompts


def rows(prompts: list[Prompt]) -> dict[str, list[Any]]:
    """Dataset columns for TRL: a chat ``prompt`` and each constraint's parameter column."""
    out: dict[str, list[Any]] = {"prompt": [[{"role": "user", "content": p.text()}] for p in prompts]}
    for column in COLUMNS:
        out[column] = [getattr(p, column) for p in prompts]
    out["types"] = ["|".join(p.types) for p in prompts]
    return out


# ---- the strict checker (IFEval's rules; independent of the reward components) -----------------
_WORD = re.compile(r"\w+")
_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)


def _json_object(reply: str) -> dict | None:
    text = reply.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check(reply: str, prompt: Prompt) -> dict[str, bool]:
    """Whether each of the prompt's constraints holds in ``reply`` (IFEval's rules)."""
    results: dict[str, bool] = {}
    for kind in prompt.types:
        if kind == "words":
            results[kind] = prompt.min_words <= len(_WORD.findall(reply)) <= prompt.max_words
        elif kind == "include":
            results[kind] = re.search(re.escape(prompt.include), reply, re.IGNORECASE) is not None
        elif kind == "exclude":
            results[kind] = re.search(rf"\b{re.escape(prompt.exclude)}\b", reply, re.IGNORECASE) is None
        elif kind == "bullets":
            results[kind] = len(_STAR_BULLET.findall(reply)) + len(_DASH_BULLET.findall(reply)) == prompt.bullets
        elif kind == "no_commas":
            results[kind] = "," not in reply
        elif kind == "ending":
            results[kind] = reply.strip().lower().endswith(prompt.ending.strip().lower())
        elif kind == "json":
            found = _json_object(reply)
            results[kind] = found is not None and all(key in found for key in prompt.keys.split("|"))
    return results


def scores(replies: list[str], prompts: list[Prompt]) -> dict[str, float]:
    """``strict``: share of prompts whose every constraint holds (IFEval's prompt-level strict
    accuracy); ``instructions``: share of all constraints that hold (its instruction level)."""
    checks = [check(r, p) for r, p in zip(replies, prompts, strict=True)]
    held = [v for c in checks for v in c.values()]
    return {"strict": sum(all(c.values()) for c in checks) / len(checks),
            "instructions": sum(held) / len(held)}


def as_dict(prompt: Prompt) -> dict[str, Any]:
    """A prompt as plain data (for result files)."""
    return asdict(prompt)
