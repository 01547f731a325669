"""PPO pieces: GAE with truncation bootstrapping, the clipped losses, one update, and controllers.

Everything here works on tensors handed in by the trainer; nothing reads configs or touches
environments, so each piece is testable against hand-computed values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from rewardkit.normalizers import RunningMeanStd

from .rollout import RolloutBatch


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """1 - Var(returns - values) / Var(returns); NaN when the returns do not vary."""
    var = torch.var(returns)
    if var.item() == 0.0 or returns.numel() < 2:
        return float("nan")
    return float(1.0 - torch.var(returns - values) / var)


def categorical_kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Exact KL(p || q) per row between categorical distributions given by logits."""
    log_p = torch.log_softmax(logits_p, dim=-1)
    log_q = torch.log_softmax(logits_q, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


# ---- losses ------------------------------------------------------------------------------------
@dataclass
class PPOLoss:
    """The parts of the PPO objective for one minibatch (tensors; the diagnostics detached)."""

    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit std (left centred only when there is a single element)."""
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + eps)


def ppo_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    clip_coef: float,
    clip_value: float | None = None,
    normalize_advantages: bool = True,
) -> PPOLoss:
    """Clipped surrogate policy loss, (optionally clipped) value loss and diagnostics.

    Policy loss ``mean(max(-A r, -A clip(r, 1-c, 1+c)))``; value loss
    ``0.5 mean((V - R)^2)`` or, with ``clip_value``, the larger of that and the error of the
    value clipped to ``old_values +- clip_value``. ``approx_kl = mean((r - 1) - log r)``
    (an unbiased, non-negative estimator of KL(old || new)); ``clip_fraction`` is the share of
    samples whose ratio left ``[1-c, 1+c]``.
    """
    if advantages.numel() == 0:
        raise ValueError("empty minibatch")
    adv = normalize(advantages) if normalize_advantages else advantages
    log_ratio = new_log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef))
    policy_loss = surrogate.mean()
    if clip_value is None:
        value_loss = 0.5 * ((new_values - returns) ** 2).mean()
    else:
        clipped = old_values + torch.clamp(new_values - old_values, -clip_value, clip_value)
        value_loss = 0.5 * torch.max((new_values - returns) ** 2, (clipped - returns) ** 2).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return PPOLoss(policy_loss, value_loss, entropy.mean(), approx_kl, clip_fraction)


# ---- the update ------------------------------------------------------------------------------
@dataclass
class UpdateSettings:
    """Hyperparameters of one PPO update (the coefficients already evaluated for this update)."""

    n_epochs: int
    minibatch_size: int
    clip_coef: float
    vf_coef: float
    ent_coef: float
    clip_value: float | None = None
    max_grad_norm: float | None = 0.5
    normalize_advantages: bool = True
    target_kl: float | None = None
    kl_coef: float = 0.0


def minibatch_indices(n: int, size: int, generator: torch.Generator | None) -> Iterator[torch.Tensor]:
    """A random permutation of ``range(n)`` cut into chunks of ``size`` (the last may be short)."""
    perm = torch.randperm(n, generator=generator)
    for start in range(0, n, size):
        yield perm[start : start + size]


def ppo_update(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: RolloutBatch,
    settings: UpdateSettings,
    reference: nn.Module | None = None,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Run the epochs of minibatch gradient steps on one rollout; return mean diagnostics.

    With a ``reference`` policy and ``settings.kl_coef > 0`` the loss adds
    ``kl_coef * KL(pi || pi_ref)`` (exact, per state), which keeps a behaviour-cloned start from
    being forgotten while the critic is still poor. With ``target_kl``, the update stops (without
    stepping) at the first minibatch whose approximate KL to the rollout policy exceeds
    ``1.5 * target_kl``; ``epochs`` in the result is then fractional.
    """
    sums: dict[str, float] = {}
    grad_steps = 0
    grad_norms: list[float] = []
    stopped = False
    steps_per_epoch = math.ceil(len(batch) / settings.minibatch_size)
    for _ in range(settings.n_epochs):
        for idx in minibatch_indices(len(batch), settings.minibatch_size, generator):
            mb = batch.select(idx)
            log_prob, entropy, values, logits = policy.evaluate_actions(mb.obs, mb.actions)
            parts = ppo_loss(
                log_prob, mb.log_probs, mb.advantages, values, mb.values, mb.returns, entropy,
                settings.clip_coef, settings.clip_value, settings.normalize_advantages,
            )
            if settings.target_kl is not None and parts.approx_kl.item() > 1.5 * settings.target_kl:
                stopped = True
                break
            loss = parts.policy_loss + settings.vf_coef * parts.value_loss - settings.ent_coef * parts.entropy
            kl_ref = torch.zeros(())
            if reference is not None and settings.kl_coef > 0:
                with torch.no_grad():
                    ref_logits = reference.logits(mb.obs)
                kl_ref = categorical_kl(logits, ref_logits).mean()
                loss = loss + settings.kl_coef * kl_ref
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if settings.max_grad_norm is not None:
                norm = nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
            else:
                norm = torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in policy.parameters() if p.grad is not None))
            grad_norms.append(float(norm))
            optimizer.step()
            metrics = {
                "policy_loss": parts.policy_loss.item(),
                "value_loss": parts.value_loss.item(),
                "entropy": parts.entropy.item(),
                "approx_kl": parts.approx_kl.item(),
                "clip_fraction": parts.clip_fraction.item(),
                "kl_ref": kl_ref.item(),
                "loss": loss.item(),
            }
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + value
            grad_steps += 1
        if stopped:
            break
    out = {key: value / max(grad_steps, 1) for key, value in sums.items()}
    out["grad_norm"] = sum(grad_norms) / max(len(grad_norms), 1)
    out["grad_steps"] = float(grad_steps)
    out["epochs"] = grad_steps / steps_per_epoch
    out["early_stop"] = float(stopped)
    return out


# ---- controllers and scalers ---------------------------------------------------------------------
class EntropyController:
    """Holds the policy's entropy near a target by multiplicative adjustments after each update.

    ``target`` is a fraction of the maximum entropy log(N) so that it means the same for any
    number of replicas. In ``coef`` mode the scheduled entropy coefficient is multiplied by
    ``scale``; in ``temperature`` mode the policy's softmax temperature is. Either way the
    multiplier moves by ``exp(rate * (target - measured) / target)`` and stays within ``bounds``.
    """

    def __init__(self, target: float, mode: str = "coef", rate: float = 0.1, bounds: tuple[float, float] = (0.01, 100.0)) -> None:
        if not 0.0 < target <= 1.0:
            raise ValueError(f"target must be a fraction of log(N) in (0, 1], got {target}")
        if mode not in ("coef", "temperature"):
            raise ValueError(f"mode must be 'coef' or 'temperature', got {mode!r}")
        if rate <= 0 or not 0 < bounds[0] <= 1.0 <= bounds[1]:
            raise ValueError(f"rate must be > 0 and bounds (low <= 1 <= high) positive, got {rate}, {bounds}")
        self.target, self.mode, self.rate, self.bounds = target, mode, rate, bounds
        self.scale = 1.0

    def update(self, entropy: float, num_actions: int) -> float:
        """Move the multiplier toward the target given the measured mean entropy; return it."""
        if num_actions < 2 or not math.isfinite(entropy):
            return self.scale
        measured = entropy / math.log(num_actions)
        factor = math.exp(self.rate * (self.target - measured) / self.target)
        self.scale = min(self.bounds[1], max(self.bounds[0], self.scale * factor))
        return self.scale

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])


class RewardScaler:
    """Divides rewards by the running std of the discounted return (no mean subtraction).

    Keeps one discounted-return accumulator per environment, reset where an episode ended; the
    statistics are rewardkit's :class:`~rewardkit.normalizers.RunningMeanStd`, the same ones the
    ``return_std`` normalizer of a reward config keeps.
    """

    def __init__(self, n_envs: int, gamma: float, epsilon: float = 1e-8) -> None:
        self.gamma, self.epsilon = gamma, epsilon
        self.returns = torch.zeros(n_envs, dtype=torch.float64)
        self.rms = RunningMeanStd()

    def __call__(self, rewards: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scale one step's rewards ``(n_envs,)``; ``done`` marks episodes that ended at this step."""
        self.returns = self.returns * self.gamma + rewards.double()
        self.rms.update(self.returns.numpy())
        self.returns = torch.where(done.bool(), torch.zeros_like(self.returns), self.returns)
        return (rewards.double() / math.sqrt(self.rms.var + self.epsilon)).to(rewards.dtype)

    def scale_rollout(self, rewards: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scale a whole rollout ``(T, n_envs)`` step by step, as if each step came in order.

        For rewards that are known only once the rollout is complete (per-request credit).
        """
        return torch.stack([self(rewards[t], done[t]) for t in range(rewards.shape[0])]) if len(rewards) else rewards

    @property
    def std(self) -> float:
        return math.sqrt(self.rms.var + self.epsilon)

    def state_dict(self) -> dict[str, Any]:
        return {"returns": self.returns.tolist(), "rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns = torch.tensor(state["returns"], dtype=torch.float64)
        self.rms.load_state_dict(state["rms"])
