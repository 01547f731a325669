"""One GRPO run of SmolLM2-135M-Instruct on one of this folder's rewards, keeping what the monitor reads.

Reuses the GRPO demo's model, LoRA and task (``examples.grpo``) but keeps, in ``OUT/<reward>_seed<k>/``:
``trainer_state.json`` (TRL's ``log_history``: ``rewards/<term>/mean``, ``reward``,
``completions/mean_length``, ``frac_reward_zero_std``, and ``monitor/distinct_frac``, the fraction of
distinct completions per group) and ``completions.jsonl`` (every sampled completion with its step,
question and term values), which is how a hack's onset is found by reading.

    python -m examples.monitor.train --reward length --seed 1 --steps 14
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REWARDS = ("lenient", "length", "judge", "honest", "partial")


def reward_config(name: str) -> dict[str, Any]:
    """The reward config ``HERE/<name>.yaml`` (its ``monitor:`` section included)."""
    from rewardkit.config import load_yaml

    return load_yaml(HERE / f"{name}.yaml")


def run(reward: str, seed: int, steps: int, out: Path, *, learning_rate: float = 4e-3, generations: int = 4,
        prompts_per_step: int = 2, max_tokens: int = 14, callbacks: list[Any] | None = None) -> Path:
    """Train a fresh LoRA with ``reward`` for ``steps`` GRPO steps; return the run's folder."""
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig, GRPOTrainer

    from examples.grpo import model as lm
    from examples.grpo import task
    from rewardkit import RewardComposer
    from rewardkit.integrations.trl import TRLRewardFunctions
    from rewardkit.monitor import Monitor
    from rewardkit.monitor.trl_callback import MonitorCallback, with_diversity

    from . import terms  # noqa: F401 - registers strict_equation, reply_length, stub_judge

    folder = out / f"{reward}_seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"reward": reward, "seed": seed, "steps": steps,
                                                 "learning_rate": learning_rate, "generations": generations,
                                                 "prompts_per_step": prompts_per_step, "max_tokens": max_tokens}))
    set_seed(seed)
    model, tokenizer = lm.load()
    config = reward_config(reward)
    composer = RewardComposer.from_dict(config, source=f"{reward}.yaml")
    rewards = TRLRewardFunctions(composer)
    train_pairs, _ = task.split(train=max(64, steps * prompts_per_step))
    dataset = Dataset.from_dict(task.rows(train_pairs))
    record = (folder / "completions.jsonl").open("w", encoding="utf-8")

    def keep(prompts: list[Any], completions: list[Any], **kwargs: Any) -> None:
        """Write the batch's completions and term values (the composer's cached output)."""
        from rewardkit.integrations.trl import completion_text, prompt_text

        out_ = rewards.evaluate(prompts, completions, **kwargs)
        step = int(kwargs["trainer_state"].global_step)
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            values = {name: float(out_.terms[name].raw[i]) for name in rewards.term_names}
            record.write(json.dumps({"step": step, "question": prompt_text(p), "completion": completion_text(c),
                                     "terms": values}) + "\n")
        record.flush()

    funcs = with_diversity(rewards.funcs, generations, on_batch=keep)
    started = time.perf_counter()

    class Progress(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if logs and "reward" in logs:
                shown = {k: round(v, 3) for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")}
                alerts = [k for k in logs if k.startswith("monitor/alert/") and not k.endswith("/began")]
                print(f"[{reward} seed {seed}] step {state.global_step}/{steps} ({time.perf_counter() - started:.0f} s) "
                      f"reward {logs['reward']:.3f} {shown}{' ALERT ' + ', '.join(alerts) if alerts else ''}", flush=True)

    # the monitor watches the run as it trains (it only logs: stop_on=None), so trainer_state.json holds its
    # alerts beside TRL's metrics; `rewardkit audit` on that file must find the same ones
    watch = MonitorCallback(Monitor.from_spec(composer.spec), stop_on=None)
    args = GRPOConfig(
        output_dir=str(folder / "trainer"), seed=seed, max_steps=steps, learning_rate=learning_rate,
        per_device_train_batch_size=prompts_per_step * generations, num_generations=generations,
        max_completion_length=max_tokens, reward_weights=rewards.reward_weights(), logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, bf16=False, disable_tqdm=True, temperature=0.7, beta=0.0,
        gradient_checkpointing=False)
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=lm.lora_config(8),
                          callbacks=[watch, Progress(), *(callbacks or [])])
    rewards.bind(trainer)
    try:
        trainer.train()
    finally:
        record.close()
        composer.close()
        trainer.state.save_to_json(str(folder / "trainer_state.json"))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.monitor.train", description=__doc__.splitlines()[0])
    parser.add_argument("--reward", choices=REWARDS, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--learning-rate", type=float, default=4e-3)
    parser.add_argument("--out", type=Path, default=Path("runs/monitor"))
    parser.add_argument("--prompts-per-step", type=int, default=2,
                        help="prompts per GRPO step, each sampled 4 times (the sixth set used 4: 16 completions a step)")
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args(argv)
    from examples.grpo import model as lm

    lm.set_threads(args.torch_threads)
    if args.prompts_per_step < 1:
        parser.error(f"--prompts-per-step: expected a positive integer, got {args.prompts_per_step}")
    folder = run(args.reward, args.seed, args.steps, args.out, learning_rate=args.learning_rate,
                 prompts_per_step=args.prompts_per_step)
    print(f"wrote {folder}/trainer_state.json and completions.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
