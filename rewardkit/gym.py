"""Gymnasium 1.x wrappers that replace an environment's reward with a composed one.

``ComposedReward`` wraps one ``gymnasium.Env``; ``VectorComposedReward`` wraps a
``gymnasium.vector.VectorEnv`` (``gymnasium.make_vec``). The names say what they are and do not
shadow Gymnasium's own ``RewardWrapper`` / ``VectorRewardWrapper`` base classes. After each step
both call ``context_fn(t)`` with a :class:`Transition` (the observation before and after the
step, the action, the environment's own reward, the episode flags and the info), return
``composer(ctx, terminated=..., truncated=...).total`` as the reward, and store the breakdown
(``out.as_dict()``) in ``info["reward_terms"]`` and the environment's own reward in
``info["env_reward"]``. Importing this module imports gymnasium; ``import rewardkit`` does not.

One composer per vector wrapper, evaluated once per step on the whole batch: weight schedules
count the global step once (``num_envs`` per vector step, as the agent's step counter does),
normalizers pool every environment's values (as VecNormalize does), and the call costs one
NumPy pass instead of ``num_envs`` Python calls. One composer per sub-environment copy would
instead advance each copy's schedule at ``1/num_envs`` of the true rate and normalize each
environment by its own statistics.

Episode boundaries and stateful components (``potential_shaping``, ``ema_delta``, ``return_std``):

- ``reset()`` clears the composer's per-environment state and, with ``prime_on_reset=True`` (the
  default), evaluates the composer once on the reset observation in ``eval()`` mode, with a
  ``Transition`` whose ``obs_before`` and ``action`` are None, ``reward=0.0`` and both flags
  false. That call only lets stateful components record the first state (phi(s0) for potential
  shaping); its output is discarded, normalizer statistics and the step counter do not move.
  Turn it off if ``context_fn`` cannot build a context at reset.
- ``Transition.obs`` is always the observation the action led to, and ``Transition.info`` its
  info. For ending environments of a vector env that matters in ``AutoresetMode.SAME_STEP``,
  where Gymnasium already returns the next episode's first observation: the wrapper puts the
  ending environments' ``info["final_obs"]`` rows into ``obs`` and their ``info["final_info"]``
  entries into ``info`` (the reset info of those environments is dropped from it), so
  ``context_fn`` never needs to know the autoreset mode. The step still returns Gymnasium's
  observation and info unchanged.
- Vector envs in the default ``AutoresetMode.NEXT_STEP``: the step after an episode ends returns
  the new episode's first observation with reward 0 and no real transition. The wrapper still
  evaluates the composer there (stateful components record the new first state, exactly like
  priming) but returns reward 0 for those environments and zeroes their ``/contribution`` and
  ``total`` entries in ``info["reward_terms"]``. Normalizer statistics do see that step's raw
  values. Potential-based shaping therefore telescopes exactly in every episode.
- ``AutoresetMode.SAME_STEP``: the composer's state for an ending environment is cleared after
  its final step, so stateful components first see the new episode at its second observation.
- ``AutoresetMode.DISABLED``: ``reset(options={"reset_mask": mask})`` calls
  ``composer.reset(mask)``, which clears the masked environments' component state and
  ``return_std`` returns (no priming, as the other environments are mid-episode), so
  as with ``SAME_STEP`` they first see the new episode at its first step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, SupportsFloat

import numpy as np

try:
    import gymnasium
    from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
except ImportError as exc:  # the optional extra is missing: say which one to install
    raise ImportError(f"rewardkit.gym needs Gymnasium >= 1.1: pip install 'rewardkit[gym]' ({exc})",
                      name=exc.name) from exc

from .backend import array_namespace, copy_array, device_of, library_of, like, maybe_any, to_numpy
from .composer import RewardComposer

TERMS_KEY = "reward_terms"
ENV_REWARD_KEY = "env_reward"
_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


@dataclass(frozen=True)
class Transition:
    """What ``context_fn`` sees after a step (batched, with a leading env axis, in vector envs).

    ``obs_before`` and ``action`` are None on the priming call at reset. ``obs`` and ``info``
    belong to the observation the action led to, the final one for ending episodes.
    """

    obs_before: Any
    action: Any
    obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    info: Mapping[str, Any]


ContextFn = Callable[[Transition], Mapping[str, Any]]


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
    if not isinstance(composer, RewardComposer):
        raise TypeError(f"composer must be a RewardComposer, got {type(composer).__name__}")
    if not callable(context_fn):
        raise TypeError(f"context_fn must be callable, got {context_fn!r}")
    composer.attach_to(wrapper)  # one composer's per-environment state serves one wrapper
    wrapper.composer = composer
    wrapper.context_fn = context_fn
    wrapper.prime_on_reset = prime_on_reset
    wrapper.info_key = info_key


class ComposedReward(gymnasium.Wrapper):
    """Replace a single environment's reward with ``composer(context_fn(transition)).total``.

    ``context_fn(t: Transition)`` returns a mapping of signal names to floats (vector inputs such
    as ``replica_loads`` as 1-D arrays).
    """

    def __init__(self, env: gymnasium.Env, composer: RewardComposer, context_fn: ContextFn, *,
                 prime_on_reset: bool = True, info_key: str = TERMS_KEY) -> None:
        super().__init__(env)
        _attach(self, composer, context_fn, prime_on_reset, info_key)
        self._last_obs: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the environment and the composer's per-episode state (see the module docstring)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.composer.reset()
        self._last_obs = obs
        if self.prime_on_reset:
            ctx = self.context_fn(Transition(None, None, obs, 0.0, False, False, info))
            _prime(self.composer, ctx, False, False)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the environment; the reward is the composed total, the breakdown goes to ``info``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        ctx = _checked_context(self.context_fn(Transition(self._last_obs, action, obs, reward, terminated,
                                                          truncated, info)))
        batch = self.composer.batch_size(ctx)  # checked before anything (composer or wrapper) moves
        if batch not in (None, 1):
            raise ValueError(f"context_fn returned a batch of {batch} environments for a single "
                             f"environment ({_shapes(ctx)}); use VectorComposedReward for vector envs")
        self._last_obs = obs
        out = self.composer(ctx, terminated=bool(terminated), truncated=bool(truncated))
        total = out.total
        if isinstance(total, np.ndarray):
            if total.size != 1:
                raise ValueError(f"context_fn returned a batch of {total.size} environments for a single "
                                 "environment; use VectorComposedReward for vector envs")
            total = float(total.reshape(-1)[0])
        info = dict(info)
        info[self.info_key] = out.as_dict()
        info[ENV_REWARD_KEY] = reward
        return obs, total, terminated, truncated, info


class VectorComposedReward(VectorWrapper):
    """Replace a vector environment's rewards with the composed totals, one per sub-environment.

    ``context_fn(t: Transition)`` receives batched fields and returns a mapping of signal names
    to arrays with a leading ``num_envs`` axis. One composer serves every sub-environment (see
    the module docstring for why).
    """

    def __init__(self, env: VectorEnv, composer: RewardComposer, context_fn: ContextFn, *,
                 prime_on_reset: bool = True, info_key: str = TERMS_KEY) -> None:
        super().__init__(env)
        _attach(self, composer, context_fn, prime_on_reset, info_key)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._last_obs: Any = None

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset all environments (or those in ``options["reset_mask"]``) and their reward state."""
        mask = None if options is None else options.get("reset_mask")
        if mask is not None and library_of(mask) in (None, "numpy"):
            mask = np.array(mask, dtype=bool)  # a copy: the env pops it from options
        elif mask is not None:
            mask = copy_array(mask)  # a torch/JAX mask stays in its library and on its device
        obs, info = self.env.reset(seed=seed, options=options)
        self._last_obs = obs
        if mask is None:
            self.composer.reset()
            self._autoreset = np.zeros(self.num_envs, dtype=bool)
            if self.prime_on_reset:
                flags = np.zeros(self.num_envs, dtype=bool)
                ctx = self.context_fn(Transition(None, None, obs, np.zeros(self.num_envs), flags, flags, info))
                _prime(self.composer, ctx, flags, flags)
        else:
            self.composer.reset(mask)
            self._autoreset = _where(mask, False, self._autoreset)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step all environments; rewards are the composed totals (0 on next-step autoreset steps)."""
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        next_obs, next_info = obs, info
        if self.autoreset_mode == AutoresetMode.SAME_STEP and "_final_obs" in info:
            ending = np.asarray(info["_final_obs"], dtype=bool)
            next_obs = _with_rows(obs, info["final_obs"], ending)
            next_info = _merge_final_info(info, info.get("final_info", {}), ending)
        ctx = _batch_context(self.composer, self.context_fn(Transition(self._last_obs, actions, next_obs, rewards,
                                                                       terminations, truncations, next_info)),
                             self.num_envs)
        self._last_obs = obs
        out = self.composer(ctx, terminated=terminations, truncated=truncations)
        # the composer's arrays pass through: a torch/JAX env gets rewards in its library, on its device
        total = out.total if library_of(out.total) not in (None, "numpy") else np.array(out.total)
        if tuple(total.shape) != (self.num_envs,):
            raise ValueError(f"context_fn must return arrays with a leading axis of {self.num_envs} environments; "
                             f"the composed total has shape {tuple(total.shape)} from {_shapes(ctx)}")
        terms = out.as_dict()
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            fresh = self._autoreset
            if maybe_any(fresh):  # on a device: where() without asking which
                total = _where(fresh, 0.0, total)
                terms = {k: _where(fresh, 0.0, v) if (k == "total" or k.endswith("/contribution")) else v
                         for k, v in terms.items()}
            self._autoreset = terminations | truncations if library_of(terminations) not in (None, "numpy") \
                else np.logical_or(terminations, truncations)
        info = dict(info)
        info[self.info_key] = terms
        info[ENV_REWARD_KEY] = rewards
        return obs, total, terminations, truncations, info


def _with_rows(batch: Any, rows: np.ndarray, mask: np.ndarray) -> Any:
    """``batch`` with row ``i`` replaced by ``rows[i]`` where ``mask[i]`` (arrays and dicts of them)."""
    if isinstance(batch, dict):
        return {k: _with_rows(v, np.array([None if r is None else r[k] for r in rows], dtype=object), mask)
                for k, v in batch.items()}
    if isinstance(batch, np.ndarray):
        out = batch.copy()
        for i in np.flatnonzero(mask):
            out[i] = rows[i]
        return out
    raise TypeError(f"cannot substitute final observations into a batch of type {type(batch).__name__}; "
                    "read info['final_obs'] in context_fn instead")


def _merge_final_info(info: Mapping[str, Any], final: Mapping[str, Any], ending: np.ndarray) -> dict[str, Any]:
    """The step's vector info with ending environments' entries taken from their final info."""
    merged: dict[str, Any] = {}
    for key, value in info.items():
        if key in _FINAL_KEYS or key.startswith("_"):
            continue
        merged[key] = value
        present = info.get(f"_{key}")
        if present is not None and not isinstance(value, dict):
            merged[f"_{key}"] = np.asarray(present, dtype=bool) & ~ending  # drop the reset infos
    for key, value in final.items():
        if key.startswith("_"):
            continue
        present = np.asarray(final.get(f"_{key}", ending), dtype=bool)
        if isinstance(value, dict):
            merged[key] = _merge_final_info(merged.get(key, {}), value, present)
            continue
        value = np.asarray(value)
        base = merged.get(key)
        if isinstance(base, np.ndarray) and base.shape == value.shape:
            base = base.astype(np.result_type(base, value), copy=True)
        else:
            base = np.zeros_like(value)
        base[present] = value[present]
        merged[key] = base
        merged[f"_{key}"] = np.asarray(merged.get(f"_{key}", np.zeros(len(present), bool)), dtype=bool) | present
    return merged


def _checked_context(ctx: Any) -> Mapping[str, Any]:
    """``context_fn``'s result must be a mapping of signal names to values; anything else is a clear error."""
    if isinstance(ctx, Mapping):
        return ctx
    got = "None (did context_fn forget to return?)" if ctx is None else f"a {type(ctx).__name__}"
    raise TypeError(f"context_fn must return a mapping of signal names to values (a dict such as "
                    f"{{'latency': ...}}), got {got}")


def _batch_context(composer: RewardComposer, ctx: Any, num_envs: int) -> Mapping[str, Any]:
    """``context_fn``'s result for ``num_envs`` environments, checked (a mapping whose values have a
    leading axis of ``num_envs``) before anything, composer or wrapper, changes state."""
    ctx = _checked_context(ctx)
    batch = composer.batch_size(ctx)
    if batch != num_envs:
        found = "one environment's values" if batch is None else f"a batch of {batch}"
        raise ValueError(f"context_fn must return values (arrays or lists) with a leading axis of "
                         f"{num_envs} environments, one per sub-environment; got {found}: {_shapes(ctx)}")
    return ctx


def _shapes(ctx: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}: shape {_shape(v)}" for k, v in ctx.items()) or "an empty context"


def _shape(value: Any) -> str:
    try:
        return str(tuple(np.shape(value)))
    except (ValueError, TypeError):
        return f"unreadable ({type(value).__name__})"


def _where(mask: Any, value: float, values: Any) -> Any:
    """``values`` with ``value`` where ``mask`` is true, in ``values``' library and device (the mask is
    moved there if it comes from elsewhere)."""
    if library_of(values) in (None, "numpy"):
        out = np.array(values, dtype=np.result_type(np.asarray(values).dtype, np.float32)
                       if not isinstance(values, np.ndarray) or values.dtype != bool else bool)
        out[to_numpy(mask) if library_of(mask) not in (None, "numpy") else np.asarray(mask, dtype=bool)] = value
        return out
    if library_of(mask) != library_of(values) or device_of(mask) != device_of(values):
        mask = like(mask, values, dtype=array_namespace(values).bool)
    return array_namespace(values).where(mask, value, values)
