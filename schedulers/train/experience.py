"""Collecting experience from routing envs: ``n_envs`` envs (Vidur or live) stepped in lockstep.

:class:`LockstepEnvs` owns the envs and their episodes: which seed each episode gets, the
observation each env waits on, and where each per-request credit belongs. It fills a PPO
:class:`~schedulers.rl.rollout.RolloutBuffer` with a policy's decisions (:meth:`LockstepEnvs.rollout`)
or records a heuristic's (:meth:`LockstepEnvs.demonstrations`); the trainer only learns from what
it returns. (Decisions logged by a gateway are the third source: :mod:`schedulers.train.offline`.)

Episodes are seeded ``train_start + env_index + n_envs * episode_index``; with
``envs_per_seed = k`` each group of k envs shares one seed (``env_index // k`` and
``n_envs // k``), so that paired advantages compare returns on the same arrivals. A resumed run
restarts each environment's interrupted episode with the next seed.

Per-request credit: when the env credits its reward per routed request (``env.reward_credit ==
"request"``), each ``(decision, reward)`` pair of ``info["credits"]`` is added to the step that made
that decision; rollouts (and demonstrations) then hold whole episodes, so every decision has its
credit before advantages are computed.
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np
import torch

from rewardkit.errors import ConfigError

from ..environments import policy_action
from ..rl.behaviour_cloning import Demos
from ..rl.scorer_network import ReplicaScorerPolicy
from ..rl.ppo import RewardScaler
from ..rl.rollout import RolloutBuffer
from ..routing.policy import make_policy
from .checkpoints import to_plain


def env_composer(env: Any) -> Any:
    """The env's reward composer (its ``composer`` attribute), if it has one."""
    return getattr(env.unwrapped, "composer", None)


def env_spaces(envs: Sequence[Any]) -> tuple[int, int]:
    """``(num_replicas, n_features)`` of routing envs, which must all agree (a 2-D Box, a Discrete of its rows)."""
    import gymnasium as gym

    env = envs[0]
    obs_space, act_space = env.observation_space, env.action_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 2:
        raise TypeError(f"env observation_space must be a 2-D Box (replicas, features), got {obs_space}")
    if not isinstance(act_space, gym.spaces.Discrete) or int(act_space.n) != obs_space.shape[0]:
        raise TypeError(f"env action_space must be Discrete(num_replicas={obs_space.shape[0]}), got {act_space}")
    for other in envs[1:]:
        if other.observation_space.shape != obs_space.shape:
            raise TypeError("all training envs must have the same observation shape")
    return int(obs_space.shape[0]), int(obs_space.shape[1])


class LockstepEnvs:
    """The training envs and their episodes (see the module doc)."""

    def __init__(self, envs: Sequence[Any], train_start: int, envs_per_seed: int = 1,
                 request_credit: bool = False, scaler: RewardScaler | None = None) -> None:
        self.envs = list(envs)
        self.n_envs = len(self.envs)
        self.train_start, self.envs_per_seed = int(train_start), int(envs_per_seed)
        self.request_credit = request_credit
        self.scaler = scaler
        self.num_replicas, self.n_features = env_spaces(self.envs)
        self.episode_index = [0] * self.n_envs
        self.episode_step = [0] * self.n_envs
        self.obs: list[np.ndarray] = [np.zeros((self.num_replicas, self.n_features), np.float32)] * self.n_envs
        self.ep_return = [0.0] * self.n_envs

    # ---- envs and episodes -------------------------------------------------------------------
    def episode_seed(self, i: int) -> int:
        """Env ``i``'s next episode seed; the ``envs_per_seed`` envs of a group share it."""
        per_seed = self.envs_per_seed
        return self.train_start + i // per_seed + self.n_envs // per_seed * self.episode_index[i]

    def start_episode(self, i: int) -> None:
        obs, _ = self.envs[i].reset(seed=self.episode_seed(i))
        self.obs[i] = np.asarray(obs, dtype=np.float32)
        self.episode_step[i] = 0
        self.ep_return[i] = 0.0

    def restart_all(self) -> None:
        """Begin a fresh episode in every env, abandoning ones in progress (they take the next seed)."""
        for i in range(self.n_envs):
            if self.episode_step[i] > 0:
                self.episode_index[i] += 1
                if self.scaler is not None:
                    self.scaler.returns[i] = 0.0  # the abandoned episode's discounted return
            self.start_episode(i)

    def step_env(self, i: int, action: int, step: int) -> tuple[float, bool, bool, np.ndarray | None, dict]:
        """Step env ``i``; on episode end start the next one. Returns (reward, term, trunc, final_obs, info)."""
        obs, reward, terminated, truncated, info = self.envs[i].step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise FloatingPointError(f"env {i} returned a non-finite reward {reward} at PPO step {step}")
        self.episode_step[i] += 1
        self.ep_return[i] += reward
        final = None
        if terminated or truncated:
            final = np.asarray(obs, dtype=np.float32)
            self.episode_index[i] += 1
            self.start_episode(i)
        else:
            self.obs[i] = np.asarray(obs, dtype=np.float32)
        return reward, bool(terminated), bool(truncated), final, info

    def obs_tensor(self, policy: ReplicaScorerPolicy) -> torch.Tensor:
        """The observations the envs wait on, as the policy's input ``(n_envs, replicas, features)``."""
        return policy.as_tensor(np.stack(self.obs))

    @staticmethod
    def credit(rewards: torch.Tensor, t: int, i: int, episode_start: int, info: dict) -> None:
        """Add env ``i``'s per-request credits to ``rewards[decision slot, i]`` (slots up to ``t``)."""
        for decision, value in info.get("credits") or ():
            slot = episode_start + int(decision)
            if not episode_start <= slot <= t:
                raise RuntimeError(f"credit for decision {decision} falls outside the rollout (slot {slot}, step {t})")
            rewards[slot, i] += float(value)

    # ---- collection ---------------------------------------------------------------------------
    def demonstrations(self, heuristic: str, steps_per_env: int, policy: ReplicaScorerPolicy,
                       source: str = "<config>") -> Demos:
        """Let ``heuristic`` route ``steps_per_env`` steps in every env; record what it chose."""
        shape = (steps_per_env, self.n_envs)
        obs = torch.zeros(shape + (self.num_replicas, self.n_features))
        final_obs = torch.zeros_like(obs)
        actions = torch.zeros(shape, dtype=torch.long)
        rewards = torch.zeros(shape)
        term = torch.zeros(shape, dtype=torch.bool)
        trunc = torch.zeros(shape, dtype=torch.bool)
        try:  # one per env, reset with each of its episodes' seeds
            demonstrators = [make_policy(heuristic) for _ in self.envs]
        except ValueError as exc:
            raise ConfigError(f"expected a heuristic router, got {heuristic!r} ({exc})", source=source,
                              path="bc.heuristics") from None
        if demonstrators[0].observation is not None:
            raise ConfigError(f"expected a heuristic router, got {heuristic!r} (a learned one)", source=source,
                              path="bc.heuristics")
        self.restart_all()
        for t in range(steps_per_env):
            obs[t] = self.obs_tensor(policy)
            for i, env in enumerate(self.envs):
                if self.episode_step[i] == 0:
                    demonstrators[i].reset(self.episode_seed(i))
                try:
                    a = policy_action(demonstrators[i], env, self.obs[i])
                except ValueError as exc:
                    if t > 0:
                        raise
                    raise ConfigError(f"expected a heuristic the env can run, got {heuristic!r} ({exc})",
                                      source=source, path="bc.heuristics") from None
                actions[t, i] = a
                episode_start = t - self.episode_step[i]
                r, te, tr, final, info = self.step_env(i, a, t)
                term[t, i], trunc[t, i] = te, tr
                if self.request_credit:
                    self.credit(rewards, t, i, episode_start, info)
                else:
                    rewards[t, i] = r
                if final is not None:
                    final_obs[t, i] = torch.from_numpy(final)
            if self.scaler is not None and not self.request_credit:
                rewards[t] = self.scaler(rewards[t], term[t] | trunc[t])
        if self.scaler is not None and self.request_credit:  # credits are final once the episodes are
            rewards = self.scaler.scale_rollout(rewards, term | trunc)
        return Demos(obs, actions, rewards, term, trunc, final_obs, self.obs_tensor(policy))

    def rollout(self, policy: ReplicaScorerPolicy, buffer: RolloutBuffer, first_step: int = 0) -> dict[str, Any]:
        """Fill ``buffer`` with the policy's decisions, ``buffer.n_steps`` lockstep steps; return statistics.

        Rewards are scaled (when a scaler is set) but advantages are left to the caller.
        """
        buffer.reset()
        t_policy = t_env = 0.0
        term_sums: dict[str, float] = {}
        term_counts: dict[str, int] = {}
        episode_returns: list[float] = []
        episode_lengths: list[int] = []
        raw_reward_sum = 0.0
        for t in range(buffer.n_steps):
            t0 = time.perf_counter()
            obs = self.obs_tensor(policy)
            step = policy.act(obs)
            t1 = time.perf_counter()
            t_policy += t1 - t0
            rewards = torch.zeros(self.n_envs)
            term = torch.zeros(self.n_envs, dtype=torch.bool)
            trunc = torch.zeros(self.n_envs, dtype=torch.bool)
            finals: dict[int, np.ndarray] = {}
            credited: list[tuple[int, int, dict]] = []
            for i in range(self.n_envs):
                ep_ret, ep_len = self.ep_return[i], self.episode_step[i]
                r, te, tr, final, info = self.step_env(i, int(step.action[i]), first_step + t * self.n_envs)
                term[i], trunc[i] = te, tr
                if self.request_credit:
                    credited.append((i, t - ep_len, info))  # placed once step t is in the buffer
                else:
                    rewards[i] = r
                raw_reward_sum += r
                if final is not None:
                    episode_returns.append(ep_ret + r)
                    episode_lengths.append(ep_len + 1)
                    if tr and not te:
                        finals[i] = final
                for key, value in (info.get("reward_terms") or {}).items():
                    try:
                        v = float(np.mean(value))
                    except (TypeError, ValueError):
                        continue  # not a number: nothing to average
                    term_sums[key] = term_sums.get(key, 0.0) + v
                    term_counts[key] = term_counts.get(key, 0) + 1
            t2 = time.perf_counter()
            t_env += t2 - t1
            final_values = torch.zeros(self.n_envs)
            if finals:
                with torch.no_grad():
                    idx = sorted(finals)
                    final_values[idx] = policy.value(policy.as_tensor(np.stack([finals[i] for i in idx])))
            if self.scaler is not None and not self.request_credit:
                rewards = self.scaler(rewards, term | trunc)
            buffer.add(obs, step.action, step.log_prob, step.value, rewards, term, trunc, final_values)
            for i, episode_start, info in credited:
                self.credit(buffer.rewards, t, i, episode_start, info)
            t_policy += time.perf_counter() - t2
        if self.scaler is not None and self.request_credit:  # credits are final once the episodes are
            buffer.rewards = self.scaler.scale_rollout(buffer.rewards, buffer.terminated | buffer.truncated)
        return {
            "t_policy": t_policy,
            "t_env": t_env,
            "episode_returns": episode_returns,
            "episode_lengths": episode_lengths,
            "reward_terms": {k: term_sums[k] / term_counts[k] for k in term_sums},
            "reward_mean": raw_reward_sum / (buffer.n_steps * self.n_envs),
        }

    # ---- state --------------------------------------------------------------------------------
    def composer_states(self) -> list[Any] | None:
        """Each env's reward-composer state (plain values), or None if any env has none to save."""
        states = []
        for env in self.envs:
            composer = env_composer(env)
            if composer is None or not hasattr(composer, "state_dict"):
                return None
            states.append(to_plain(composer.state_dict()))
        return states

    def load_composer_states(self, states: list[Any]) -> None:
        for env, state in zip(self.envs, states, strict=True):
            composer = env_composer(env)
            if composer is not None and hasattr(composer, "load_state_dict"):
                composer.load_state_dict(state)

    def close(self) -> None:
        for env in self.envs:
            env.close()
