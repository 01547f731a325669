"""The GRPO demo at full length, and what one more torch thread costs on this machine.

``--threads``: the same GRPO work (8 sampled completions of 8 tokens to the demo's prompts, then a
forward and backward pass over them with LoRA) timed with 1 and with 2 intra-op torch threads, side by
side in one process, repeated and interleaved; prints seconds and the 2-thread / 1-thread ratio.

``--probe``: the base model's sampled replies to held-out questions (the demo's prompt and sampling
temperature, 4 per question), by form (a bare number, an equation ``a + b = c``, anything else):
how often each form comes and how often it is right. Why the task asks for the equation.

Default: the demo's comparison (``python -m examples.grpo``) with more seeds and steps than
``make demo-llm`` runs (``--seeds 1,2,3,4 --steps 12``), results in runs/bench_llm_demo (resumable).

Run: ``.venv/bin/python benchmarks/bench_llm_demo.py [--threads | --probe] [--seeds 1,2,3,4] [--steps 12]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def time_threads(repeats: int) -> None:
    import torch
    from peft import get_peft_model

    from examples.grpo import model as lm
    from examples.grpo import task

    lm.set_threads(1)
    model, tokenizer = lm.load()
    model = get_peft_model(model, lm.lora_config())
    messages = task.rows(task.problems(2, seed=5))["prompt"]
    enc = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True,
                                        return_tensors="pt", padding=True)

    def grpo_work() -> tuple[float, float]:
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=8, do_sample=True, num_return_sequences=4)
        generated = time.perf_counter()
        model.train()
        logits = model(input_ids=out).logits
        logits.float().log_softmax(-1)[:, -9:-1].mean().backward()
        model.zero_grad()
        return generated - start, time.perf_counter() - generated

    grpo_work()  # warm-up
    times: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    for _ in range(repeats):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            times[threads].append(grpo_work())
    print(f"{'threads':>7} {'generate s':>11} {'fwd+bwd s':>10} {'total s':>8}   (median of {repeats}, interleaved)")
    totals = {}
    for threads, rows in times.items():
        gen, back = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        totals[threads] = statistics.median(r[0] + r[1] for r in rows)
        print(f"{threads:>7} {gen:>11.2f} {back:>10.2f} {totals[threads]:>8.2f}")
    print(f"2 threads / 1 thread: {totals[2] / totals[1]:.2f}x the time")


def probe(questions: int, samples: int) -> None:
    import re

    import torch

    from examples.grpo import model as lm
    from examples.grpo import task
    from examples.grpo.training import Budget

    lm.set_threads(1)
    torch.manual_seed(0)
    model, tokenizer = lm.load()
    budget = Budget()
    _, held_out = task.split(held_out=questions)
    replies = lm.generate(model, tokenizer, task.rows(held_out)["prompt"], max_new_tokens=budget.max_completion_tokens,
                          batch_size=8, temperature=budget.temperature, samples=samples)
    forms: dict[str, list[bool]] = {"bare number": [], "equation": [], "other": []}
    for k, reply in enumerate(replies):
        a, b = held_out[k // samples]
        form = ("bare number" if re.fullmatch(r"\s*-?\d+\.?\s*", reply) else
                "equation" if task.compliant(reply) else "other")
        forms[form].append(task.correct(reply, a, b))
    print(f"{'form':<12} {'share':>6} {'right':>6}   ({len(replies)} sampled replies to {questions} held-out questions, "
          f"temperature {budget.temperature})")
    for form, right in forms.items():
        rate = f"{sum(right) / len(right):.0%}" if right else "-"
        print(f"{form:<12} {len(right) / len(replies):>6.0%} {rate:>6}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", action="store_true", help="time 1 against 2 torch threads instead")
    parser.add_argument("--probe", action="store_true", help="the base model's sampled replies by form instead")
    parser.add_argument("--repeats", type=int, default=5, help="--threads: repetitions per thread count (5)")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--steps", default="12")
    args = parser.parse_args(argv)
    if args.threads:
        time_threads(args.repeats)
        return 0
    if args.probe:
        probe(questions=48, samples=4)
        return 0
    from examples.grpo.__main__ import main as demo

    return demo(["--seeds", args.seeds, "--steps", args.steps, "--out", str(ROOT / "runs" / "bench_llm_demo")])


if __name__ == "__main__":
    sys.exit(main())
