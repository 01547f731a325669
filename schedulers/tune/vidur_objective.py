"""The Vidur objective of ``rewardkit optimize --objective vidur``: how good is the router a reward trains?

For each trial: train the PPO router with the trial's reward (the training config's ``reward:``
key set to the trial's ``reward.yaml``) for the training config's budget, evaluate the policy on
paired tuning seeds against round_robin (same arrivals per seed), and return the mean over seeds
of TTFT p99 relative to round_robin (lower is better); with ``objectives=2`` also mean e2e
latency relative to round_robin. Every ``eval_every`` PPO updates the current policy is evaluated
the same way and reported, so a pruner can stop a bad trial early.

Seeds: the optimizer's seeds (:func:`rewardkit.optimize.trial_seeds`) are mapped onto simulator
seeds by phase: search seeds into ``[TUNE_SEED_BASE, +SEED_SPAN)`` (400-699), validation seeds into
``[VALIDATE_SEED_BASE, +SEED_SPAN)`` (700-999); both must stay clear of the training config's
``seeds.eval`` (the report's seeds, 101-105; 106-399 are free for more report seeds) and of its
training seeds (``>= train_start``): checked, a ConfigError otherwise. ``rewardkit optimize
--report`` re-evaluates on ``seeds.eval``.

Repeats (:func:`rewardkit.optimize.trial_repeat`) are independent training runs: repeat ``r``
trains with torch seed ``seeds.torch + r`` on episodes from ``train_start + r * REPEAT_EPISODES``.
Training settings sampled by the search space's ``training:`` sections (dotted keys such as
``ppo.gamma``) are put into the training config; :meth:`VidurObjective.check_training` checks
them before any trial. Each evaluation records its per-seed values (paired validation) and its
cost in training decisions (demonstrations plus PPO steps; :attr:`VidurObjective.full_cost` is a
whole evaluation's at the highest fidelity).

Fidelity: the search trains with the training config's budget (short: the cheap rung), while
``validate_settings`` (dotted keys, e.g. ``{"ppo.total_timesteps": 48000}``) raise the budget of
the runs that decide the verdict: the noise (the base's repeats) and the finalists' validation.
Only a handful of configs pay for the long runs, and the verdict is judged on policies trained
the way a user would train the exported reward. Evaluations are reported to the pruner at each ``eval_every``-th PPO update, with
the update number as the step (the ``halving`` pruner's rungs are 2, 4, 8 updates).

The ``vidur`` entry point (group ``rewardkit.objectives``) is :data:`objective`, configured by
environment variables: ``REWARDKIT_VIDUR_TRAIN_CONFIG`` (default ``configs/tune/ppo_tune.yaml``),
``REWARDKIT_VIDUR_ENV`` (an env config replacing the training config's), ``REWARDKIT_VIDUR_OBJECTIVES``
(1 or 2), ``REWARDKIT_VIDUR_SEEDS`` (tuning seeds per trial, default 3) and
``REWARDKIT_VIDUR_SETTINGS`` (training settings every run starts from, as JSON with dotted keys,
e.g. ``{"ppo.gamma": 0.995}`` for a per-step reward) and ``REWARDKIT_VIDUR_VALIDATE_SETTINGS``
(the same form, applied on top in the noise and validation runs).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import optuna
import yaml

from rewardkit.config import load_yaml
from rewardkit.errors import ConfigError
from rewardkit.optimize import report_evaluation, trial_directory, trial_phase, trial_seeds
from rewardkit.optimize.trial_context import (VALIDATION_SEED_BASE, record_cost, record_seed_values, trial_repeat,
                                              trial_training)

from ..evaluate.paired import evaluate_policies
from ..paths import resolve_path
from ..rl.ppo_router import PPORouter
from ..routing.policy import make_policy
from ..sim.env_config import EnvConfig, load_env_config
from ..train.checkpoints import latest_checkpoint
from ..train.config import load_config
from ..train.trainer import train

TUNE_SEED_BASE = 400
VALIDATE_SEED_BASE = 700
SEED_SPAN = 300
REPEAT_EPISODES = 100_000
BASELINE = "round_robin"
DEFAULT_TRAIN_CONFIG = "configs/tune/ppo_tune.yaml"


@dataclass
class VidurObjective:
    """``objective(config, trial)``: train with the trial's reward, return TTFT p99 / round_robin."""

    train_config: str | Path = DEFAULT_TRAIN_CONFIG
    env_config: str | Path | None = None
    objectives: int = 1
    n_seeds: int = 3
    eval_every: int = 2
    quiet: bool = True
    #: training settings (dotted keys) every evaluation starts from; a trial's sampled ones go on top
    base_settings: Mapping[str, Any] = field(default_factory=dict)
    #: training settings (dotted keys) of the noise and validation runs only, e.g. a longer budget
    validate_settings: Mapping[str, Any] = field(default_factory=dict)
    _baseline_cache: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.objectives not in (1, 2):
            raise ConfigError(f"expected 1 or 2, got {self.objectives!r}", path="objectives")
        if self.n_seeds < 1 or self.eval_every < 0:
            raise ConfigError(f"expected n_seeds >= 1 and eval_every >= 0, got {self.n_seeds}, {self.eval_every}")

    @property
    def directions(self) -> tuple[str, ...]:
        return ("minimize",) * self.objectives

    @classmethod
    def from_environment(cls) -> "VidurObjective":
        """The objective the ``vidur`` entry point uses (see the module doc for the variables)."""
        return cls(train_config=os.environ.get("REWARDKIT_VIDUR_TRAIN_CONFIG", DEFAULT_TRAIN_CONFIG),
                   env_config=os.environ.get("REWARDKIT_VIDUR_ENV") or None,
                   objectives=int(os.environ.get("REWARDKIT_VIDUR_OBJECTIVES", "1")),
                   n_seeds=int(os.environ.get("REWARDKIT_VIDUR_SEEDS", "3")),
                   base_settings=_settings_from_json(os.environ.get("REWARDKIT_VIDUR_SETTINGS", ""),
                                                     "REWARDKIT_VIDUR_SETTINGS"),
                   validate_settings=_settings_from_json(os.environ.get("REWARDKIT_VIDUR_VALIDATE_SETTINGS", ""),
                                                         "REWARDKIT_VIDUR_VALIDATE_SETTINGS"))

    def fidelity(self) -> dict[str, Any]:
        """What a noise or validation run depends on beyond its config and seeds (the optimizer
        recomputes stored runs made under other values): the training and env files' contents and
        the settings and seed counts layered on them."""
        files = {"train_config": resolve_path(self.train_config)}
        if self.env_config is not None:
            files["env_config"] = resolve_path(self.env_config)
        digests = {name: hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] for name, path in files.items()}
        return {**digests, "base_settings": dict(self.base_settings), "validate_settings": dict(self.validate_settings),
                "n_seeds": self.n_seeds, "objectives": self.objectives}

    @property
    def full_cost(self) -> int:
        """Training decisions of one whole evaluation at the highest fidelity (validation's when
        ``validate_settings`` raise it): demonstrations plus every PPO update."""
        path = resolve_path(self.train_config)
        cfg, _ = load_config(path)
        cfg, _ = load_config(self.training_config(resolve_path(cfg["reward"], path), phase="validate"))
        return self._cost(cfg, self._final_step(cfg))

    @staticmethod
    def _final_step(cfg: Mapping[str, Any]) -> int:
        ppo = cfg["ppo"]
        batch = ppo["n_envs"] * ppo["n_steps"]
        return ppo["total_timesteps"] // batch * batch  # the trainer runs whole updates only

    @staticmethod
    def _cost(cfg: Mapping[str, Any], steps: int) -> int:
        return int(steps) + (int(cfg["bc"]["demo_steps"]) if cfg["bc"]["enabled"] else 0)

    def check_training(self, settings: Mapping[str, Any]) -> None:
        """Raise a located ConfigError when ``settings`` (dotted keys) do not fit the training config."""
        path = resolve_path(self.train_config)
        cfg, _ = load_config(path)
        self.training_config(resolve_path(cfg["reward"], path), settings)
        if self.validate_settings:
            self.training_config(resolve_path(cfg["reward"], path), settings, phase="validate")

    # ---- pieces ------------------------------------------------------------------------------
    def training_config(self, reward_path: Path, settings: Mapping[str, Any] | None = None,
                        repeat: int = 0, phase: str = "tune") -> dict[str, Any]:
        """The training config (checked) with ``reward`` set to the trial's file, the sampled training
        ``settings`` put in (over ``validate_settings`` in the ``validate`` phase), repeat ``repeat``'s
        seeds and quiet logging."""
        path = resolve_path(self.train_config)
        cfg, _ = load_config(path)  # errors name the training config file
        raw = load_yaml(path)
        raw["reward"] = str(reward_path)
        fidelity = self.validate_settings if phase == "validate" else {}
        settings = {**self.base_settings, **fidelity, **(settings or {})}
        for key, value in settings.items():
            _put_dotted(raw, key, value, str(path))
        if repeat:
            seeds = dict(raw.get("seeds") or {})
            # from the settings' seeds when they moved them (e.g. {"seeds.torch": 1000}), else the config's
            seeds["torch"] = int(seeds.get("torch", cfg["seeds"]["torch"])) + repeat
            seeds["train_start"] = int(seeds.get("train_start", cfg["seeds"]["train_start"])) + repeat * REPEAT_EPISODES
            raw["seeds"] = seeds
        for key in ("env",):
            if raw.get(key) is not None:
                raw[key] = str(resolve_path(raw[key], path))
        if self.env_config is not None:
            raw["env"] = str(resolve_path(self.env_config))
            raw["env_overrides"] = {}
        logging = dict(raw.get("logging") or {})
        logging.update(tensorboard=False, plots=False, progress=not self.quiet)
        raw["logging"] = logging
        try:
            load_config(raw)
        except ConfigError as exc:
            if settings:
                raise ConfigError(f"with the sampled training settings {dict(settings)}: {exc.detail}",
                                  source=str(path), path=exc.path) from None
            raise
        return raw

    def env(self, cfg: Mapping[str, Any]) -> EnvConfig:
        return load_env_config(cfg["env"], dict(cfg.get("env_overrides") or {}))

    def env_seeds(self, cfg: Mapping[str, Any], trial: Any) -> list[int]:
        """Seeds for this evaluation: search and validation seeds mapped clear of training and report seeds."""
        checked, _ = load_config(cfg)
        report = list(checked["seeds"]["eval"])
        phase = trial_phase(trial)
        if phase == "report":
            return report
        given = trial_seeds(trial, range(self.n_seeds))
        if phase == "validate":
            seeds = [VALIDATE_SEED_BASE + (s - VALIDATION_SEED_BASE) % SEED_SPAN for s in given]
        else:
            seeds = [TUNE_SEED_BASE + s % SEED_SPAN for s in given]
        clash = sorted(set(seeds) & set(report))
        if clash or max(seeds) >= checked["seeds"]["train_start"]:
            raise ConfigError(f"{phase} seeds {seeds} overlap the report seeds {report} or reach train_start "
                              f"{checked['seeds']['train_start']}", path="seeds")
        return seeds

    def baseline(self, env: EnvConfig, seeds: list[int]) -> dict[int, dict[str, float]]:
        """round_robin's metrics per seed (computed once per env and seed)."""
        missing = [s for s in seeds if (env.name, s) not in self._baseline_cache]
        if missing:
            res = evaluate_policies(env, {BASELINE: make_policy(BASELINE)}, missing, baseline=BASELINE,
                                    log=lambda msg: None)
            for row in res.episodes:
                self._baseline_cache[(env.name, int(row["seed"]))] = {k: row[k] for k in ("ttft_p99", "e2e_mean")}
        return {s: self._baseline_cache[(env.name, s)] for s in seeds}

    def ratios(self, env: EnvConfig, policy_path: Path, seeds: list[int]) -> tuple[list[float], list[float], int]:
        """Per seed: TTFT p99 and mean e2e of the policy over round_robin's; simulated requests."""
        base = self.baseline(env, seeds)
        res = evaluate_policies(env, {"ppo": PPORouter.from_checkpoint(policy_path)}, seeds, baseline="ppo",
                                log=lambda msg: None)
        ttft, e2e, requests = [], [], 0
        for row in res.episodes:
            seed = int(row["seed"])
            ttft.append(row["ttft_p99"] / base[seed]["ttft_p99"])
            e2e.append(row["e2e_mean"] / base[seed]["e2e_mean"])
            requests += int(row["num_requests"])
        if not all(np.isfinite(ttft + e2e)):
            raise ValueError(f"non-finite metrics on seeds {seeds}: TTFT ratios {ttft}, e2e ratios {e2e}")
        return ttft, e2e, requests

    # ---- the objective -------------------------------------------------------------------------
    def __call__(self, config: dict[str, Any], trial: Any) -> float | tuple[float, float]:
        folder = trial_directory(trial) or Path("runs/tune") / f"trial_{getattr(trial, 'number', 0)}"
        folder.mkdir(parents=True, exist_ok=True)
        reward_path = folder / "reward.yaml"
        if not reward_path.exists():
            reward_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        cfg = self.training_config(reward_path.resolve(), trial_training(trial), trial_repeat(trial),
                                   trial_phase(trial))
        env = self.env(cfg)
        seeds = self.env_seeds(cfg, trial)
        train_dir = folder / "train"
        evaluated: dict[str, Any] = {"requests": 0}
        checked = load_config(cfg)[0]
        final_step = self._final_step(checked)

        def on_update(row: Mapping[str, Any]) -> None:
            update = int(row.get("update", 0))
            if not self.eval_every or update % self.eval_every:
                return
            ckpt = latest_checkpoint(train_dir)
            if ckpt is None:
                return
            ttft, e2e, requests = self.ratios(env, ckpt, seeds)
            evaluated["requests"] += requests
            step = int(row.get("global_step", update))
            evaluated["last"] = (step, ttft, e2e)  # the final update's evaluation is the trial's result
            trial.set_user_attr("steps_trained", step)
            # a trial that has used its whole budget completes: pruning it then would save nothing
            if report_evaluation(trial, update, ttft) and step < final_step:
                trial.set_user_attr("eval_requests", evaluated["requests"])
                record_cost(trial, self._cost(checked, step))
                raise optuna.TrialPruned(f"TTFT p99 ratio {np.mean(ttft):.4f} at step {step}")

        result = train(cfg, train_dir, resume=True, callback=on_update)
        last = evaluated.get("last")
        if last is not None and last[0] == result.global_step:
            ttft, e2e = last[1], last[2]  # the same policy on the same seeds: no second simulation
        else:
            ttft, e2e, requests = self.ratios(env, result.policy_path, seeds)
            evaluated["requests"] += requests
        metrics = {"ttft_p99_ratio": float(np.mean(ttft)), "e2e_mean_ratio": float(np.mean(e2e)),
                   "ttft_p99_ratio_per_seed": ttft, "e2e_mean_ratio_per_seed": e2e, "seeds": seeds,
                   "steps_trained": int(result.global_step), "eval_requests": evaluated["requests"]}
        for key, value in metrics.items():
            trial.set_user_attr(key, value)
        record_seed_values(trial, ttft)
        record_cost(trial, self._cost(checked, result.global_step))
        (folder / "vidur_metrics.yaml").write_text(yaml.safe_dump(metrics, sort_keys=False), encoding="utf-8")
        if self.objectives == 2:
            return metrics["ttft_p99_ratio"], metrics["e2e_mean_ratio"]
        return metrics["ttft_p99_ratio"]


def _settings_from_json(text: str, variable: str) -> dict[str, Any]:
    """``variable``'s value: a JSON object of dotted training keys (empty: none)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"expected a JSON object such as {{\"ppo.gamma\": 0.995}}, got {text!r} ({exc.msg})",
                          path=variable) from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise ConfigError(f"expected a JSON object of dotted training keys, got {text!r}",
                          path=variable)
    return value


def _put_dotted(raw: dict[str, Any], key: str, value: Any, source: str) -> None:
    """Set ``raw[a][b]... = value`` for ``key`` ``a.b...``; the parents must be mappings that exist."""
    keys = key.split(".")
    node: Any = raw
    for i, part in enumerate(keys[:-1]):
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            raise ConfigError(f"the training config has no section {'.'.join(keys[: i + 1])!r} to put {key} into",
                              source=source, path=key)
        node = node[part]
    node[keys[-1]] = value


objective = VidurObjective.from_environment()
"""The ``vidur`` objective (entry point ``rewardkit.objectives``)."""
