"""Recipe 5: ``rewardkit optimize`` tunes the composed reward of the GRPO demo against held-out scores.

Each evaluation trains a fresh LoRA on SmolLM2-135M-Instruct with the trial's reward (GRPO
through TRL, as the demo) and returns the held-out score, the mean of the strict compliance (replies
that are exactly one equation with the question's own operands) and the strict correctness (that
equation with the right sum) over questions never trained on: the task's own metric, never the
shaped reward. The trial's training seed comes from its evaluation seed, so the
optimizer's repeats pair. The remote term's scorer is started for each evaluation on 127.0.0.1.
``GRPO_STEPS`` sets the budget in GRPO steps (default 8), ``GRPO_HELD_OUT`` the held-out questions
(default 16). Run from the repository root (docs/optimization.md, "Recipe 5")::

    rewardkit optimize --study grpo --base examples/grpo/composed.yaml \\
        --search-space examples/grpo/space.yaml --objective examples.grpo.objective:grpo \\
        --storage runs/tune_grpo/journal.log --n-trials 1 --validate 1 --repeats 2 --seed 0
"""

from __future__ import annotations

import os
from typing import Any

from rewardkit.optimize import trial_seeds
from rewardkit.optimize.trial_context import record_cost

from .training import Budget

STEPS = int(os.environ.get("GRPO_STEPS", "8"))
HELD_OUT = int(os.environ.get("GRPO_HELD_OUT", "16"))


def grpo(config: dict[str, Any], trial: Any) -> float:
    """Held-out (compliance + correctness) / 2 after GRPO with ``config`` as the reward."""
    from . import model as lm
    from . import task, training
    from .scorer import ScorerProcess, point_remote_terms

    lm.set_threads(1)
    seed = trial_seeds(trial)[0] % 2**31
    budget = Budget(steps=STEPS)
    train_pairs, held_out = task.split(held_out=HELD_OUT)
    with ScorerProcess() as scorer:
        result = training.train("trial", point_remote_terms(config, scorer.url), seed, budget, train_pairs, held_out)
    trial.set_user_attr("held_out_compliance", result.compliance)
    trial.set_user_attr("held_out_correctness", result.correctness)
    record_cost(trial, STEPS * budget.prompts_per_step * budget.generations)  # completions generated
    return (result.compliance + result.correctness) / 2


grpo.directions = ("maximize",)
grpo.n_seeds = 1
grpo.full_cost = STEPS * Budget().prompts_per_step * Budget().generations  # a whole run's completions
