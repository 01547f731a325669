"""Training logs in TRL's format for the monitor's tests: what ``GRPOTrainer.log`` puts in ``log_history``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REWARD = """\
version: 1
components:
  proxy: {type: regex_match, params: {pattern: 'sure'}}
  strict: {type: answer_match, params: {mode: numeric}, weight: 0.0}
monitor:
  gold: strict
"""


def trl_log(step: int, proxy: float, strict: float, length: float = 8.0, zero_std: float = 0.1) -> dict[str, Any]:
    """One training log entry as TRL 1.x writes it (the keys GRPOTrainer.log and Trainer.log add)."""
    return {"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-3, "num_tokens": 1000.0 * step,
            "completions/mean_length": length, "completions/min_length": 2.0, "completions/max_length": 16.0,
            "completions/clipped_ratio": 0.1, "completions/mean_terminated_length": length,
            "completions/min_terminated_length": 2.0, "completions/max_terminated_length": 15.0,
            "rewards/proxy/mean": proxy, "rewards/proxy/std": 0.4, "rewards/strict/mean": strict,
            "rewards/strict/std": 0.3, "reward": proxy, "reward_std": 0.4, "frac_reward_zero_std": zero_std,
            "kl": 0.0, "entropy": 1.2, "clip_ratio/region_mean": 0.0, "epoch": step / 20, "step": step}


def hacked_history(n: int = 20) -> list[dict[str, Any]]:
    """The proxy climbs from step 6 while the gold term stays flat."""
    return [trl_log(s, proxy=0.2 if s < 6 else min(1.0, 0.2 + 0.08 * (s - 5)), strict=0.1) for s in range(1, n + 1)]


def honest_history(n: int = 20) -> list[dict[str, Any]]:
    """The proxy and the gold term climb together."""
    return [trl_log(s, proxy=0.2 + 0.02 * s, strict=0.1 + 0.02 * s) for s in range(1, n + 1)]


def write_state(path: Path, history: list[dict[str, Any]]) -> Path:
    """A trainer_state.json written by transformers' own TrainerState, with a final summary entry."""
    from transformers import TrainerState

    state = TrainerState(global_step=len(history), max_steps=len(history), logging_steps=1)
    state.log_history = [*history, {"train_runtime": 12.5, "train_samples_per_second": 2.0, "train_loss": 0.01,
                                    "epoch": 1.0, "step": len(history)}]
    state.save_to_json(str(path))
    return path


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def completion_rows(history: list[dict[str, Any]], *, accepted_when_paid: bool = False, per_step: int = 8,
                    prompt_key: str = "prompt") -> list[dict[str, Any]]:
    """The completions behind ``history`` (sampled at global_step ``step - 1``, as TRL logs them at
    ``step``): ``round(per_step * proxy mean)`` of each step's rows say "sure" and are paid 1. Those
    are rejected by gold (strict 0: the hack), or accepted (strict 1) with ``accepted_when_paid``."""
    rows = []
    for entry in history:
        paid = round(per_step * entry["rewards/proxy/mean"])
        for i in range(per_step):
            hit = i < paid
            strict = 1.0 if hit and accepted_when_paid else 0.0
            rows.append({"step": entry["step"] - 1, prompt_key: f"What is {i} + 2?",
                         "completion": f"sure, {i} and {entry['step']}" if hit else f"no {i}",
                         "terms": {"proxy": 1.0 if hit else 0.0, "strict": strict}, "total": 1.0 if hit else 0.0})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
