"""Stable-Baselines3 PPO on MountainCarContinuous: the env's own reward against a shaped one.

Each seed trains two PPO agents with the same settings and budget; only the reward differs: one
learns from the environment's reward, the other from sb3_mountaincar.yaml (the same reward plus
potential-based shaping on the car's mechanical energy) through
rewardkit.integrations.sb3.ComposedRewardVecEnv. Both are judged on the environment's own
return over deterministic episodes; the flag is reached when an episode terminates (the env
pays +100 there, so a return above 0 means the flag). Prints a table per seed and saves the
learning curves (env return of the deterministic policy against training steps) as a PNG.

Run: python examples/sb3_mountaincar.py [--steps 8192] [--seeds 0 1 2 3] [--episodes 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize, sync_envs_normalization

from rewardkit import RewardComposer
from rewardkit.gym import Transition
from rewardkit.integrations.sb3 import ComposedRewardVecEnv, RewardCheckpointCallback, RewardTermsCallback

CONFIG = Path(__file__).with_name("sb3_mountaincar.yaml")
ENV_ID = "MountainCarContinuous-v0"
MAX_EPISODE_STEPS = 999  # the env's TimeLimit: a shorter episode terminated at the flag
N_ENVS = 4
# Shared by both arms: SB3's PPO defaults (no gSDE, initial action std 1) with shorter rollouts
# (4 x 256 steps) and a higher learning rate to fit a small budget. Observations are normalized
# (VecNormalize, as rl-zoo does for this task: the velocity is 1/20 of the position's scale);
# rewards are not, so each arm learns from its own reward as written.
PPO_KWARGS = dict(n_steps=256, batch_size=256, n_epochs=10, gamma=0.99, gae_lambda=0.95, learning_rate=1e-3)
ARMS = ("env", "shaped")


def mountain_car_context(t: Transition) -> dict[str, np.ndarray]:
    """Energy per unit mass in the env's units: height term 0.0025/3*sin(3x) plus v^2/2.

    The env's velocity update is ``v += power*force - 0.0025*cos(3x)``, so 0.0025/3*sin(3x) is the
    potential energy whose slope is that gravity term; ``obs`` is the raw observation (the
    composed reward sits inside VecNormalize).
    """
    position, velocity = t.obs[:, 0].astype(np.float64), t.obs[:, 1].astype(np.float64)
    energy = 0.0025 / 3.0 * np.sin(3.0 * position) + 0.5 * velocity ** 2
    return {"env_reward": np.asarray(t.reward, dtype=np.float64), "energy": energy}


@dataclass
class ArmResult:
    """One trained agent: its final evaluation and its learning curve (env's own return)."""

    returns: list[float]
    flags: int
    curve_steps: np.ndarray
    curve_returns: np.ndarray
    seconds: float

    @property
    def first_flag(self) -> str:
        """Training step of the first curve point whose deterministic episode reached the flag."""
        hits = self.curve_steps[self.curve_returns > 0.0]
        return f"{int(hits[0])}" if len(hits) else "never"


def make_env(seed: int, shaped: bool, n_envs: int = N_ENVS, training: bool = True) -> VecNormalize:
    """N env copies, the composed reward (shaped arm only), then observation normalization.

    An evaluation env (``training=False``) has the same chain, so SB3 can sync the observation
    statistics into it; its return is still the env's own (SB3's Monitor sits under the reward).
    """
    venv = make_vec_env(ENV_ID, n_envs=n_envs, seed=seed)
    if shaped:
        venv = ComposedRewardVecEnv(venv, RewardComposer.from_yaml(CONFIG), mountain_car_context)
    return VecNormalize(venv, training=training, norm_obs=True, norm_reward=False, gamma=PPO_KWARGS["gamma"])


def train_and_evaluate(seed: int, steps: int, shaped: bool, episodes: int, out: Path,
                       eval_every: int) -> ArmResult:
    """Train one arm, recording the deterministic policy's env return every ``eval_every`` steps."""
    start = time.perf_counter()
    arm = "shaped" if shaped else "env"
    venv = make_env(seed, shaped)
    eval_env = make_env(10_000 + seed, shaped, n_envs=1, training=False)
    curve = EvalCallback(eval_env, n_eval_episodes=1, eval_freq=max(eval_every // N_ENVS, 1), deterministic=True,
                         log_path=str(out / f"{arm}_seed{seed}"), verbose=0)
    callbacks = [curve]
    if shaped:  # per-term logs, and the composer's state saved beside the final model
        callbacks += [RewardTermsCallback(),
                      RewardCheckpointCallback(save_freq=max(steps // N_ENVS, 1), save_path=str(out),
                                               name_prefix=f"{arm}_seed{seed}")]
    model = PPO("MlpPolicy", venv, seed=seed, verbose=0, **PPO_KWARGS)
    model.learn(total_timesteps=steps, callback=callbacks)
    venv.save(str(out / f"{arm}_seed{seed}_vecnormalize.pkl"))
    sync_envs_normalization(venv, eval_env)
    returns, lengths = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True,
                                       return_episode_rewards=True)
    flags = sum(length < MAX_EPISODE_STEPS for length in lengths)
    curve_steps = np.asarray(curve.evaluations_timesteps, dtype=float)
    curve_returns = np.array([float(np.mean(r)) for r in curve.evaluations_results])
    return ArmResult([float(r) for r in returns], int(flags), curve_steps, curve_returns,
                     time.perf_counter() - start)


def plot(results: dict[int, dict[str, ArmResult]], path: Path, steps: int) -> None:
    """Learning curves: the env's own return of each arm's deterministic policy, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"env": "tab:gray", "shaped": "tab:blue"}
    labels = {"env": "env's own reward", "shaped": "rewardkit shaped (sb3_mountaincar.yaml)"}
    for arm in ARMS:
        for k, per_seed in enumerate(results.values()):
            r = per_seed[arm]
            ax.plot(r.curve_steps, r.curve_returns, marker="o", ms=3, color=colors[arm], alpha=0.8,
                    label=labels[arm] if k == 0 else None)
    ax.axhline(0.0, color="black", lw=0.5)
    ax.set_xlabel("training steps")
    ax.set_ylabel("env's own return (deterministic episode)")
    ax.set_title(f"PPO on {ENV_ID}, {len(results)} seeds, {steps} steps\n(return > 0: the flag was reached)", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192, help="PPO timesteps per agent")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--episodes", type=int, default=3, help="final evaluation episodes per agent")
    parser.add_argument("--eval-every", type=int, default=1024, help="steps between learning-curve points")
    parser.add_argument("--out", type=Path, default=Path("runs/sb3_mountaincar"),
                        help="folder for the plot, models, VecNormalize and reward states")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small MLPs: one thread is fastest and leaves the other cores free
    args.out.mkdir(parents=True, exist_ok=True)

    print(f"{ENV_ID}, PPO, {args.steps} steps per agent, same settings for both arms; env's own return over "
          f"{args.episodes} deterministic episodes; flags = episodes that reached the flag; "
          f"1st flag = first learning-curve point (every {args.eval_every} steps) whose episode reached it")
    print(f"{'':4}   {'env reward':^26}   {'shaped (rewardkit)':^26}")
    print(f"{'seed':>4}   {'flags':>6} {'return':>7} {'1st flag':>10}   {'flags':>6} {'return':>7} {'1st flag':>10}"
          f"   {'seconds':>7}")
    results: dict[int, dict[str, ArmResult]] = {}
    for seed in args.seeds:
        start = time.perf_counter()
        results[seed] = {arm: train_and_evaluate(seed, args.steps, arm == "shaped", args.episodes, args.out,
                                                 args.eval_every) for arm in ARMS}
        env, shaped = results[seed]["env"], results[seed]["shaped"]
        print(f"{seed:>4}   " + "   ".join(f"{f'{r.flags}/{args.episodes}':>6} {np.mean(r.returns):>7.1f} "
                                           f"{r.first_flag:>10}" for r in (env, shaped))
              + f"   {time.perf_counter() - start:>7.1f}", flush=True)
    n = len(args.seeds)
    solved = {arm: sum(results[s][arm].flags > args.episodes / 2 for s in args.seeds) for arm in ARMS}
    print(f"flag reached (most evaluation episodes): env reward {solved['env']}/{n} seeds, "
          f"shaped {solved['shaped']}/{n} seeds")
    plot_path = args.out / "sb3_mountaincar.png"
    plot(results, plot_path, args.steps)
    print(f"learning curves: {plot_path}")


if __name__ == "__main__":
    main()
