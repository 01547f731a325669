"""Train the PPO request router: behaviour-cloning warm start, then the PPO loop; ``train()`` and its CLI.

``train(config, out_dir)`` reads a config like ``configs/ppo_vidur.yaml``, optionally clones
heuristic routers from demonstrations, then runs PPO on ``n_envs`` environments stepped one
after another (Vidur or live: :mod:`schedulers.environments`). It writes per-update metrics
(``metrics.csv``, TensorBoard when installed), atomic checkpoints that an interrupted run resumes
from, ``policy.pt`` for :class:`schedulers.rl.ppo_router.PPORouter`, and ``learning_curves.png``.

Where each part lives: the config schema in :mod:`schedulers.train.config`; the envs, their
seeded episodes, rollouts, demonstrations and per-request credit in
:mod:`schedulers.train.experience`; logs and plots in :mod:`schedulers.train.metrics_log`;
checkpoint files in :mod:`schedulers.train.checkpoints`; the cloning loss in
:mod:`schedulers.rl.behaviour_cloning`, the PPO loss in :mod:`schedulers.rl.ppo`; learning from a
gateway's decision log in :mod:`schedulers.train.offline`. This module holds the training state
and the loop: BC, then rollout, advantages, update, checkpoint.
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

from .checkpoints import (atomic_save, latest_checkpoint, latest_good_checkpoint, remove_checkpoints, save_checkpoint)
from .metrics_log import MetricsLog, format_duration, format_return, plot_learning_curves, progress, write_csv
from ..rl.behaviour_cloning import fit_to_demonstrations
from ..rl.checkpoint_file import read_checkpoint
from ..rl.scorer_network import ReplicaScorerPolicy
from ..rl.ppo import EntropyController, RewardScaler, UpdateSettings, categorical_kl, explained_variance, ppo_update
from ..rl.rollout import RolloutBuffer
from .config import RESUMABLE_CHANGES, EnvFactory, added_at_default, diff_paths, load_config
from .env_factory import routing_env_factory
from .experience import LockstepEnvs, env_composer, env_spaces


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
                 callback: Callable[[dict[str, Any]], None] | None = None,
                 bc_callback: Callable[[int, int], None] | None = None) -> None:
        self.cfg, self.source, self.out_dir = cfg, source, out_dir
        self.callback = callback
        #: ``bc_callback(done, total)`` after each stage of behaviour cloning (a heuristic's
        #: demonstrations collected, an epoch fitted): BC takes minutes before the first update
        self.bc_callback = bc_callback
        ppo = cfg["ppo"]
        self.n_envs, self.n_steps = ppo["n_envs"], ppo["n_steps"]
        self.batch_size = self.n_envs * self.n_steps
        self.num_updates = ppo["total_timesteps"] // self.batch_size
        self.progress_on = cfg["logging"]["progress"]
        torch.set_num_threads(cfg["torch_threads"])
        torch.manual_seed(cfg["seeds"]["torch"])
        self.shuffle_gen = torch.Generator().manual_seed(cfg["seeds"]["torch"] + 1)

        self.envs = [env_factory() for _ in range(self.n_envs)]
        self.num_replicas, self.n_features = env_spaces(self.envs)
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
        #: the envs and their episodes: where experience comes from (schedulers.train.experience)
        self.experience = LockstepEnvs(self.envs, cfg["seeds"]["train_start"], ppo["envs_per_seed"],
                                       self.request_credit, self.scaler)

        self.update = 0
        self.global_step = 0
        self.bc_done = False
        self.wall_time = 0.0
        self.bc_metrics: list[dict[str, Any]] = []

    # ---- environments ---------------------------------------------------------------------
    def _reward_scales_returns(self) -> bool:
        """Whether the env's reward composer normalizes every top-level term with ``return_std``."""
        composer = env_composer(self.envs[0])
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

    def _log(self, text: str) -> None:
        progress(text, self.progress_on)

    def behaviour_cloning(self) -> None:
        """Clone the configured heuristics (cross-entropy), optionally fitting the critic too; or,
        with ``bc.from_policy``, start from that clone (:meth:`_start_from_clone`)."""
        bc = self.cfg["bc"]
        if bc["from_policy"] is not None:
            self._start_from_clone(bc["from_policy"])
            return
        t0 = time.perf_counter()
        steps_per_env = self._demo_steps_per_env()
        total = len(bc["heuristics"]) + bc["epochs"]
        stage = 0

        def advance() -> None:
            nonlocal stage
            stage += 1
            if self.bc_callback is not None:
                self.bc_callback(stage, total)

        def epoch_done(text: str) -> None:
            self._log(text)
            advance()

        blocks = []
        for h in bc["heuristics"]:
            progress(f"[bc] collecting {steps_per_env * self.n_envs} demonstration steps from {h!r}", self.progress_on)
            blocks.append(self.experience.demonstrations(h, steps_per_env, self.policy, self.source))
            advance()
        collect_time = time.perf_counter() - t0
        self.bc_metrics += fit_to_demonstrations(self.policy, blocks, bc, self.cfg["ppo"], self.shuffle_gen, epoch_done)
        self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        self.bc_done = True
        self.wall_time += time.perf_counter() - t0
        write_csv(self.out_dir / "bc_metrics.csv", self.bc_metrics)
        atomic_save({**self.policy.to_checkpoint(), "observation": self.observation, "kind": "bc_policy",
                     "heuristics": bc["heuristics"]}, self.out_dir / "bc_policy.pt")
        progress(f"[bc] done in {time.perf_counter() - t0:.1f}s (collection {collect_time:.1f}s)", self.progress_on)

    def _start_from_clone(self, path: str) -> None:
        """Take the weights of a ``bc_policy.pt`` written by another run as this run's warm start
        (and KL reference); it must have this run's policy shape and observation settings."""
        data = read_checkpoint(path, required=("policy_kwargs", "policy_state"))
        mine = self.policy.to_checkpoint()["policy_kwargs"]
        theirs = {k: v for k, v in data["policy_kwargs"].items() if k != "temperature"}
        if theirs != {k: v for k, v in mine.items() if k != "temperature"} \
                or (data.get("observation") or {}) != self.observation:
            raise ConfigError(f"expected a clone of this run's policy shape {mine} and observation settings, got "
                              f"{data['policy_kwargs']} and {data.get('observation')}", source=self.source,
                              path="bc.from_policy")
        try:
            self.policy.load_state_dict(data["policy_state"])
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(f"{path}: {exc}", source=self.source, path="bc.from_policy") from None
        self.reference = copy.deepcopy(self.policy).requires_grad_(False)
        self.bc_done = True
        self.bc_metrics = []
        atomic_save({**self.policy.to_checkpoint(), "observation": self.observation, "kind": "bc_policy",
                     "heuristics": data.get("heuristics"), "cloned_in": str(path)}, self.out_dir / "bc_policy.pt")
        progress(f"[bc] started from the clone {path}", self.progress_on)

    # ---- PPO ------------------------------------------------------------------------------
    def _collect_rollout(self) -> dict[str, Any]:
        """Fill the buffer with ``n_steps`` lockstep steps and compute advantages; return rollout statistics."""
        stats = self.experience.rollout(self.policy, self.buffer, self.global_step)
        self.global_step += self.batch_size
        t0 = time.perf_counter()
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
                last_values = self.policy.value(self.experience.obs_tensor(self.policy))
            self.buffer.compute_advantages(last_values, ppo["gamma"], ppo["gae_lambda"])
        stats["t_policy"] += time.perf_counter() - t0
        return stats

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
            "episode_index": list(self.experience.episode_index),
            "episode_step": list(self.experience.episode_step),
            "torch_rng": torch.get_rng_state(),
            "shuffle_rng": self.shuffle_gen.get_state(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "controller": self.controller.state_dict() if self.controller is not None else None,
            "reward_composers": self.experience.composer_states(),
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
        self.experience.episode_index = [int(x) for x in ckpt["episode_index"]]
        self.experience.episode_step = [int(x) for x in ckpt["episode_step"]]
        torch.set_rng_state(ckpt["torch_rng"])
        self.shuffle_gen.set_state(ckpt["shuffle_rng"])
        if self.scaler is not None and ckpt["scaler"] is not None:
            self.scaler.load_state_dict(ckpt["scaler"])
        if self.controller is not None and ckpt["controller"] is not None:
            self.controller.load_state_dict(ckpt["controller"])
        if ckpt.get("reward_composers") is not None:
            self.experience.load_composer_states(ckpt["reward_composers"])
        self.bc_metrics = list(ckpt.get("bc_metrics") or [])

    # ---- main loop --------------------------------------------------------------------------
    def run(self, log: MetricsLog) -> list[dict[str, Any]]:
        """BC (unless done), then PPO updates until ``total_timesteps``; checkpoints on the way."""
        if self.cfg["bc"]["enabled"] and not self.bc_done:
            self.behaviour_cloning()
            self.save_checkpoint()
        self.experience.restart_all()
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
        self.experience.close()


def train(
    config: str | os.PathLike | Mapping[str, Any],
    out_dir: str | os.PathLike,
    env_factory: EnvFactory | None = None,
    resume: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
    bc_callback: Callable[[int, int], None] | None = None,
) -> TrainResult:
    """Train a PPO router; resume from ``out_dir``'s latest checkpoint when ``resume`` is true.

    ``env_factory`` builds one environment per call (default: the Vidur env named by the
    config). ``callback(row)`` runs after each update and checkpoint; an exception it raises
    stops training (tests use it to simulate an interruption). ``bc_callback(done, total)`` runs
    after each stage of behaviour cloning (for a progress bar). With ``resume=False`` existing
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

    trainer = Trainer(cfg, source, out, factory, callback, bc_callback)
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
