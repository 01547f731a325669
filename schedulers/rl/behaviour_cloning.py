"""Behaviour cloning: fit the policy to heuristic demonstrations before PPO (cross-entropy on the
heuristic's actions, optionally the critic on the demonstrations' TD(lambda) returns).

The trainer collects the demonstrations (it owns the envs); this module only learns from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from .scorer_network import ReplicaScorerPolicy
from .ppo import explained_variance, minibatch_indices
from .rollout import compute_gae


@dataclass
class Demos:
    """One heuristic's demonstration block, shaped ``(T, n_envs, ...)``."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    last_obs: torch.Tensor


@torch.no_grad()
def value_targets(policy: ReplicaScorerPolicy, demos: Demos, gamma: float, gae_lambda: float) -> torch.Tensor:
    """TD(lambda) targets for the demonstrations under the current critic (truncation bootstrapped)."""
    T, E = demos.actions.shape
    flat = lambda x: x.reshape((T * E, *demos.obs.shape[2:]))  # noqa: E731
    values = policy.value(flat(demos.obs)).reshape(T, E)
    finals = policy.value(flat(demos.final_obs)).reshape(T, E)
    last = policy.value(demos.last_obs)
    _, returns = compute_gae(demos.rewards, values, demos.terminated, demos.truncated, last, finals, gamma, gae_lambda)
    return returns


def fit_to_demonstrations(
    policy: ReplicaScorerPolicy,
    blocks: list[Demos],
    bc: dict[str, Any],
    ppo: dict[str, Any],
    generator: torch.Generator,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Train ``policy`` on the demonstrations for ``bc["epochs"]`` epochs; one metrics row per epoch.

    ``bc`` and ``ppo`` are the config sections (``adam_eps``, ``vf_coef`` and ``max_grad_norm``
    come from ``ppo``); ``generator`` shuffles the minibatches; ``log`` gets one progress line per epoch.
    """
    obs = torch.cat([b.obs.reshape((-1, *b.obs.shape[2:])) for b in blocks])
    actions = torch.cat([b.actions.reshape(-1) for b in blocks])
    optimizer = torch.optim.Adam(policy.parameters(), lr=bc["learning_rate"], eps=ppo["adam_eps"])
    rows: list[dict[str, Any]] = []
    for epoch in range(1, bc["epochs"] + 1):
        targets = (
            torch.cat([value_targets(policy, b, ppo["gamma"], ppo["gae_lambda"]).reshape(-1) for b in blocks])
            if bc["value_pretrain"] else None
        )
        sums = {"ce_loss": 0.0, "value_loss": 0.0, "accuracy": 0.0}
        n = 0
        for idx in minibatch_indices(len(actions), bc["minibatch_size"], generator):
            logits = policy.logits(obs[idx])
            ce = torch.nn.functional.cross_entropy(logits, actions[idx])
            loss = ce
            vloss = torch.zeros(())
            if targets is not None:
                vloss = 0.5 * ((policy.value(obs[idx]) - targets[idx]) ** 2).mean()
                loss = loss + ppo["vf_coef"] * vloss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if ppo["max_grad_norm"] is not None:
                torch.nn.utils.clip_grad_norm_(policy.parameters(), ppo["max_grad_norm"])
            optimizer.step()
            k = len(idx)
            sums["ce_loss"] += ce.item() * k
            sums["value_loss"] += vloss.item() * k
            sums["accuracy"] += (logits.argmax(-1) == actions[idx]).float().sum().item()
            n += k
        row = {"epoch": epoch, **{key: v / n for key, v in sums.items()}}
        if targets is not None:
            with torch.no_grad():
                row["explained_variance"] = explained_variance(policy.value(obs), targets)
        rows.append(row)
        if log is not None:
            log(f"[bc] epoch {epoch}/{bc['epochs']} ce {row['ce_loss']:.4f} acc {row['accuracy']:.3f} "
                f"value_loss {row['value_loss']:.4f}")
    return rows
