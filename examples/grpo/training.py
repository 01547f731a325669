"""One GRPO run through TRL: the model, a reward config, a seed and a budget of steps.

The reward goes to TRL as ``TRLRewardFunctions(composer).funcs`` (no features function: the
context is the prompt, the completion text and the ``reference`` column), its weights as
``reward_weights`` and ``bind`` keeps them on the config's schedules at the trainer's step. Each
run returns its per-step log (every term's raw value, weight and contribution, as TRL logged them)
and its held-out scores after training.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

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


@dataclass
class RunResult:
    """A finished run: its log rows (one per step) and held-out scores after training."""

    arm: str
    seed: int
    log: list[dict[str, float]] = field(default_factory=list)
    compliance: float = 0.0
    correctness: float = 0.0
    replies: list[str] = field(default_factory=list)
    seconds: float = 0.0


def held_out_scores(model: Any, tokenizer: Any, pairs: list[tuple[int, int]]) -> tuple[float, float, list[str]]:
    """Greedy replies to the held-out questions: fraction compliant, fraction correct, the replies."""
    messages = task.rows(pairs)["prompt"]
    replies = lm.generate(model, tokenizer, messages)
    compliance = sum(task.compliant(r) for r in replies) / len(pairs)
    correctness = sum(task.correct(r, a, b) for r, (a, b) in zip(replies, pairs, strict=True)) / len(pairs)
    return compliance, correctness, replies


def train(arm: str, config: dict[str, Any], seed: int, budget: Budget, train_pairs: list[tuple[int, int]],
          held_out: list[tuple[int, int]], on_step: Callable[[int], None] | None = None) -> RunResult:
    """Train a fresh LoRA on the pretrained model with ``config``'s reward; score it on ``held_out``."""
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
    rewards = TRLRewardFunctions(composer)
    dataset = Dataset.from_dict(task.rows(train_pairs))

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
        trainer = GRPOTrainer(model=model, reward_funcs=rewards.funcs, args=args, train_dataset=dataset,
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
    compliance, correctness, replies = held_out_scores(trainer.model, tokenizer, held_out)
    return RunResult(arm, seed, log, compliance, correctness, replies, time.perf_counter() - start)
