"""Stable-Baselines3 integration: a composed reward for an SB3 ``VecEnv``, its logs and checkpoints.

- :class:`ComposedRewardVecEnv` (a ``VecEnvWrapper``) replaces the rewards of an SB3 vector env
  (``make_vec_env(...)``) with one batched composer. SB3 cannot run ``gymnasium.vector`` envs,
  so this is the SB3 counterpart of :class:`rewardkit.gym.VectorComposedReward`. The ``Monitor``
  that ``make_vec_env`` puts around each env is untouched, so SB3's episode statistics
  (``rollout/ep_rew_mean``, ``ep_len_mean``) keep reporting the environment's own return: the
  task measure, not the shaped reward the agent optimizes.
- :class:`RewardTermsCallback` records every term's mean raw value, weight and contribution
  over each rollout with SB3's own logger (``self.logger.record``), so they land in SB3's
  stdout, CSV and TensorBoard outputs beside its own metrics.
- :class:`RewardCheckpointCallback` is SB3's ``CheckpointCallback`` that also writes the
  composer's state (``..._reward_state_<N>_steps.json``) beside each model zip, so a resumed run
  continues the weight schedules and normalizer statistics where they were.

``context_fn`` gets a :class:`rewardkit.gym.Transition` with batched fields: ``obs`` is the
observation each action led to (SB3 resets ending envs in the same step, so their
``infos[i]["terminal_observation"]`` is put in), ``info`` is SB3's list of per-env dicts.
``terminated`` and ``truncated`` are split from SB3's ``dones`` with ``TimeLimit.truncated``.
Importing this module imports stable_baselines3 (an optional extra: ``pip install rewardkit[sb3]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
try:
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
    from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
except ImportError as exc:  # the optional extra is missing: say which one to install
    raise ImportError(f"rewardkit.integrations.sb3 needs Stable-Baselines3: pip install 'rewardkit[sb3]' ({exc})",
                      name=exc.name) from exc

from ..composer import RewardComposer
from ..config import require_path
from ..gym import ENV_REWARD_KEY, TERMS_KEY, ContextFn, Transition, _attach, _batch_context, _prime, _shapes

LOG_PREFIX = "reward_terms"


class ComposedRewardVecEnv(VecEnvWrapper):
    """Replace an SB3 ``VecEnv``'s rewards with ``composer(context_fn(transition)).total``.

    The per-env breakdown goes to ``infos[i]["reward_terms"]`` (floats) and the environment's own
    reward to ``infos[i]["env_reward"]``; ``last_terms`` holds the last step's batched breakdown.
    """

    def __init__(self, venv: VecEnv, composer: RewardComposer, context_fn: ContextFn, *,
                 prime_on_reset: bool = True, info_key: str = TERMS_KEY) -> None:
        super().__init__(venv)
        _attach(self, composer, context_fn, prime_on_reset, info_key)
        self.last_terms: dict[str, np.ndarray] = {}
        self._last_obs: Any = None
        self._actions: Any = None

    def reset(self) -> Any:
        """Reset every env and the composer's per-episode state; prime stateful components."""
        obs = self.venv.reset()
        self.reset_infos = getattr(self.venv, "reset_infos", [{} for _ in range(self.num_envs)])
        self.composer.reset()
        self._last_obs = obs
        if self.prime_on_reset:
            flags = np.zeros(self.num_envs, dtype=bool)
            ctx = _batch_context(self.composer, self.context_fn(Transition(None, None, obs, np.zeros(self.num_envs),
                                                                           flags, flags, list(self.reset_infos))),
                                 self.num_envs)
            _prime(self.composer, ctx, flags, flags)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions
        self.venv.step_async(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every env; rewards are the composed totals (float32, as SB3's buffers store them)."""
        obs, rewards, dones, infos = self.venv.step_wait()
        dones = np.asarray(dones, dtype=bool)
        truncated = dones & np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos])
        terminated = dones & ~truncated
        next_obs = _with_terminal_obs(obs, infos, dones)
        ctx = _batch_context(self.composer, self.context_fn(Transition(self._last_obs, self._actions, next_obs, rewards,
                                                                       terminated, truncated, infos)), self.num_envs)
        self._last_obs = obs
        out = self.composer(ctx, terminated=terminated, truncated=truncated)
        total = np.asarray(out.total, dtype=np.float64)
        if total.shape != (self.num_envs,):
            raise ValueError(f"context_fn must return arrays with a leading axis of {self.num_envs} environments; "
                             f"the composed total has shape {total.shape} from {_shapes(ctx)}")
        self.last_terms = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (self.num_envs,))
                           for k, v in out.as_dict().items()}
        for i, info in enumerate(infos):
            info[self.info_key] = {k: float(v[i]) for k, v in self.last_terms.items()}
            info[ENV_REWARD_KEY] = float(rewards[i])
        return obs, total.astype(np.float32), dones, infos

    def state_dict(self) -> dict[str, Any]:
        """The composer's state (plain data), for checkpoints."""
        return self.composer.state_dict()

    def load_state(self, path: str | Path) -> None:
        """Restore the composer's state from a ``..._reward_state_<N>_steps.json`` checkpoint."""
        require_path(path, "load_state")
        self.composer.load_state_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def _with_terminal_obs(obs: Any, infos: list[dict[str, Any]], dones: np.ndarray) -> Any:
    """``obs`` with each done env's row replaced by its ``terminal_observation``."""
    if not dones.any():
        return obs
    if isinstance(obs, dict):
        out = {k: v.copy() for k, v in obs.items()}
        for i in np.flatnonzero(dones):
            for k in out:
                out[k][i] = infos[i]["terminal_observation"][k]
        return out
    out = np.array(obs, copy=True)
    for i in np.flatnonzero(dones):
        out[i] = infos[i]["terminal_observation"]
    return out


def find_composed_reward(env: Any) -> ComposedRewardVecEnv:
    """The :class:`ComposedRewardVecEnv` inside an SB3 env chain (through ``VecNormalize`` etc.)."""
    current = env
    while current is not None:
        if isinstance(current, ComposedRewardVecEnv):
            return current
        current = getattr(current, "venv", None)
    raise ValueError("the training env has no ComposedRewardVecEnv; wrap it with "
                     "rewardkit.integrations.sb3.ComposedRewardVecEnv(venv, composer, context_fn)")


class RewardTermsCallback(BaseCallback):
    """Record each term's rollout mean of raw value, weight and contribution with SB3's logger.

    Keys are ``reward_terms/<term>/raw``, ``.../weight``, ``.../contribution`` and
    ``reward_terms/total``; they are written when SB3 dumps its logs (every ``log_interval``).
    """

    def __init__(self, fields: tuple[str, ...] = ("raw", "weight", "contribution"), verbose: int = 0) -> None:
        super().__init__(verbose)
        self.fields = fields
        self._sums: dict[str, float] = {}
        self._count = 0
        self._wrapper: ComposedRewardVecEnv | None = None

    def _on_training_start(self) -> None:
        self._wrapper = find_composed_reward(self.training_env)
        self._sums, self._count = {}, 0

    def _on_step(self) -> bool:
        terms = self._wrapper.last_terms if self._wrapper is not None else {}
        for key, values in terms.items():
            if key == "total" or key.rsplit("/", 1)[-1] in self.fields:
                self._sums[key] = self._sums.get(key, 0.0) + float(np.sum(values))
        if terms:
            self._count += len(next(iter(terms.values())))
        return True

    def _on_rollout_end(self) -> None:
        if self._count:
            for key, total in self._sums.items():
                self.logger.record(f"{LOG_PREFIX}/{key}", total / self._count)
        self._sums, self._count = {}, 0


class RewardCheckpointCallback(CheckpointCallback):
    """SB3's ``CheckpointCallback`` that also saves the composer's state beside each model zip.

    With ``name_prefix="rl_model"`` a checkpoint at step N is ``rl_model_N_steps.zip`` plus
    ``rl_model_reward_state_N_steps.json``; resume with ``PPO.load(zip)`` and
    ``ComposedRewardVecEnv.load_state(json)``.
    """

    def _on_step(self) -> bool:
        keep_going = super()._on_step()
        if self.n_calls % self.save_freq == 0:
            path = self._checkpoint_path("reward_state_", extension="json")
            state = find_composed_reward(self.training_env).state_dict()
            Path(path).write_text(json.dumps(_plain(state)), encoding="utf-8")
            if self.verbose >= 2:
                print(f"Saving reward state to {path}")
        return keep_going


def _plain(value: Any) -> Any:
    """JSON-ready copy of a state dict (NumPy scalars and arrays become numbers and lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
