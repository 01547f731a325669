"""Train the PPO request router: behaviour-cloning warm start, then the PPO loop; ``train()`` and its CLI.

``train(config, out_dir)`` reads a config like ``configs/ppo_vidur.yaml``, optionally clones
heuristic routers from demonstrations, then runs PPO on ``n_envs`` environments stepped one
after another. It writes per-update metrics (``metrics.csv``, TensorBoard when installed),
atomic checkpoints that an interrupted run resumes from, ``policy.pt`` for
:class:`schedulers.rl.ppo_router.PPORouter`, and ``learning_curves.png``. The config schema is in
:mod:`schedulers.train.config`, logs and plots in :mod:`schedulers.train.metrics_log`, checkpoint files
in :mod:`schedulers.train.checkpoints`, the cloning step in :mod:`schedulers.rl.behaviour_cloning`.

Environment episodes are seeded ``seeds.train_start + env_index + n_envs * episode_index`` (with
``ppo.envs_per_seed = k``, each group of k envs shares one seed: ``env_index // k`` and
``n_envs // k``, so that ``ppo.advantage_baseline: paired`` can compare returns on the same
arrivals), so training never meets the evaluation seeds, and a resumed run restarts each environment's
interrupted episode with the next seed (or, if the checkpoint fell on an episode boundary, with
exactly the seed the uninterrupted run would have used).

Per-request credit: when the env credits its reward per routed request (``env.reward_credit ==
"request"``, see :mod:`schedulers.sim.env`), each ``(decision, reward)`` pair of
``info["credits"]`` is added to the rollout step that made that decision, and rollouts (and
demonstrations) hold whole episodes, so every decision has its credit before GAE runs.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from rewardkit.errors import ConfigError
from rewardkit.schedules import make_schedule

from .checkpoints import (atomic_save, latest_checkpoint, latest_good_checkpoint, remove_checkpoints, save_checkpoint,
                          to_plain)
from .metrics_log import MetricsLog, format_duration, format_return, plot_learning_curves, progress, write_csv
from ..rl.behaviour_cloning import Demos, fit_to_demonstrations
from ..rl.policy import ReplicaScorerPolicy
from ..rl.ppo import EntropyController, RewardScaler, UpdateSettings, categorical_kl, explained_variance, ppo_update
from ..rl.rollout import RolloutBuffer
from .config import RESUMABLE_CHANGES, EnvFactory, added_at_default, diff_paths, load_config
from .env_factory import routing_env_factory


@dataclass
class TrainResult:
    """Where things were written and how far training got."""

    out_dir: Path
    policy_path: Path
    checkpoint_path: Path
    updates: int
    global_step: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    bc_metrics: list[dict[str, Any]] = field(default_factory=list)


class Trainer:
    """Holds the envs, policy and training state; :meth:`run` does BC then PPO updates."""

    def __init__(self, cfg: dict[str, Any], source: str, out_dir: Path, env_factory: EnvFactory,
                 callback: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg, self.source, self.out_dir = cfg, source, out_dir
        self.callback = callback
        ppo = cfg["ppo"]
        self.n_envs, self.n_steps = ppo["n_envs"], ppo["n_steps"]
        self.batch_size = self.n_envs * self.n_steps
        self.num_updates = ppo["total_timesteps"] // self.batch_size
        self.progress_on = cfg["logging"]["progress"]
        torch.set_num_threads(cfg["torch_threads"])
        torch.manual_seed(cfg["seeds"]["torch"])
        self.shuffle_gen = torch.Generator().manual_seed(cfg["seeds"]["torch"] + 1)

        self.envs = [env_factory() for _ in range(self.n_envs)]
        self.num_replicas, self.n_features = self._check_spaces()
        self.policy = ReplicaScorerPolicy(self.n_features, **cfg["policy"])
        #: the env's observation settings, saved beside the weights so a router rebuilds the same rows
        obs_cfg = getattr(getattr(self.envs[0].unwrapped, "env_config", None), "observation", None)
        self.observation: dict[str, Any] = dataclasses.asdict(obs_cfg) if dataclasses.is_dataclass(obs_cfg) else {}
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=ppo["learning_rate"], eps=ppo["adam_eps"])
        #: the warm-start policy: the behaviour-cloned one after cloning, else the initial policy.
        #: KL(pi || reference) is reported every update (``kl_warm_start``) and penalised with ``kl_ref.coef``.
        self.reference: ReplicaScorerPolicy = copy.deepcopy(self.policy).requires_grad_(False)
        self.ent_schedule = make_schedule(cfg["entropy"]["coef"], path="entropy.coef", source=source)
        self.kl_schedule = make_schedule(cfg["kl_ref"]["coef"], path="kl_ref.coef", source=source)
        ent = cfg["entropy"]
        self.controller = (
            EntropyController(ent["target"], ent["controller"], ent["rate"], tuple(ent["bounds"]))
            if ent["target"] is not None else None
        )
        if ppo["reward_scaling"] and self._reward_scales_returns():
            raise ConfigError(
                "expected false: the reward config already divides every term by the running std of its return "
                "(normalize: return_std), and scaling twice hides the terms' weights; scale in one place",
                source=source, path="ppo.reward_scaling")
        self.request_credit = self._check_request_credit()
        self.scaler = RewardScaler(self.n_envs, ppo["gamma"]) if ppo["reward_scaling"] else None
        self.buffer = RolloutBuffer(self.n_steps, self.n_envs, (self.num_replicas, self.n_features))

        self.update = 0
        self.global_step = 0
        self.bc_done = False
        self.wall_time = 0.0
        self.episode_index = [0] * self.n_envs
        self.episode_step = [0] * self.n_envs
        self.obs: list[np.ndarray] = [np.zeros((self.num_replicas, self.n_features), np.float32)] * self.n_envs
        self.ep_return = [0.0] * self.n_envs
        self.bc_metrics: list[dict[str, Any]] = []

    # ---- environments ---------------------------------------------------------------------
    def _reward_scales_returns(self) -> bool:
        """Whether the env's reward composer normalizes every top-level term with ``return_std``."""
        composer = _env_composer(self.envs[0])
        to_dict = getattr(composer, "to_dict", None)
        if not callable(to_dict):
            return False
        terms = to_dict().get("components", {}).values()
        return bool(terms) and all((t.get("normalize") or {}).get("type") == "return_std" for t in terms)

    def _check_request_credit(self) -> bool:
        """Whether the env credits rewards per routed request; then rollouts must hold whole episodes."""
        env = self.envs[0].unwrapped
        if getattr(env, "reward_credit", "step") != "request":
            return False
        length = int(env.requests_per_episode)
        why = (f"the reward is per request ({getattr(env, 'reward_source', 'reward')}), credited to the decision that "
               "routed each request once it completes, so ")
        if self.n_steps % length:
            raise ConfigError(f"expected a multiple of the episode length {length}: {why}a rollout must hold whole "
                              f"episodes; got {self.n_steps}", source=self.source, path="ppo.n_steps")
        per_env = self._demo_steps_per_env()
        if self.cfg["bc"]["enabled"] and per_env % length:
            raise ConfigError(f"expected demo_steps / (heuristics * n_envs) to be a multiple of the episode length "
                              f"{length}: {why}demonstrations must hold whole episodes; got {per_env} steps per env "
                              "and heuristic", source=self.source, path="bc.demo_steps")
        return True

    def _demo_steps_per_env(self) -> int:
        """Demonstration steps each env takes per cloned heuristic (``bc.demo_steps`` split evenly)."""
        bc = self.cfg["bc"]
        return max(1, bc["demo_steps"] // len(bc["heuristics"]) // self.n_envs)

    def _credit(self, rewards: torch.Tensor, t: int, i: int, episode_start: int, info: dict) -> None:
        """Add env ``i``'s per-request credits to ``rewards[decision slot, i]`` (slots up to ``t``)."""
        for decision, value in info.get("credits") or ():
            slot = episode_start + int(decision)
            if not episode_start <= slot <= t:
                raise RuntimeError(f"credit for decision {decision} falls outside the rollout (slot {slot}, step {t})")
            rewards[slot, i] += float(value)

    def _log(self, text: str) -> None:
        progress(text, self.progress_on)

    def _check_spaces(self) -> tuple[int, int]:
        import gymnasium as gym

        env = self.envs[0]
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 2:
            raise TypeError(f"env observation_space must be a 2-D Box (replicas, features), got {obs_space}")
        if not isinstance(act_space, gym.spaces.Discrete) or int(act_space.n) != obs_space.shape[0]:
            raise TypeError(f"env action_space must be Discrete(num_replicas={obs_space.shape[0]}), got {act_space}")
        for other in self.envs[1:]:
            if other.observation_space.shape != obs_space.shape:
                raise TypeError("all training envs must have the same observation shape")
        return int(obs_space.shape[0]), int(obs_space.shape[1])

    def _episode_seed(self, i: int) -> int:
        """Env ``i``'s next episode seed; the ``ppo.envs_per_seed`` envs of a group share it."""
        per_seed = self.cfg["ppo"]["envs_per_seed"]
        return self.cfg["seeds"]["train_start"] + i // per_seed + self.n_envs // per_seed * self.episode_index[i]

    def _start_episode(self, i: int) -> None:
        obs, _ = self.envs[i].reset(seed=self._episode_seed(i))
        self.obs[i] = np.asarray(obs, dtype=np.float32)
        self.episode_step[i] = 0
        self.ep_return[i] = 0.0

    def _restart_all(self) -> None:
        """Begin a fresh episode in every env, abandoning ones in progress (they take the next seed)."""
        for i in range(self.n_envs):
            if self.episode_step[i] > 0:
                self.episode_index[i] += 1
                if self.scaler is not None:
                    self.scaler.returns[i] = 0.0  # the abandoned episode's discounted return
            self._start_episode(i)

    def _step_env(self, i: int, action: int) -> tuple[float, bool, bool, np.ndarray | None, dict]:
        """Step env ``i``; on episode end start the next one. Returns (reward, term, trunc, final_obs, info)."""
        obs, reward, terminated, truncated, info = self.envs[i].step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise FloatingPointError(f"env {i} returned a non-finite reward {reward} at PPO step {self.global_step}")
        self.episode_step[i] += 1
        self.ep_return[i] += reward
        final = None
        if terminated or truncated:
            final = np.asarray(obs, dtype=np.float32)
            self.episode_index[i] += 1
            self._start_episode(i)
        else:
            self.obs[i] = np.asarray(obs, dtype=np.float32)
        return reward, bool(terminated), bool(truncated), final, info

    def _obs_tensor(self) -> torch.Tensor:
        return self.policy.as_tensor(np.stack(self.obs))

    # ---- behaviour cloning ------------------------------------------------------------------
    def _collect_demos(self, heuristic: str, steps_per_env: int) -> Demos:
        """Let ``heuristic`` route ``steps_per_env`` steps in every env; record what it chose."""
        shape = (steps_per_env, self.n_envs)
        obs = torch.zeros(shape + (self.num_replicas, self.n_features))
        final_obs = torch.zeros_like(obs)
        actions = torch.zeros(shape, dtype=torch.long)
        rewards = torch.zeros(shape)
        term = torch.zeros(shape, dtype=torch.bool)
        trunc = torch.zeros(shape, dtype=torch.bool)
        self._restart_all()
        for t in range(steps_per_env):
            obs[t] = self._obs_tensor()
            for i, env in enumerate(self.envs):
                try:
                    a = int(env.unwrapped.heuristic_action(heuristic))
                except (ValueError, KeyError) as exc:
                    if t > 0:
                        raise
                    raise ConfigError(f"expected a heuristic the env knows, got {heuristic!r} ({exc})",
                                      source=self.source, path="bc.heuristics") from None
                actions[t, i] = a
                episode_start = t - self.episode_step[i]
                r, te, tr, final, info = self._step_env(i, a)
                term[t, i], trunc[t, i] = te, tr
                if self.request_credit:
                    self._credit(rewards, t, i, episode_start, info)
                else:
                    rewards[t, i] = r
                if final is not None:
                    final_obs[t, i] = torch.from_numpy(final)
            if self.scaler is not None and not self.request_credit:
                rewards[t] = self.scaler(rewards[t], term[t] | trunc[t])
        if self.scaler is not None and self.request_credit:  # credits are final once the episodes are
            rewards = self.scaler.scale_rollout(rewards, term | trunc)
        return Demos(obs, actions, rewards, term, trunc, final_obs, self._obs_tensor())

    def behaviour_cloning(self) -> None:
        """Clone the configured heuristics (cross-entropy), optionally fitting the critic too."""
        bc = self.cfg["bc"]
        t0 = time.perf_counter()
        steps_per_env = self._demo_steps_per_env()
        blocks = []
        for h in bc["heuristics"]:
            progress(f"[bc] collecting {steps_per_env * self.n_envs} demonstration steps from {h!r}", self.progress_on)
            blocks.append(self._collect_demos(h, steps_per_env))
        collect_time = time.perf_counter() - t0
        self.bc_metrics += fit_to_demonstrations(self.policy, blocks, bc, self.cfg["ppo"], self.shuffle_gen, self._log)
        self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        self.bc_done = True
        self.wall_time += time.perf_counter() - t0
        write_csv(self.out_dir / "bc_metrics.csv", self.bc_metrics)
        atomic_save({**self.policy.to_checkpoint(), "observation": self.observation, "kind": "bc_policy",
                     "heuristics": bc["heuristics"]}, self.out_dir / "bc_policy.pt")
        progress(f"[bc] done in {time.perf_counter() - t0:.1f}s (collection {collect_time:.1f}s)", self.progress_on)

    # ---- PPO ------------------------------------------------------------------------------
    def _collect_rollout(self) -> dict[str, Any]:
        """Fill the buffer with ``n_steps`` lockstep steps; return rollout statistics."""
        self.buffer.reset()
        t_policy = t_env = 0.0
        term_sums: dict[str, float] = {}
        term_counts: dict[str, int] = {}
        episode_returns: list[float] = []
        episode_lengths: list[int] = []
        raw_reward_sum = 0.0
        for t in range(self.n_steps):
            t0 = time.perf_counter()
            obs = self._obs_tensor()
            step = self.policy.act(obs)
            t1 = time.perf_counter()
            t_policy += t1 - t0
            rewards = torch.zeros(self.n_envs)
            term = torch.zeros(self.n_envs, dtype=torch.bool)
            trunc = torch.zeros(self.n_envs, dtype=torch.bool)
            finals: dict[int, np.ndarray] = {}
            credited: list[tuple[int, int, dict]] = []
            for i in range(self.n_envs):
                ep_ret, ep_len = self.ep_return[i], self.episode_step[i]
                r, te, tr, final, info = self._step_env(i, int(step.action[i]))
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
                    final_values[idx] = self.policy.value(self.policy.as_tensor(np.stack([finals[i] for i in idx])))
            if self.scaler is not None and not self.request_credit:
                rewards = self.scaler(rewards, term | trunc)
            self.buffer.add(obs, step.action, step.log_prob, step.value, rewards, term, trunc, final_values)
            for i, episode_start, info in credited:
                self._credit(self.buffer.rewards, t, i, episode_start, info)
            self.global_step += self.n_envs
            t_policy += time.perf_counter() - t2
        t0 = time.perf_counter()
        if self.scaler is not None and self.request_credit:  # credits are final once the episodes are
            self.buffer.rewards = self.scaler.scale_rollout(self.buffer.rewards, self.buffer.terminated | self.buffer.truncated)
        ppo = self.cfg["ppo"]
        if ppo["advantage_baseline"] != "critic":
            try:
                self.buffer.compute_paired_advantages(ppo["envs_per_seed"], ppo["gamma"],
                                                      use_values=ppo["advantage_baseline"] == "paired_critic")
            except ValueError as exc:
                raise ConfigError(f"expected rollouts of whole episodes aligned across envs sharing a seed "
                                  f"(ppo.n_steps a multiple of the episode length): {exc}",
                                  source=self.source, path="ppo.advantage_baseline") from None
        else:
            with torch.no_grad():
                last_values = self.policy.value(self._obs_tensor())
            self.buffer.compute_advantages(last_values, ppo["gamma"], ppo["gae_lambda"])
        t_policy += time.perf_counter() - t0
        return {
            "t_policy": t_policy,
            "t_env": t_env,
            "episode_returns": episode_returns,
            "episode_lengths": episode_lengths,
            "reward_terms": {k: term_sums[k] / term_counts[k] for k in term_sums},
            "reward_mean": raw_reward_sum / self.batch_size,
        }

    def _coefficients(self) -> dict[str, float]:
        ppo = self.cfg["ppo"]
        frac = 1.0 - self.update / max(self.num_updates, 1) if ppo["anneal_lr"] else 1.0
        ent = self.ent_schedule(self.global_step)
        if self.controller is not None and self.controller.mode == "coef":
            ent *= self.controller.scale
        return {"learning_rate": ppo["learning_rate"] * frac, "ent_coef": ent,
                "kl_coef": max(0.0, self.kl_schedule(self.global_step))}

    def ppo_iteration(self) -> dict[str, Any]:
        """One rollout plus one update; returns the metrics row."""
        ppo = self.cfg["ppo"]
        t_start = time.perf_counter()
        coefs = self._coefficients()
        for group in self.optimizer.param_groups:
            group["lr"] = coefs["learning_rate"]
        stats = self._collect_rollout()
        t0 = time.perf_counter()
        batch = self.buffer.batch()
        settings = UpdateSettings(
            n_epochs=ppo["n_epochs"], minibatch_size=ppo["minibatch_size"], clip_coef=ppo["clip_coef"],
            vf_coef=ppo["vf_coef"], ent_coef=coefs["ent_coef"], clip_value=ppo["clip_value"],
            max_grad_norm=ppo["max_grad_norm"], normalize_advantages=ppo["normalize_advantages"],
            target_kl=ppo["target_kl"], kl_coef=coefs["kl_coef"],
        )
        out = ppo_update(self.policy, self.optimizer, batch, settings, self.reference, self.shuffle_gen)
        with torch.no_grad():
            out["kl_warm_start"] = float(categorical_kl(self.policy.logits(batch.obs), self.reference.logits(batch.obs)).mean())
            out["agree_warm_start"] = float(
                (self.policy.logits(batch.obs).argmax(-1) == self.reference.logits(batch.obs).argmax(-1)).float().mean()
            )
        ev = explained_variance(batch.values, batch.returns)
        if self.controller is not None:
            scale = self.controller.update(out["entropy"], self.num_replicas)
            if self.controller.mode == "temperature":
                self.policy.temperature = self.cfg["policy"]["temperature"] * scale
        t_update = time.perf_counter() - t0
        elapsed = time.perf_counter() - t_start
        self.wall_time += elapsed
        self.update += 1
        rets, lens = stats["episode_returns"], stats["episode_lengths"]
        row: dict[str, Any] = {
            "update": self.update,
            "global_step": self.global_step,
            "wall_time": round(self.wall_time, 3),
            "env_steps_per_s": self.batch_size / elapsed,
            "time_share_policy": stats["t_policy"] / elapsed,
            "time_share_env": stats["t_env"] / elapsed,
            "time_share_update": t_update / elapsed,
            **coefs,
            "temperature": self.policy.temperature,
            "entropy_scale": self.controller.scale if self.controller is not None else 1.0,
            **out,
            "entropy_norm": out["entropy"] / math.log(self.num_replicas) if self.num_replicas > 1 else float("nan"),
            "explained_variance": ev,
            "reward_mean": stats["reward_mean"],
            "reward_scale": self.scaler.std if self.scaler is not None else 1.0,
            "episodes": len(rets),
            "episode_return_mean": float(np.mean(rets)) if rets else float("nan"),
            "episode_length_mean": float(np.mean(lens)) if lens else float("nan"),
        }
        for i, share in enumerate(self.buffer.action_shares(self.num_replicas)):
            row[f"action_share/{i}"] = share
        for key, value in stats["reward_terms"].items():
            row[f"reward_terms/{key}"] = value
        return row

    # ---- checkpoints ------------------------------------------------------------------------
    def _composer_states(self) -> list[Any] | None:
        states = []
        for env in self.envs:
            composer = _env_composer(env)
            if composer is None or not hasattr(composer, "state_dict"):
                return None
            states.append(to_plain(composer.state_dict()))
        return states

    def state(self) -> dict[str, Any]:
        """Everything needed to continue training exactly where it stopped."""
        return {
            "kind": "ppo_training",
            "config": self.cfg,
            **self.policy.to_checkpoint(),
            "observation": self.observation,
            "optimizer": self.optimizer.state_dict(),
            "reference_state": self.reference.state_dict(),
            "update": self.update,
            "global_step": self.global_step,
            "bc_done": self.bc_done,
            "wall_time": self.wall_time,
            "episode_index": list(self.episode_index),
            "episode_step": list(self.episode_step),
            "torch_rng": torch.get_rng_state(),
            "shuffle_rng": self.shuffle_gen.get_state(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "controller": self.controller.state_dict() if self.controller is not None else None,
            "reward_composers": self._composer_states(),
            "bc_metrics": self.bc_metrics,
        }

    def save_checkpoint(self) -> Path:
        """Checkpoint :meth:`state` under ``out_dir/checkpoints``, keeping ``logging.keep_checkpoints``."""
        return save_checkpoint(self.state(), self.out_dir, self.update, self.cfg["logging"]["keep_checkpoints"])

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Load a checkpoint written by :meth:`state` (config compatibility checked by the caller)."""
        self.policy.load_state_dict(ckpt["policy_state"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if ckpt["reference_state"] is not None:
            self.reference.load_state_dict(ckpt["reference_state"])
        self.update, self.global_step = int(ckpt["update"]), int(ckpt["global_step"])
        self.bc_done, self.wall_time = bool(ckpt["bc_done"]), float(ckpt["wall_time"])
        self.episode_index = [int(x) for x in ckpt["episode_index"]]
        self.episode_step = [int(x) for x in ckpt["episode_step"]]
        torch.set_rng_state(ckpt["torch_rng"])
        self.shuffle_gen.set_state(ckpt["shuffle_rng"])
        if self.scaler is not None and ckpt["scaler"] is not None:
            self.scaler.load_state_dict(ckpt["scaler"])
        if self.controller is not None and ckpt["controller"] is not None:
            self.controller.load_state_dict(ckpt["controller"])
        if ckpt.get("reward_composers") is not None:
            for env, state in zip(self.envs, ckpt["reward_composers"], strict=True):
                composer = _env_composer(env)
                if composer is not None and hasattr(composer, "load_state_dict"):
                    composer.load_state_dict(state)
        self.bc_metrics = list(ckpt.get("bc_metrics") or [])

    # ---- main loop --------------------------------------------------------------------------
    def run(self, log: MetricsLog) -> list[dict[str, Any]]:
        """BC (unless done), then PPO updates until ``total_timesteps``; checkpoints on the way."""
        if self.cfg["bc"]["enabled"] and not self.bc_done:
            self.behaviour_cloning()
            self.save_checkpoint()
        self._restart_all()
        every = self.cfg["logging"]["checkpoint_every"]
        rows: list[dict[str, Any]] = []
        start_update, t_run = self.update, time.perf_counter()
        while self.update < self.num_updates:
            row = self.ppo_iteration()
            rows.append(row)
            log.log(row, self.global_step)
            done_here = self.update - start_update
            eta = (time.perf_counter() - t_run) / done_here * (self.num_updates - self.update)
            progress(
                f"[ppo] update {self.update}/{self.num_updates} step {self.global_step} "
                f"return {format_return(row['episode_return_mean'])} entropy {row['entropy_norm']:.3f} kl {row['approx_kl']:.4f} "
                f"clip {row['clip_fraction']:.3f} kl_ws {row['kl_warm_start']:.3f} ev {row['explained_variance']:.3f} "
                f"sps {row['env_steps_per_s']:.0f} "
                f"eta {format_duration(eta)}",
                self.progress_on,
            )
            if self.update % every == 0 or self.update == self.num_updates:
                self.save_checkpoint()
            if self.callback is not None:
                self.callback(row)
        return rows

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _env_composer(env: Any) -> Any:
    """The env's reward composer (its ``composer`` attribute), if it has one."""
    inner = env.unwrapped
    return getattr(inner, "composer", None)


def train(
    config: str | os.PathLike | Mapping[str, Any],
    out_dir: str | os.PathLike,
    env_factory: EnvFactory | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train a PPO router; resume from ``out_dir``'s latest checkpoint when ``resume`` is true.

    ``env_factory`` builds one environment per call (default: the Vidur env named by the
    config). ``callback(row)`` runs after each update and checkpoint; an exception it raises
    stops training (tests use it to simulate an interruption). With ``resume=False`` existing
    checkpoints in ``out_dir`` are deleted and training starts over.
    """
    cfg, source = load_config(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    factory = env_factory if env_factory is not None else routing_env_factory(cfg, source)

    ckpt_path, ckpt = None, None
    found = latest_good_checkpoint(out, log=lambda msg: print(msg, file=sys.stderr, flush=True)) if resume else None
    if found is not None:
        ckpt_path, ckpt = found
        diffs = [d for d in diff_paths(ckpt["config"], cfg)
                 if not d.startswith(RESUMABLE_CHANGES) and not added_at_default(ckpt["config"], cfg, d)]
        if diffs:
            raise ConfigError(
                f"expected the same settings as the checkpoint {ckpt_path} to resume; differs at {', '.join(diffs)} "
                "(use another out_dir or resume=False)",
                source=source, path=diffs[0],
            )
    elif not resume and latest_checkpoint(out) is not None:
        remove_checkpoints(out)

    with open(out / "config.yaml", "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)

    trainer = Trainer(cfg, source, out, factory, callback)
    seeds = cfg["seeds"]
    progress(f"[train] seeds: torch {seeds['torch']}, training episodes from seed {seeds['train_start']} "
             f"(evaluation seeds {seeds['eval']} are never trained on)", trainer.progress_on)
    log = None
    try:
        if ckpt is not None:
            trainer.restore(ckpt)
            progress(f"[resume] {ckpt_path.name}: update {trainer.update}, step {trainer.global_step}", trainer.progress_on)
        tb_dir = out / "tensorboard" if cfg["logging"]["tensorboard"] else None
        log = MetricsLog(out / "metrics.csv", tb_dir, trainer.update if ckpt is not None else None,
                         trainer.global_step if ckpt is not None else None)
        trainer.run(log)
        final = trainer.save_checkpoint()
        policy_path = out / "policy.pt"
        atomic_save({**trainer.policy.to_checkpoint(), "observation": trainer.observation, "kind": "policy",
                     "update": trainer.update, "global_step": trainer.global_step}, policy_path)
        if cfg["logging"]["plots"] and log.rows:
            plot_learning_curves(out / "metrics.csv", out / "learning_curves.png")
        rows = [dict(r) for r in log.rows]
        return TrainResult(out, policy_path, final, trainer.update, trainer.global_step, rows, list(trainer.bc_metrics))
    finally:
        if log is not None:
            log.close()
        trainer.close()
