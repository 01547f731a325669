"""Writes the stress examples' rows (seeded): ``python -m examples.stress.make_rows``."""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken"]
ITEMS = ["apples", "pencils", "stickers", "marbles", "books", "coins"]
RIVER = [("river", "stone"), ("forest", "lantern"), ("harbor", "rope"), ("desert", "mirror"), ("garden", "ladder"),
         ("valley", "bell"), ("island", "compass"), ("meadow", "kite")]


def arithmetic(rng: random.Random) -> dict:
    a, b = rng.randint(2, 49), rng.randint(2, 49)
    return {"prompt": f"What is {a} + {b}? Reply with the equation.", "reference": str(a + b),
            "operands": f"{a}|{b}", "completion": f"{a} + {b} = {a + b}"}


def gsm8k(rng: random.Random) -> dict:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(3, 40), rng.randint(2, 30), rng.randint(2, 9)
    total = (a + b) * c
    return {"prompt": f"{name} has {a} {item} and gets {b} more. Then {name} gets {c} times as many. "
                      f"How many {item} does {name} have? End with '#### <answer>'.",
            "reference": str(total),
            "completion": f"{name} has {a} + {b} = {a + b} {item}. Then {a + b} * {c} = {total}.\n#### {total}"}


def boxed(rng: random.Random) -> dict:
    a, b = rng.randint(3, 19), rng.randint(3, 19)
    return {"prompt": f"Compute {a} * {b}. Put the final answer in \\boxed{{}}.", "reference": str(a * b),
            "completion": f"{a} * {b} = {a * b}, so the answer is \\boxed{{{a * b}}}."}


def instruction(i: int) -> dict:
    place, word = RIVER[i % len(RIVER)]
    return {"prompt": f"Write one sentence about a {place} that uses the word '{word}'. End it with a period.",
            "words": f"{place}|{word}", "ending": ".", "min_words": 6, "max_words": 30,
            "banned": "write one|end it|uses the word",
            "completion": f"Beside the quiet {place}, a child found a small {word} and kept it for years."}


def person(rng: random.Random) -> dict:
    name, age = rng.choice(NAMES), rng.randint(20, 80)
    return {"prompt": f"Return a JSON object with the keys name and age for {name}, who is {age}.",
            "keys": "name|age", "reference": name, "completion": json.dumps({"name": name, "age": age})}


def mixed(rng: random.Random, i: int) -> dict:
    if i % 2 == 0:
        row = arithmetic(rng)
        row.pop("operands")
        return {**row, "task": "math"}
    word = rng.choice(["abcd", "stone", "lantern", "ab", "compass"])
    return {"prompt": f"What does len('{word}') return in Python? Reply as `len(...) = n`.", "reference": str(len(word)),
            "task": "code", "completion": f"len('{word}') = {len(word)}"}


def grpo_arithmetic() -> list[dict]:
    """The GRPO demo's own questions (its training split), each with the right equation as control."""
    from examples.grpo import task

    train, _ = task.split()
    return [{"prompt": task.question(a, b), "reference": str(a + b), "operands": f"{a}|{b}",
             "completion": f"{a} + {b} = {a + b}"} for a, b in train[:8]]


def instruction_reply(prompt) -> str:
    """A reply that keeps every constraint of an instructions-task prompt (checked by the task's own checker)."""
    words = ["a", "calm", "day", "brings", "new", "ideas", "to", "everyone", "who", "listens", "closely"]
    if prompt.include:
        words[1] = prompt.include
    if prompt.topic_words:
        words[2] = prompt.topic_words.split("|")[0]  # on topic: one of the topic's own words
    if "json" in prompt.types:
        keys = prompt.keys.split("|")
        return json.dumps({keys[0]: " ".join(words[:4]), keys[1]: " ".join(words[4:8])})
    target = max(prompt.min_words, 8) if prompt.max_words else 10
    lines = []
    bullets = prompt.bullets or 1
    per = max(2, target // bullets)
    for i in range(bullets):
        line = " ".join(words[(i * 3 + j) % len(words)] for j in range(per))
        lines.append(f"- {line}" if prompt.bullets else line[0].upper() + line[1:] + ".")
    text = "\n".join(lines)
    if prompt.ending:
        text += "\n" + prompt.ending
    return text


def grpo_instructions() -> list[dict]:
    """The instructions task's own prompts (its training split) whose control keeps every constraint."""
    from examples.grpo import instructions

    train, _ = instructions.split()
    out = []
    for prompt in train:
        reply = instruction_reply(prompt)
        if all(instructions.check(reply, prompt).values()):
            columns = {column: values[0] for column, values in instructions.rows([prompt]).items()}
            columns["prompt"] = prompt.text()
            out.append({**columns, "completion": reply})
        if len(out) == 8:
            break
    return out


def main() -> None:
    rng = random.Random(47)
    rows = {"arithmetic": [arithmetic(rng) for _ in range(8)], "gsm8k": [gsm8k(rng) for _ in range(8)],
            "boxed": [boxed(rng) for _ in range(8)], "instructions": [instruction(i) for i in range(8)],
            "json": [person(rng) for _ in range(8)], "mixed": [mixed(rng, i) for i in range(8)],
            "grpo_arithmetic": grpo_arithmetic(), "grpo_instructions": grpo_instructions()}
    for name, items in rows.items():
        path = HERE / "rows" / f"{name}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
        print(f"wrote {path} ({len(items)} rows)")


if __name__ == "__main__":
    main()
