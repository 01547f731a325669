"""``PPORouter``: a trained :class:`ReplicaScorerPolicy` behind the routing seam (:class:`~schedulers.routing.policy.Policy`).

Loads ``policy.pt``, ``bc_policy.pt`` or any training checkpoint written by
:mod:`schedulers.train`; ``decide(snapshot, prompt_tokens, rows=...)`` picks a replica from the
observation rows (built with ``observation``, the settings the checkpoint was trained with),
``reset(seed)`` reseeds the sampler so that stochastic evaluation is reproducible per evaluation
seed. ``make_policy("ppo", checkpoint=path)`` builds one (:class:`~schedulers.routing.policies.learned.PPOPolicy`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from rewardkit.errors import ConfigError
from rewardkit.params import Param, validate_schema

from .checkpoint_file import CheckpointError, one_line, read_checkpoint
from .numpy_scorer import NumpyScorer
from .scorer_network import ReplicaScorerPolicy
from ..bounds import MIN_OBSERVATION_SCALE
from ..routing.observation import FEATURE_NAMES, PREFIX_FEATURES
from ..routing.policies.learned import PPOPolicy
from ..routing.snapshot import ReplicaSnapshot
from ..shared.observation_config import ObservationConfig


def observation_config_from_checkpoint(data: dict[str, Any]) -> ObservationConfig:
    """The observation settings a checkpoint was trained with.

    Checkpoints record them (``observation``); older ones do not, and were trained on the default
    settings without the prefix feature, which their ``n_features`` confirms.
    """
    saved = data.get("observation")
    n_features = int(data["policy_kwargs"].get("n_features", len(FEATURE_NAMES)))
    if not (isinstance(saved, dict) and saved):
        return ObservationConfig(prefix_match=n_features == len(FEATURE_NAMES) + len(PREFIX_FEATURES))
    config = parse_observation_config(saved, strict=False)
    columns = len(FEATURE_NAMES) + (len(PREFIX_FEATURES) if config.prefix_match else 0)
    if n_features != columns:
        raise ValueError(f"policy_kwargs.n_features: expected {columns} (the observation's columns, prefix_match: "
                         f"{str(config.prefix_match).lower()}), got {n_features}")
    return config


def parse_observation_config(saved: dict[str, Any], strict: bool = True) -> ObservationConfig:
    """Observation settings as saved (a checkpoint's or a decision log header's), with the env
    YAML's bounds (a scale of 0 divides counts into inf; ``"abc"`` is no number): a ``ConfigError``
    naming ``observation.<key>``. Keys added since take their defaults; ``strict`` refuses keys
    this version does not know (a log's header), a checkpoint's are ignored."""
    fields = dataclasses.fields(ObservationConfig)
    schema = {f.name: Param.boolean(f.default) if isinstance(f.default, bool) else
              Param.between(MIN_OBSERVATION_SCALE, float("inf"), f.default) for f in fields}
    known = {f.name for f in fields}
    if strict:
        unknown = sorted(str(k) for k in saved if k not in known)
        if unknown:
            raise ConfigError(f"unknown key; expected some of {', '.join(sorted(known))}", path=f"observation.{unknown[0]}")
    return ObservationConfig(**validate_schema(schema, {k: v for k, v in saved.items() if k in known},
                                               path="observation"))


class PPORouter(PPOPolicy):
    """Routes with a trained policy: arg-max when ``deterministic`` (scored by :class:`~.numpy_scorer.NumpyScorer`
    for tanh and ReLU policies), else a seeded sample."""

    name = "ppo"

    def __init__(self, policy: ReplicaScorerPolicy, deterministic: bool = True, seed: int | None = None,
                 observation_config: ObservationConfig | None = None) -> None:
        self.policy = policy.eval()
        #: how observations for this policy are built (scales, and whether the prefix feature is in)
        self.observation: ObservationConfig = observation_config or ObservationConfig()
        self.deterministic = deterministic
        self.generator = torch.Generator()
        self.reset(seed)
        self.refresh_scorer()

    def refresh_scorer(self) -> None:
        """Copy the policy's actor weights into the NumPy scorer that arg-max decisions use (done at
        construction; call it again after changing the policy's weights in place)."""
        activation = self.policy.kwargs["activation"]
        self.scorer = NumpyScorer.from_policy(self.policy) if NumpyScorer.supports(activation) else None

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike, deterministic: bool = True, temperature: float | None = None, seed: int | None = None
    ) -> "PPORouter":
        """Build from a file the trainer wrote; ``temperature`` overrides the saved one."""
        data = read_checkpoint(path, required=("policy_kwargs", "policy_state"))
        try:
            policy = ReplicaScorerPolicy.from_checkpoint_dict(data)
        except (ValueError, TypeError, RuntimeError) as exc:  # declared sizes, or weights that do not fit them
            raise CheckpointError(f"{path}: {one_line(exc)}") from None
        try:
            observation = observation_config_from_checkpoint(data)
        except (ConfigError, ValueError) as exc:
            raise CheckpointError(f"{path}: {one_line(exc)}") from None
        if temperature is not None:
            policy.temperature = temperature
        return cls(policy, deterministic=deterministic, seed=seed, observation_config=observation)

    def reset(self, seed: int | None = None) -> None:
        """Reseed the action sampler (deterministic routing ignores it)."""
        self.generator.manual_seed(0 if seed is None else int(seed))

    def decide(self, snapshot: ReplicaSnapshot | None, prompt_tokens: float = 0.0, *, rows: Any = None,
               true_speed: Any = None) -> int:
        """Replica index from the observation ``rows`` ``(num_replicas, n_features)`` of those replicas."""
        if rows is None:
            raise ValueError("the ppo router decides on observation rows: expected rows=..., got none")
        if self.deterministic and self.scorer is not None:
            return self.scorer.pick(rows)  # the actor alone, in NumPy: the same pick, a fraction of the time
        step = self.policy.act(rows, deterministic=self.deterministic, generator=self.generator)
        return int(step.action)

    def __repr__(self) -> str:
        mode = "deterministic" if self.deterministic else "sampling"
        return f"PPORouter({mode}, temperature={self.policy.temperature:g})"

    def probabilities(self, obs: Any) -> torch.Tensor:
        """The policy's routing probabilities for one observation (for inspection and plots)."""
        with torch.no_grad():
            return torch.softmax(self.policy.logits(self.policy.as_tensor(obs)), dim=-1)[0]


def make_ppo_router(checkpoint: str | os.PathLike, deterministic: bool = True, temperature: float | None = None,
                    threads: int | None = None) -> PPORouter:
    """Factory behind ``schedulers.routing.policy.make_policy("ppo", checkpoint)``; ``threads`` sets
    torch's thread count first (1 where engines share the machine: a pool of more only spins)."""
    if threads is not None:
        torch.set_num_threads(int(threads))
    return PPORouter.from_checkpoint(checkpoint, deterministic=deterministic, temperature=temperature)

