"""One GRPO run through TRL: the model, a task, a reward config, a seed and a budget of steps.

The reward goes to TRL as ``TRLRewardFunctions(composer).funcs`` (no features function: the
context is the prompt, the completion text and the dataset's columns), its weights as
``reward_weights`` and ``bind`` keeps them on the config's schedules at the trainer's step. Each
run returns its per-step log (every term's raw value, weight and contribution, as TRL logged them,
and the task's strict metrics on that step's sampled completions, ``strict/<metric>``) and its
held-out metrics after training (greedy replies to prompts it never saw).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from . import instructions
from . import model as lm
from . import task


@dataclass(frozen=True)
class Budget:
    """What a run may spend: GRPO steps of ``prompts_per_step x generations`` completions."""

    steps: int = 24
    prompts_per_step: int = 2
    generations: int = 8
    max_completion_tokens: int = 12
    learning_rate: float = 1e-3
    lora_rank: int = 8
    temperature: float = 0.7
    #: "none" (Dr. GRPO): advantages stay in reward units, so the config's weights keep their meaning; TRL's
    #: default ("group") divides by each group's spread, and a term that alone varies in a group (a few
    #: characters of brevity) then weighs as much as the format
    scale_rewards: str = "none"


@dataclass(frozen=True)
class Task:
    """What GRPO trains on and how its replies are scored: dataset columns for a list of items,
    the metrics of replies to them (strict ones first), and how long a reply may be."""

    name: str
    rows: Callable[[list[Any]], dict[str, list[Any]]]
    scores: Callable[[list[str], list[Any]], dict[str, float]]
    from_columns: Callable[[dict[str, list[Any]]], list[Any]]
    max_tokens: int


def _pairs_from_columns(columns: dict[str, list[Any]]) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in ops.split("|")) for ops in columns["operands"]]  # type: ignore[misc]


def _prompts_from_columns(columns: dict[str, list[Any]]) -> list[instructions.Prompt]:
    n = len(columns["types"])
    return [instructions.Prompt("", tuple(columns["types"][i].split("|")),
                                **{c: columns[c][i] for c in instructions.COLUMNS}) for i in range(n)]


ARITHMETIC = Task("arithmetic", task.rows, task.scores, _pairs_from_columns, max_tokens=12)
INSTRUCTIONS = Task("instructions", instructions.rows, instructions.scores, _prompts_from_columns, max_tokens=32)
TASKS = {t.name: t for t in (ARITHMETIC, INSTRUCTIONS)}


@dataclass
class RunResult:
    """A finished run: its log rows (one per step) and held-out metrics after training
    (``compliance`` and ``correctness`` are the arithmetic task's strict ones, 0 for other tasks)."""

    arm: str
    seed: int
    log: list[dict[str, float]] = field(default_factory=list)
    compliance: float = 0.0
    correctness: float = 0.0
    replies: list[str] = field(default_factory=list)
    seconds: float = 0.0
    task: str = "arithmetic"
    metrics: dict[str, float] = field(default_factory=dict)
    key: str = ""


def held_out_metrics(model: Any, tokenizer: Any, items: Sequence[Any], spec: Task = ARITHMETIC,
                     batch_size: int = 100) -> tuple[dict[str, float], list[str]]:
    """Greedy replies to the held-out items and the task's metrics on them."""
    replies = lm.generate(model, tokenizer, spec.rows(list(items))["prompt"], max_new_tokens=spec.max_tokens,
                          batch_size=batch_size)
    return spec.scores(replies, list(items)), replies


def held_out_scores(model: Any, tokenizer: Any, pairs: list[tuple[int, int]]) -> tuple[float, float, list[str]]:
    """Arithmetic held-out: strict compliance, strict correctness and the greedy replies."""
    metrics, replies = held_out_metrics(model, tokenizer, pairs, ARITHMETIC)
    return metrics["compliant"], metrics["correct"], replies


def _logging_strict_metrics(reward: Callable[..., Any], spec: Task) -> Callable[..., Any]:
    """``reward`` that also logs the task's metrics on the batch's sampled completions (``strict/<metric>``):
    the per-step curve of the very metric the held-out score reads, at no cost to training."""

    from rewardkit.integrations.trl import completion_text, is_async_reward

    def log(completions: list[Any], kwargs: dict[str, Any]) -> None:
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            items = spec.from_columns(kwargs)
            for name, value in spec.scores([completion_text(c) for c in completions], items).items():
                log_metric(f"strict/{name}", value)

    if is_async_reward(reward):  # a config with a remote term: TRL awaits the functions
        async def wrapped(prompts: list[Any], completions: list[Any], **kwargs: Any) -> Any:
            log(completions, kwargs)
            return await reward(prompts, completions, **kwargs)
    else:
        def wrapped(prompts: list[Any], completions: list[Any], **kwargs: Any) -> Any:  # type: ignore[misc]
            log(completions, kwargs)
            return reward(prompts, completions, **kwargs)

    wrapped.__name__ = wrapped.__qualname__ = reward.__name__
    return wrapped


def train(arm: str, config: dict[str, Any], seed: int, budget: Budget, train_pairs: list[Any],
          held_out: list[Any], on_step: Callable[[int], None] | None = None, spec: Task = ARITHMETIC) -> RunResult:
    """Train a fresh LoRA on the pretrained model with ``config``'s reward on ``spec``'s task (items
    ``train_pairs``); score it on ``held_out``."""
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewardkit import RewardComposer
    from rewardkit.integrations.trl import TRLRewardFunctions

    start = time.perf_counter()
    set_seed(seed)
    model, tokenizer = lm.load()
    composer = RewardComposer.from_dict(config, source=f"{arm} reward")
    # a config that transforms its total (an all-or-nothing clip) goes to TRL as one function
    rewards = TRLRewardFunctions(composer, per_term=not composer.spec.total_transforms)
    funcs = [_logging_strict_metrics(rewards.funcs[0], spec), *rewards.funcs[1:]]
    dataset = Dataset.from_dict(spec.rows(list(train_pairs)))

    class Progress(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if on_step is not None:
                on_step(state.global_step)

    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, seed=seed, max_steps=budget.steps, learning_rate=budget.learning_rate,
            per_device_train_batch_size=budget.prompts_per_step * budget.generations,
            num_generations=budget.generations, max_completion_length=budget.max_completion_tokens,
            reward_weights=rewards.reward_weights(), logging_steps=1, save_strategy="no", report_to=[],
            use_cpu=True, bf16=False, disable_tqdm=True, temperature=budget.temperature, beta=0.0,
            scale_rewards=budget.scale_rewards, gradient_checkpointing=False)  # 135M parameters: memory is no issue
        trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=dataset,
                              processing_class=tokenizer, peft_config=lm.lora_config(budget.lora_rank),
                              callbacks=[Progress()])
        trainer.remove_callback(PrinterCallback)  # the demo shows one progress bar, not TRL's log lines
        rewards.bind(trainer)
        try:
            trainer.train()
        finally:
            composer.close()  # the remote term's HTTP client and event loop
    log = [{k: float(v) for k, v in row.items() if isinstance(v, (int, float))}
           for row in trainer.state.log_history if "reward" in row]
    metrics, replies = held_out_metrics(trainer.model, tokenizer, held_out, spec)
    return RunResult(arm, seed, log, metrics.get("compliant", 0.0), metrics.get("correct", 0.0), replies,
                     time.perf_counter() - start, spec.name, metrics)
