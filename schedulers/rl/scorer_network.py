"""Permutation-equivariant actor-critic for request routing: one MLP scores every replica row.

The actor applies the same MLP to each replica's row (its features plus the arriving request's)
and reads one logit per row, so relabelling replicas relabels the action probabilities and the
network works for any number of replicas. The critic pools row embeddings (mean and max over
replicas) before its MLP, so the value does not depend on replica order either.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from ..bounds import MAX_FEATURES, MAX_HIDDEN_SIZE, MAX_LAYERS

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def _linear(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    """Linear layer with orthogonal weights of the given gain and zero bias."""
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class NonFiniteWeightsError(ValueError):
    """A policy's weights hold NaN or inf: it would answer every request with an error."""


def check_finite_weights(state: Any) -> None:
    """Every tensor of a policy's ``state_dict`` finite; :class:`NonFiniteWeightsError` naming the
    first that is not (checked on every save and every load of a checkpoint)."""
    if not isinstance(state, dict):
        return
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise NonFiniteWeightsError(f"policy_state.{name}: expected finite weights, got NaN or inf (training "
                                        "diverged: a non-finite reward or loss?)")


def check_policy_sizes(n_features: Any, hidden_sizes: Any, critic_hidden_sizes: Any) -> None:
    """Refuse sizes beyond :mod:`schedulers.bounds` before any layer is allocated (a checkpoint
    declaring 200,000-wide layers would otherwise take seconds and gigabytes to fail)."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(n_features) or not 1 <= n_features <= MAX_FEATURES:
        raise ValueError(f"n_features: expected an integer from 1 to {MAX_FEATURES} (the limit), got {n_features!r}")
    for name, sizes, allow_empty in (("hidden_sizes", hidden_sizes, False), ("critic_hidden_sizes", critic_hidden_sizes, True)):
        ok = (isinstance(sizes, (list, tuple)) and (allow_empty or len(sizes) > 0) and len(sizes) <= MAX_LAYERS
              and all(is_int(h) and 1 <= h <= MAX_HIDDEN_SIZE for h in sizes))
        if not ok:
            shown = list(sizes) if isinstance(sizes, (list, tuple)) and len(sizes) <= 16 else type(sizes).__name__
            if isinstance(sizes, (list, tuple)) and len(sizes) > MAX_LAYERS:
                shown = f"{len(sizes)} layers"
            raise ValueError(f"{name}: expected a list of integers from 1 to {MAX_HIDDEN_SIZE}, at most "
                             f"{MAX_LAYERS} layers (the limits), got {shown}")


def _mlp(in_dim: int, sizes: Sequence[int], activation: str) -> nn.Sequential:
    """Hidden layers (orthogonal init, gain sqrt(2)) each followed by the activation."""
    layers: list[nn.Module] = []
    for size in sizes:
        layers += [_linear(in_dim, size, math.sqrt(2.0)), _ACTIVATIONS[activation]()]
        in_dim = size
    return nn.Sequential(*layers)


class PolicyStep(NamedTuple):
    """What :meth:`ReplicaScorerPolicy.act` returns (tensors; scalars for an unbatched input)."""

    action: torch.Tensor
    log_prob: torch.Tensor
    value: torch.Tensor


class ReplicaScorerPolicy(nn.Module):
    """Actor-critic over ``(batch, num_replicas, n_features)`` observations.

    ``temperature`` divides the logits (a buffer, so it is saved with the weights); the score
    head starts with gain 0.01 so that the first policy is close to uniform.
    """

    def __init__(
        self,
        n_features: int,
        hidden_sizes: Sequence[int] = (64, 64),
        critic_hidden_sizes: Sequence[int] = (64,),
        activation: str = "tanh",
        shared_encoder: bool = False,
        temperature: float = 1.0,
        linear_scores: bool = False,
    ) -> None:
        super().__init__()
        check_policy_sizes(n_features, hidden_sizes, critic_hidden_sizes)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.kwargs: dict[str, Any] = {
            "n_features": int(n_features),
            "hidden_sizes": [int(h) for h in hidden_sizes],
            "critic_hidden_sizes": [int(h) for h in critic_hidden_sizes],
            "activation": activation,
            "shared_encoder": bool(shared_encoder),
            "temperature": float(temperature),
            "linear_scores": bool(linear_scores),
        }
        embed = int(hidden_sizes[-1])
        self.actor_encoder = _mlp(n_features, hidden_sizes, activation)
        self.score_head = _linear(embed, 1, 0.01)
        # a linear term on the raw row (zero at init): scores stay proportional to a feature such as
        # the expected wait over its whole range, where the tanh encoder saturates under heavy load
        self.linear_score = _linear(n_features, 1, 0.0) if linear_scores else None
        self.critic_encoder = self.actor_encoder if shared_encoder else _mlp(n_features, hidden_sizes, activation)
        self.critic_mlp = _mlp(2 * embed, critic_hidden_sizes, activation)
        critic_out = int(critic_hidden_sizes[-1]) if critic_hidden_sizes else 2 * embed
        self.value_head = _linear(critic_out, 1, 1.0)
        self.register_buffer("_temperature", torch.tensor(1.0))
        self.temperature = temperature

    # ---- temperature ----------------------------------------------------------------------
    @property
    def temperature(self) -> float:
        """Softmax temperature: logits are divided by it (1 = untouched)."""
        return float(self._temperature)

    @temperature.setter
    def temperature(self, value: float) -> None:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"temperature must be a positive finite number, got {value!r}")
        self._temperature.fill_(float(value))

    # ---- forward passes -------------------------------------------------------------------
    @staticmethod
    def as_tensor(obs: Any, check_finite: bool = True) -> torch.Tensor:
        """Observation(s) as a float32 tensor shaped ``(batch, replicas, features)``."""
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32) if not isinstance(obs, torch.Tensor) else obs)
        x = x.to(torch.float32)
        if x.dim() == 2:
            x = x.unsqueeze(0)
        if x.dim() != 3:
            raise ValueError("observation must be (replicas, features) or (batch, replicas, features), "
                             f"got shape {tuple(x.shape)}")
        if check_finite and not bool(torch.isfinite(x).all()):
            raise ValueError("observation contains NaN or infinite values")
        return x

    def scores(self, obs: torch.Tensor) -> torch.Tensor:
        """Untempered per-replica scores, shape ``(batch, replicas)``."""
        scores = self.score_head(self.actor_encoder(obs))
        if self.linear_score is not None:
            scores = scores + self.linear_score(obs)
        return scores.squeeze(-1)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Action logits (scores divided by the temperature), shape ``(batch, replicas)``."""
        return self.scores(obs) / self._temperature

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State value, shape ``(batch,)``; invariant to the order of replicas."""
        h = self.critic_encoder(obs)
        pooled = torch.cat([h.mean(dim=-2), h.amax(dim=-2)], dim=-1)
        return self.value_head(self.critic_mlp(pooled)).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, value)`` for a batch of observations."""
        return self.logits(obs), self.value(obs)

    def distribution(self, obs: torch.Tensor) -> Categorical:
        """Categorical distribution over replicas."""
        return Categorical(logits=self.logits(obs))

    def evaluate_actions(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value, logits)`` of given actions, for the PPO update."""
        logits, value = self.forward(obs)
        dist = Categorical(logits=logits)
        return dist.log_prob(actions), dist.entropy(), value, dist.logits

    @torch.no_grad()
    def act(
        self,
        obs: Any,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        check_finite: bool = True,
    ) -> PolicyStep:
        """Choose replicas for one observation ``(R, F)`` or a batch ``(B, R, F)``.

        Deterministic mode takes the arg-max (lowest index on ties); otherwise samples, from
        ``generator`` when given so that evaluation can be seeded independently of training.
        """
        unbatched = (obs.dim() if isinstance(obs, torch.Tensor) else np.ndim(obs)) == 2
        x = self.as_tensor(obs, check_finite)
        logits, value = self.forward(x)
        dist = Categorical(logits=logits)
        if deterministic:
            action = torch.argmax(logits, dim=-1)
        else:
            action = torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)
        log_prob = dist.log_prob(action)
        if unbatched:
            return PolicyStep(action[0], log_prob[0], value[0])
        return PolicyStep(action, log_prob, value)

    # ---- persistence ----------------------------------------------------------------------
    def to_checkpoint(self) -> dict[str, Any]:
        """Constructor arguments and weights: enough to rebuild the policy without the config."""
        kwargs = dict(self.kwargs, temperature=self.temperature)
        state = self.state_dict()
        check_finite_weights(state)  # a checkpoint that loads must be one that routes
        return {"policy_kwargs": kwargs, "policy_state": state}

    @classmethod
    def from_checkpoint_dict(cls, data: dict[str, Any]) -> "ReplicaScorerPolicy":
        """Rebuild from :meth:`to_checkpoint` output (or a full training checkpoint); the declared
        sizes are checked against the limits before the network is built."""
        kwargs = data["policy_kwargs"]
        if not isinstance(kwargs, dict):
            raise ValueError(f"policy_kwargs: expected a mapping, got {type(kwargs).__name__}")
        known = {"n_features", "hidden_sizes", "critic_hidden_sizes", "activation", "shared_encoder", "temperature",
                 "linear_scores"}
        unknown = sorted(str(k) for k in kwargs if k not in known)
        if unknown:
            raise ValueError(f"policy_kwargs: unknown key(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}")
        check_policy_sizes(kwargs.get("n_features"), kwargs.get("hidden_sizes", (64, 64)),
                           kwargs.get("critic_hidden_sizes", (64,)))
        policy = cls(**kwargs)
        check_finite_weights(data["policy_state"])
        policy.load_state_dict(data["policy_state"])
        return policy
