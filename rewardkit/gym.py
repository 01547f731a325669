"""Gymnasium 1.x wrappers that replace an environment's reward with a composed one.

``RewardWrapper`` wraps one ``gymnasium.Env``; ``VectorRewardWrapper`` wraps a
``gymnasium.vector.VectorEnv`` (``gymnasium.make_vec``). Both call
``context_fn(obs, reward, terminated, truncated, info) -> ctx`` after each step, return
``composer(ctx, terminated=..., truncated=...).total`` as the reward, and store the breakdown
(``out.as_dict()``) in ``info["reward_terms"]`` and the environment's own reward in
``info["env_reward"]``. Importing this module imports gymnasium; ``import rewardkit`` does not.

Episode boundaries and stateful components (``potential_shaping``, ``ema_delta``, ``return_std``):

- ``reset()`` clears the composer's per-environment state and, with ``prime_on_reset=True`` (the
  default), evaluates the composer once on the reset observation in ``eval()`` mode, with
  ``reward=0.0`` and both flags false. That call only lets stateful components record the first
  state (phi(s0) for potential shaping); its output is discarded, normalizer statistics and the
  step counter do not move. Turn it off if ``context_fn`` cannot build a context at reset.
- Vector envs in the default ``AutoresetMode.NEXT_STEP``: the step after an episode ends returns
  the new episode's first observation with reward 0 and no real transition. The wrapper still
  evaluates the composer there (stateful components record the new first state, exactly like
  priming) but returns reward 0 for those environments and zeroes their ``/contribution`` and
  ``total`` entries in ``info["reward_terms"]``. Normalizer statistics do see that step's raw
  values. Potential-based shaping therefore telescopes exactly in every episode.
- ``AutoresetMode.SAME_STEP``: the observation returned at the end of an episode is already the
  next episode's first one (the final one is in ``info["final_obs"]``, which ``context_fn`` should
  read for ending environments). The composer's state for an ending environment is cleared after
  that step, so stateful components first see the new episode at its second observation.
- ``AutoresetMode.DISABLED``: ``reset(options={"reset_mask": mask})`` calls
  ``composer.reset(mask)``, which clears the masked environments' component state and
  ``return_std`` returns (no priming, as the other environments are mid-episode), so
  as with ``SAME_STEP`` they first see the new episode at its first step.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, SupportsFloat

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from .composer import RewardComposer

ContextFn = Callable[[Any, Any, Any, Any, Mapping[str, Any]], Mapping[str, Any]]

TERMS_KEY = "reward_terms"
ENV_REWARD_KEY = "env_reward"


def _prime(composer: RewardComposer, ctx: Mapping[str, Any], terminated: Any, truncated: Any) -> None:
    """Evaluate once in eval mode so stateful components record the first state of an episode."""
    was_training = composer.training
    composer.eval()
    try:
        composer(ctx, terminated=terminated, truncated=truncated)
    finally:
        if was_training:
            composer.train()


def _attach(wrapper: Any, composer: RewardComposer, context_fn: ContextFn, prime_on_reset: bool, info_key: str) -> None:
    """The settings both wrappers share, checked once."""
    if not callable(context_fn):
        raise TypeError(f"context_fn must be callable, got {context_fn!r}")
    composer.attach_to(wrapper)  # one composer's per-environment state serves one wrapper
    wrapper.composer = composer
    wrapper.context_fn = context_fn
    wrapper.prime_on_reset = prime_on_reset
    wrapper.info_key = info_key


class RewardWrapper(gymnasium.Wrapper):
    """Replace a single environment's reward with ``composer(context_fn(...)).total``.

    ``context_fn(obs, reward, terminated, truncated, info)`` returns a mapping of signal names to
    floats (vector inputs such as ``replica_loads`` as 1-D arrays).
    """

    def __init__(self, env: gymnasium.Env, composer: RewardComposer, context_fn: ContextFn, *,
                 prime_on_reset: bool = True, info_key: str = TERMS_KEY) -> None:
        super().__init__(env)
        _attach(self, composer, context_fn, prime_on_reset, info_key)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the environment and the composer's per-episode state (see the module docstring)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.composer.reset()
        if self.prime_on_reset:
            _prime(self.composer, self.context_fn(obs, 0.0, False, False, info), False, False)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the environment; the reward is the composed total, the breakdown goes to ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        ctx = self.context_fn(obs, reward, terminated, truncated, info)
        out = self.composer(ctx, terminated=bool(terminated), truncated=bool(truncated))
        total = out.total
        if isinstance(total, np.ndarray):
            if total.size != 1:
                raise ValueError(f"context_fn returned a batch of {total.size} environments for a single "
                                 "environment; use VectorRewardWrapper for vector envs")
            total = float(total.reshape(-1)[0])
        info = dict(info)
        info[self.info_key] = out.as_dict()
        info[ENV_REWARD_KEY] = reward
        return obs, total, terminated, truncated, info


class VectorRewardWrapper(VectorWrapper):
    """Replace a vector environment's rewards with the composed totals, one per sub-environment.

    ``context_fn`` receives the batched ``obs, rewards, terminations, truncations, infos`` and
    returns a mapping of signal names to arrays with a leading ``num_envs`` axis.
    """

    def __init__(self, env: VectorEnv, composer: RewardComposer, context_fn: ContextFn, *,
                 prime_on_reset: bool = True, info_key: str = TERMS_KEY) -> None:
        super().__init__(env)
        _attach(self, composer, context_fn, prime_on_reset, info_key)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset all environments (or those in ``options["reset_mask"]``) and their reward state."""
        mask = None if options is None else options.get("reset_mask")
        mask = None if mask is None else np.array(mask, dtype=bool)  # the env pops it from options
        obs, info = self.env.reset(seed=seed, options=options)
        if mask is None:
            self.composer.reset()
            self._autoreset[:] = False
            if self.prime_on_reset:
                flags = np.zeros(self.num_envs, dtype=bool)
                _prime(self.composer, self.context_fn(obs, np.zeros(self.num_envs), flags, flags, info), flags, flags)
        else:
            self.composer.reset(mask)
            self._autoreset[mask] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step all environments; rewards are the composed totals (0 on next-step autoreset steps)."""
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        ctx = self.context_fn(obs, rewards, terminations, truncations, info)
        if not any(isinstance(v, np.ndarray) and v.ndim and v.shape[0] == self.num_envs for v in ctx.values()):
            raise ValueError(f"context_fn must return arrays with a leading axis of {self.num_envs} environments; "
                             f"got {_shapes(ctx)}")
        out = self.composer(ctx, terminated=terminations, truncated=truncations)
        total = np.array(out.total, dtype=np.float64)
        if total.shape != (self.num_envs,):
            raise ValueError(f"context_fn must return arrays with a leading axis of {self.num_envs} environments; "
                             f"the composed total has shape {total.shape} from {_shapes(ctx)}")
        terms = out.as_dict()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            fresh = self._autoreset
            if fresh.any():
                total[fresh] = 0.0
                terms = {k: _zero_where(v, fresh) if (k == "total" or k.endswith("/contribution")) else v
                         for k, v in terms.items()}
            self._autoreset = np.logical_or(terminations, truncations)
        info = dict(info)
        info[self.info_key] = terms
        info[ENV_REWARD_KEY] = rewards
        return obs, total, terminations, truncations, info


def _shapes(ctx: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}: {np.shape(v)}" for k, v in ctx.items()) or "an empty context"


def _zero_where(values: Any, mask: np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    out[mask] = 0.0
    return out
