"""Does composing rewards give a better model? GRPO on SmolLM2-135M-Instruct, sparse against composed.

Two tasks (examples/grpo): ``arithmetic`` (reply with the equation ``a + b = c``; strict held-out
metrics: *compliant* is exactly one equation with the question's own operands, *correct* that
equation with the right sum; 200 held-out questions sharing no unordered operand pair with
training) and ``instructions`` (IFEval-style prompts carrying several verifiable constraints;
*strict* is the share of held-out prompts whose every constraint holds; held out by constraint
combination). Per task, the sparse reward (``answer_match`` alone; the all-or-nothing check)
against the composed one (partial-credit terms, weights on schedules): same model, steps,
completions, prompts and seeds. Prints per-seed held-out metrics, the composed-minus-sparse
differences paired by seed with 90% intervals, the first step at which each arm's per-step
curve (the strict metric on that step's sampled completions) reaches the sparse arm's final
value, and saves plots of the curves.

Every finished run is saved in ``--out`` under a key hashing its config, code and settings
(examples/grpo/cache.py), so an interrupted benchmark resumes and an edited config re-runs.
``--report`` prints the tables from saved runs without training.

Run: ``.venv/bin/python benchmarks/bench_grpo_tasks.py --tasks arithmetic,instructions --seeds 1,2,3,4,5,6 --steps 4 --before``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARMS = ("sparse", "composed")
CONFIGS = {("arithmetic", "sparse"): "sparse.yaml", ("arithmetic", "composed"): "composed.yaml",
           ("instructions", "sparse"): "instructions_sparse.yaml",
           ("instructions", "composed"): "instructions_composed.yaml"}
#: per task: the strict metrics (the first is the headline), then the others reported
METRICS = {"arithmetic": ("correct", "compliant", "answer"), "instructions": ("strict", "instructions")}


def held_out_items(task_name: str, held_out: int) -> tuple[list[Any], list[Any]]:
    from examples.grpo import instructions, task

    if task_name == "arithmetic":
        return task.split(train=64, held_out=held_out)
    return instructions.split(train=64, held_out=held_out, k=2)


def settings(task_name: str, arm: str, seed: int, steps: int, held_out: int) -> tuple[dict[str, Any], Any, dict]:
    from examples.grpo import training
    from rewardkit.config import load_yaml

    spec = training.TASKS[task_name]
    budget = training.Budget(steps=steps, max_completion_tokens=spec.max_tokens)
    config = load_yaml(ROOT / "examples" / "grpo" / CONFIGS[(task_name, arm)])
    return config, budget, {"task": task_name, "arm": arm, "seed": seed, "budget": budget, "held_out": held_out}


def run_path(out: Path, task_name: str, arm: str, seed: int, key: str) -> Path:
    return out / task_name / f"{arm}_seed{seed}_{key}.json"


def train_all(args: argparse.Namespace) -> None:
    from examples.grpo import model as lm

    lm.set_threads(args.torch_threads)
    from examples.grpo import cache, training
    from examples.grpo.scorer import ScorerProcess, point_remote_terms

    todo = [(t, seed, arm) for seed in args.seeds for t in args.tasks for arm in ARMS]
    started = time.perf_counter()
    with ScorerProcess() as scorer:
        for index, (task_name, seed, arm) in enumerate(todo, start=1):
            config, budget, run_settings = settings(task_name, arm, seed, args.steps, args.held_out[task_name])
            key = cache.run_key(config, run_settings)
            path = run_path(args.out, task_name, arm, seed, key)
            if path.exists():
                print(f"[{index}/{len(todo)}] {task_name} {arm} seed {seed}: kept ({path.name})", flush=True)
                continue
            train_items, held_out = held_out_items(task_name, args.held_out[task_name])
            run_start = time.perf_counter()
            print(f"[{index}/{len(todo)}] {task_name} {arm} seed {seed}: training {budget.steps} steps "
                  f"({(run_start - started) / 60:.1f} min elapsed)", flush=True)

            def step_done(step: int, steps: int = budget.steps, run_start: float = run_start) -> None:
                print(f"    step {step}/{steps} {time.perf_counter() - run_start:.0f} s", flush=True)

            result = training.train(arm, point_remote_terms(config, scorer.url), seed, budget, train_items, held_out,
                                    on_step=step_done, spec=training.TASKS[task_name])
            result.key = key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(asdict(result), indent=1))
            shown = ", ".join(f"{k} {v:.1%}" for k, v in result.metrics.items())
            print(f"    done in {result.seconds / 60:.1f} min: {shown}", flush=True)
    if args.before:
        for task_name in args.tasks:
            before(args.out, task_name, args.held_out[task_name])


def before(out: Path, task_name: str, held_out: int) -> dict[str, float]:
    """The base model's held-out metrics (kept in ``out``)."""
    from examples.grpo import cache, training
    from examples.grpo import model as lm

    spec = training.TASKS[task_name]
    key = cache.run_key({"components": {}}, {"task": task_name, "held_out": held_out, "before": True})
    path = out / task_name / f"before_{key}.json"
    if path.exists():
        return json.loads(path.read_text())["metrics"]
    print(f"{task_name}: the base model on {held_out} held-out items ...", flush=True)
    _, items = held_out_items(task_name, held_out)
    model, tokenizer = lm.load()
    metrics, replies = training.held_out_metrics(model, tokenizer, items, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"metrics": metrics, "replies": replies}, indent=1))
    return metrics


def load_runs(out: Path, task_name: str, seeds: list[int], steps: int, held_out: int) -> list[Any]:
    from examples.grpo import cache, training

    runs = []
    for seed in seeds:
        for arm in ARMS:
            config, _, run_settings = settings(task_name, arm, seed, steps, held_out)
            path = run_path(out, task_name, arm, seed, cache.run_key(config, run_settings))
            if path.exists():
                runs.append(training.RunResult(**json.loads(path.read_text())))
    return runs


def report(args: argparse.Namespace) -> None:
    from examples.grpo import report as rep

    for task_name in args.tasks:
        runs = load_runs(args.out, task_name, args.seeds, args.steps, args.held_out[task_name])
        before_path = sorted((args.out / task_name).glob("before_*.json")) if (args.out / task_name).exists() else []
        base = json.loads(before_path[0].read_text())["metrics"] if before_path else None
        print(f"\n== {task_name}: {args.held_out[task_name]} held-out items, {args.steps} GRPO steps of "
              f"16 completions per run ==")
        print(rep.seed_table(runs, METRICS[task_name], ARMS, base))
        print(rep.interval_table(runs, METRICS[task_name], ARMS))
        print(rep.steps_to_reach(runs, METRICS[task_name][0], ARMS))
        if task_name == "arithmetic" and runs:
            print(events_table(runs, args.steps, args.held_out[task_name]))
        if task_name == "instructions" and runs:
            print(instruction_events_table(runs, args.held_out[task_name]))
        if runs:
            path = rep.plot_strict_curves(runs, METRICS[task_name], ARMS, args.out / f"{task_name}_curves.png",
                                          title=task_name)
            print(f"curves: {path}")


def events_table(runs: list[Any], steps: int, held_out: int) -> str:
    """Each arithmetic run's declared outcome events (examples/grpo/events.py) and their count per arm."""
    from examples.grpo import events
    from examples.grpo.scorer import ScorerProcess, point_remote_terms

    _, pairs = held_out_items("arithmetic", held_out)
    with ScorerProcess() as scorer:
        def classify(run: Any) -> tuple[Any, tuple[float, ...]]:
            config = point_remote_terms(settings("arithmetic", run.arm, run.seed, steps, held_out)[0], scorer.url)
            found = events.run_events(config, run.replies, pairs, steps)
            return found, (found.compliant, found.wrong_sum_in_form, found.paid_as_bare_answer)

        return _events_rows(runs, "declared events (held-out replies; 'paid' by the arm's own reward at its last step):",
                            ("compliant", "wrong sum in form", "paid as the bare answer, strict rejects"),
                            events.EVENTS, classify)


def instruction_events_table(runs: list[Any], held_out: int) -> str:
    """Each instructions run's declared events (examples/grpo/events.py) and their count per arm."""
    from examples.grpo import events

    _, prompts = held_out_items("instructions", held_out)

    def classify(run: Any) -> tuple[Any, tuple[float, ...]]:
        found = events.classify_instructions(run.replies, prompts)
        return found, (found.fragment, found.off_topic, found.empty)

    return _events_rows(runs, "declared events (held-out replies):",
                        ("under 8 words", "strict-passing off topic", "blank"), events.INSTRUCTION_EVENTS, classify)


def _events_rows(runs: list[Any], title: str, columns: tuple[str, ...], names: tuple[str, ...],
                 classify: Any) -> str:
    """A markdown table of each run's shares and events (``classify(run)`` gives both), then the count per arm."""
    lines = [title, "| seed | arm | " + " | ".join(columns) + " | events |", "|---" * (len(columns) + 3) + "|"]
    counts = {arm: dict.fromkeys(names, 0) for arm in ARMS}
    for run in sorted(runs, key=lambda r: (r.seed, ARMS.index(r.arm))):
        found, shares = classify(run)
        for name in found.events:
            counts[run.arm][name] += 1
        lines.append(f"| {run.seed} | {run.arm} | " + " | ".join(f"{v:.1%}" for v in shares) +
                     f" | {', '.join(found.events) or '-'} |")
    for arm in ARMS:
        n = sum(r.arm == arm for r in runs)
        lines.append(f"{arm}: " + ", ".join(f"{name} {count}/{n}" for name, count in counts[arm].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="arithmetic,instructions", help="comma-separated: arithmetic, instructions")
    parser.add_argument("--seeds", default="1,2,3,4,5,6")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--held-out-arithmetic", type=int, default=200)
    parser.add_argument("--held-out-instructions", type=int, default=32)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--before", action="store_true", help="also score the base model (after the runs)")
    parser.add_argument("--report", action="store_true", help="print the tables from saved runs; train nothing")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_grpo_tasks")
    args = parser.parse_args(argv)
    args.tasks = [t for t in args.tasks.split(",") if t]
    unknown = set(args.tasks) - set(METRICS)
    if unknown:
        parser.error(f"--tasks: unknown {', '.join(sorted(unknown))} (expected arithmetic, instructions)")
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    args.held_out = {"arithmetic": args.held_out_arithmetic, "instructions": args.held_out_instructions}
    if not args.report:
        train_all(args)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
