"""Rollout storage: one PPO iteration's transitions from ``n_envs`` environments stepped in lockstep.

Besides the usual (obs, action, log-prob, value, reward, done) it keeps, per step, the value of
the final observation of an episode that was truncated there, so that GAE can bootstrap a time
limit instead of treating it as the end of the task.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


# ---- advantages (GAE) ------------------------------------------------------------------------------
def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    last_values: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimates and value targets over a rollout shaped ``(T, ...)``.

    ``values[t]`` is V(s_t); ``last_values`` is V of the observation after the last step.
    Where step t ends an episode by truncation, ``final_values[t]`` (the value of the episode's
    final observation) is the bootstrap: a time limit is not the end of the task. Termination
    bootstraps with zero. Either way the advantage recursion stops at the episode boundary.
    Returns ``(advantages, returns)`` with ``returns = advantages + values``.
    """
    if not 0.0 <= gamma <= 1.0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"gamma and lam must be in [0, 1], got gamma={gamma}, lam={lam}")
    shapes = {t.shape for t in (rewards, values, terminated, truncated, final_values)}
    if len(shapes) != 1 or last_values.shape != rewards.shape[1:]:
        raise ValueError(
            "rewards, values, terminated, truncated and final_values must share a shape (T, ...) and "
            f"last_values must be shaped like one step; got {[tuple(s) for s in shapes]} and {tuple(last_values.shape)}"
        )
    term = terminated.to(values.dtype)
    trunc = truncated.to(values.dtype) * (1.0 - term)
    done = torch.clamp(term + trunc, max=1.0)
    advantages = torch.zeros_like(values)
    running = torch.zeros_like(last_values, dtype=values.dtype)
    for t in range(rewards.shape[0] - 1, -1, -1):
        next_value = last_values if t == rewards.shape[0] - 1 else values[t + 1]
        bootstrap = (1.0 - done[t]) * next_value + trunc[t] * final_values[t]
        delta = rewards[t] + gamma * bootstrap - values[t]
        running = delta + gamma * lam * (1.0 - done[t]) * running
        advantages[t] = running
    return advantages, advantages + values


def paired_advantages(
    rewards: torch.Tensor, dones: torch.Tensor, envs_per_seed: int, gamma: float, values: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages against an input-dependent baseline from rollouts that share their arrivals.

    Envs ``k * envs_per_seed ... (k + 1) * envs_per_seed - 1`` replay the same episode seed (same
    arrivals, same slowdowns), so step ``t`` of each is the same request. Each env's discounted
    return-to-go at ``t`` is compared with the mean of its group partners' at ``t`` (leave one out):
    the arrival process, which no action controls, cancels (Mao et al., ICLR'19, "Variance
    reduction for reinforcement learning in input-driven environments"). With ``values`` (the
    critic's V(s_t), shaped like ``rewards``) the comparison is of residuals ``G - V``: the critic
    removes what the state (earlier decisions) explains, the partners what the shared arrivals do.
    Rollouts must hold whole episodes that end on the same steps in every env of a group. Returns
    ``(advantages, returns)`` shaped ``(T, n_envs)``; ``returns`` (the Monte-Carlo returns) are the
    critic's targets.
    """
    if rewards.dim() != 2 or dones.shape != rewards.shape:
        raise ValueError(f"rewards and dones must both be (T, n_envs), got {tuple(rewards.shape)} and {tuple(dones.shape)}")
    steps, n_envs = rewards.shape
    if envs_per_seed < 2 or n_envs % envs_per_seed:
        raise ValueError(f"envs_per_seed must be >= 2 and divide n_envs = {n_envs}, got {envs_per_seed}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if values is not None and values.shape != rewards.shape:
        raise ValueError(f"values must be shaped like rewards {tuple(rewards.shape)}, got {tuple(values.shape)}")
    groups = dones.reshape(steps, n_envs // envs_per_seed, envs_per_seed)
    if not bool((groups == groups[..., :1]).all()) or not bool(dones[-1].all()):
        raise ValueError("paired rollouts must end their episodes on the same steps in every env of a group, "
                         "and the rollout's last step must end an episode")
    # Monte-Carlo returns within each episode: GAE with zero values and lambda 1, episodes ending at ``dones``
    zeros = torch.zeros_like(rewards)
    returns, _ = compute_gae(rewards, zeros, dones, torch.zeros_like(dones), zeros[0], zeros, gamma, 1.0)
    residuals = returns - values if values is not None else returns
    grouped = residuals.reshape(steps, -1, envs_per_seed)
    partners = (grouped.sum(dim=-1, keepdim=True) - grouped) / (envs_per_seed - 1)
    return (grouped - partners).reshape(steps, n_envs), returns


@dataclass
class RolloutBatch:
    """Flattened rollout (``T * n_envs`` samples) ready for minibatching."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def select(self, idx: torch.Tensor) -> "RolloutBatch":
        """The samples at ``idx``."""
        return RolloutBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


class RolloutBuffer:
    """Fixed-size storage shaped ``(n_steps, n_envs, ...)`` filled one step at a time."""

    def __init__(self, n_steps: int, n_envs: int, obs_shape: tuple[int, ...]) -> None:
        if n_steps < 1 or n_envs < 1:
            raise ValueError(f"n_steps and n_envs must be >= 1, got {n_steps}, {n_envs}")
        self.n_steps, self.n_envs, self.obs_shape = n_steps, n_envs, tuple(obs_shape)
        shape = (n_steps, n_envs)
        self.obs = torch.zeros(shape + self.obs_shape)
        self.actions = torch.zeros(shape, dtype=torch.long)
        self.log_probs = torch.zeros(shape)
        self.values = torch.zeros(shape)
        self.rewards = torch.zeros(shape)
        self.terminated = torch.zeros(shape, dtype=torch.bool)
        self.truncated = torch.zeros(shape, dtype=torch.bool)
        self.final_values = torch.zeros(shape)
        self.advantages = torch.zeros(shape)
        self.returns = torch.zeros(shape)
        self.pos = 0

    @property
    def full(self) -> bool:
        return self.pos == self.n_steps

    def reset(self) -> None:
        """Start filling from the first step again (contents are overwritten)."""
        self.pos = 0

    def add(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        log_probs: torch.Tensor,
        values: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        final_values: torch.Tensor,
    ) -> None:
        """Store one step of every environment; ``final_values`` matter only where truncated."""
        if self.full:
            raise RuntimeError("rollout buffer is full; call compute_advantages() and reset()")
        t = self.pos
        self.obs[t] = obs
        self.actions[t] = actions
        self.log_probs[t] = log_probs
        self.values[t] = values
        self.rewards[t] = rewards
        self.terminated[t] = terminated
        self.truncated[t] = truncated
        self.final_values[t] = final_values
        self.pos += 1

    def _require_full(self) -> None:
        if not self.full:
            raise RuntimeError(f"rollout buffer holds {self.pos} of {self.n_steps} steps")

    def compute_advantages(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` with GAE; ``last_values`` = V(obs after the last step)."""
        self._require_full()
        self.advantages, self.returns = compute_gae(
            self.rewards, self.values, self.terminated, self.truncated, last_values, self.final_values, gamma, lam
        )

    def compute_paired_advantages(self, envs_per_seed: int, gamma: float, use_values: bool = False) -> None:
        """Fill ``advantages`` and ``returns`` with :func:`paired_advantages` (groups of envs sharing a seed)."""
        self._require_full()
        self.advantages, self.returns = paired_advantages(
            self.rewards, self.terminated | self.truncated, envs_per_seed, gamma, self.values if use_values else None
        )

    def batch(self) -> RolloutBatch:
        """All samples flattened over (time, env)."""
        n = self.n_steps * self.n_envs
        return RolloutBatch(
            obs=self.obs.reshape((n,) + self.obs_shape),
            actions=self.actions.reshape(n),
            log_probs=self.log_probs.reshape(n),
            values=self.values.reshape(n),
            advantages=self.advantages.reshape(n),
            returns=self.returns.reshape(n),
        )

    def action_shares(self, num_actions: int) -> list[float]:
        """Share of the rollout's actions that went to each replica."""
        counts = torch.bincount(self.actions[: self.pos].reshape(-1), minlength=num_actions).double()
        return (counts / counts.sum().clamp(min=1)).tolist()
