"""Stable-Baselines3 PPO on MountainCarContinuous: the env's own reward against a shaped one.

Each seed trains two PPO agents with the same budget: one on the environment's reward, one on
sb3_mountaincar.yaml (the same reward plus potential-based shaping on the car's mechanical
energy) through rewardkit.integrations.sb3.ComposedRewardVecEnv. Both are then judged on the
environment's own return over deterministic episodes: the flag is reached when it exceeds 90.

Run: python examples/sb3_mountaincar.py [--steps 8192] [--seeds 0 1 2 3] [--episodes 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from rewardkit import RewardComposer
from rewardkit.gym import Transition
from rewardkit.integrations.sb3 import ComposedRewardVecEnv, RewardTermsCallback

CONFIG = Path(__file__).with_name("sb3_mountaincar.yaml")
ENV_ID = "MountainCarContinuous-v0"
N_ENVS = 4
PPO_KWARGS = dict(n_steps=256, batch_size=256, n_epochs=5, gamma=0.99, gae_lambda=0.95, learning_rate=1e-3,
                  ent_coef=0.0, use_sde=True, policy_kwargs=dict(log_std_init=-1.0, net_arch=[32, 32]))


def mountain_car_context(t: Transition) -> dict[str, np.ndarray]:
    """Energy per unit mass in the env's units: height term 0.0025/3*sin(3x) plus v^2/2."""
    position, velocity = t.obs[:, 0].astype(np.float64), t.obs[:, 1].astype(np.float64)
    energy = 0.0025 / 3.0 * np.sin(3.0 * position) + 0.5 * velocity ** 2
    return {"env_reward": np.asarray(t.reward, dtype=np.float64), "energy": energy}


def train(seed: int, steps: int, shaped: bool) -> PPO:
    venv = make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed)
    callbacks = []
    if shaped:
        venv = ComposedRewardVecEnv(venv, RewardComposer.from_yaml(CONFIG), mountain_car_context)
        callbacks.append(RewardTermsCallback())
    model = PPO("MlpPolicy", venv, seed=seed, verbose=0, **PPO_KWARGS)
    model.learn(total_timesteps=steps, callback=callbacks)
    return model


def env_return(model: PPO, seed: int, episodes: int) -> float:
    """Mean of the environment's own return over deterministic episodes."""
    env = gym.make(ENV_ID)
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=10_000 + 100 * seed + k)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192, help="PPO timesteps per agent")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--episodes", type=int, default=3, help="evaluation episodes per agent")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small MLPs: one thread is fastest and leaves the other cores free

    print(f"{ENV_ID}, PPO, {args.steps} steps per agent; env's own return over {args.episodes} "
          f"deterministic episodes (flag reached: > 90)")
    print("seed   env reward   shaped (rewardkit)   seconds")
    wins = {"env": 0, "shaped": 0}
    for seed in args.seeds:
        start = time.perf_counter()
        plain = env_return(train(seed, args.steps, shaped=False), seed, args.episodes)
        shaped = env_return(train(seed, args.steps, shaped=True), seed, args.episodes)
        wins["env"] += plain > 90
        wins["shaped"] += shaped > 90
        print(f"{seed:>4}   {plain:>10.2f}   {shaped:>18.2f}   {time.perf_counter() - start:>7.1f}")
    n = len(args.seeds)
    print(f"flag reached: env reward {wins['env']}/{n} seeds, shaped {wins['shaped']}/{n} seeds")


if __name__ == "__main__":
    main()
