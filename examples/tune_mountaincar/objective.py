"""The objective: train a small PPO (Stable-Baselines3) on MountainCarContinuous with the trial's
reward, then score it on the environment's own return over paired evaluation seeds.

``rewardkit optimize --objective objective:mountaincar`` (run from this folder) uses it as is;
``MOUNTAINCAR_STEPS`` sets the training budget in environment steps (default 20000).
"""

from __future__ import annotations

import math
import os
from typing import Any

import gymnasium as gym
import numpy as np
import optuna

from rewardkit import RewardComposer
from rewardkit.gym import ComposedReward, Transition
from rewardkit.optimize import report_evaluation, trial_seeds

ENV_ID = "MountainCarContinuous-v0"
GAMMA = 0.99


def energy(obs: np.ndarray) -> float:
    """Mechanical energy of the car (kinetic + potential of the env's gravity term), scaled to ~1."""
    position, velocity = float(obs[0]), float(obs[1])
    return (0.5 * velocity ** 2 + 0.0025 / 3.0 * math.sin(3.0 * position)) * 1000.0


def context(t: Transition) -> dict[str, float]:
    """Signals for reward.yaml: the goal bonus, the squared action and the energy of the new observation."""
    goal = 100.0 if t.terminated else 0.0
    action_sq = 0.0 if t.action is None else float(np.sum(np.square(t.action)))
    return {"goal": goal, "action_sq": action_sq, "energy": energy(t.obs)}


def env_return(model: Any, seed: int, max_steps: int = 999) -> float:
    """The environment's own return of one greedy episode (at most ``max_steps`` steps)."""
    env = gym.make(ENV_ID, max_episode_steps=max_steps)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


def make_objective(train_steps: int, evaluations: int = 2, eval_steps: int = 999):
    """An objective that trains for ``train_steps`` steps, evaluating ``evaluations`` times on
    episodes of at most ``eval_steps`` steps."""
    from stable_baselines3 import PPO

    def mountaincar(config: dict, trial: Any) -> float:
        seeds = trial_seeds(trial)
        env = ComposedReward(gym.make(ENV_ID), RewardComposer.from_dict(config), context)
        model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=4, gamma=GAMMA,
                    learning_rate=1e-3, seed=seeds[0] % 2**31, device="cpu", verbose=0)
        chunk = max(256, train_steps // evaluations)
        trained, returns = 0, []
        while trained < train_steps:
            model.learn(total_timesteps=chunk, reset_num_timesteps=False)
            trained += chunk
            returns = [env_return(model, seed, eval_steps) for seed in seeds]
            if report_evaluation(trial, trained, returns):
                raise optuna.TrialPruned()
        trial.set_user_attr("env_return_per_seed", returns)
        return float(np.mean(returns))

    mountaincar.directions = ("maximize",)
    mountaincar.n_seeds = 2
    return mountaincar


mountaincar = make_objective(int(os.environ.get("MOUNTAINCAR_STEPS", "20000")))
