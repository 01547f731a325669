"""A batched torch environment with rewardkit rewards, as an Isaac Lab user would write it.

``TorchReach`` is a ``gymnasium.vector.VectorEnv`` whose whole state is torch tensors on one
device (CPU here; pass ``--device cuda`` on a GPU machine): ``num_envs`` point masses each chase a
target in the unit square. Like Isaac Lab's direct workflow it steps every environment at once
and resets finished ones itself (Gymnasium's default next-step autoreset). Its own reward
(``_get_rewards``: minus the distance) is replaced by torch_reach.yaml through
``rewardkit.gym.VectorComposedReward``: ``context_fn`` reads tensors off the transition, the
composer computes in torch on their device, and the rewards come back as a torch tensor (no
``.cpu().numpy()`` anywhere). Potential-based shaping state lives on the device as well.

Run: python examples/torch_reach.py [--envs 4096] [--steps 200] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from rewardkit import RewardComposer
from rewardkit.gym import Transition, VectorComposedReward

CONFIG = Path(__file__).with_name("torch_reach.yaml")
DT, GOAL_RADIUS, HORIZON = 0.05, 0.05, 200


class TorchReach(VectorEnv):
    """``num_envs`` point masses (position, velocity) and targets, all torch tensors on ``device``."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, device: str = "cpu", seed: int = 0) -> None:
        self.num_envs, self.device = num_envs, torch.device(device)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.single_action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        z = torch.zeros(num_envs, 2, device=self.device)
        self.pos, self.vel, self.target = z.clone(), z.clone(), z.clone()
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.needs_reset = torch.zeros(num_envs, dtype=torch.bool, device=self.device)

    def _reset_where(self, mask: torch.Tensor) -> None:
        n = int(mask.sum())  # Isaac Lab resets by index as well; the count is one host read
        if n:
            u = torch.rand(n, 4, generator=self.generator, device=self.device)
            self.pos[mask], self.target[mask] = u[:, :2], u[:, 2:]
            self.vel[mask], self.steps[mask] = 0.0, 0

    def _obs(self) -> torch.Tensor:
        return torch.cat([self.pos, self.vel, self.target], dim=1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_where(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self.needs_reset[:] = False
        return self._obs(), {}

    def _get_rewards(self) -> torch.Tensor:
        """The environment's own reward (replaced by the composed one below)."""
        return -torch.linalg.vector_norm(self.target - self.pos, dim=1)

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        actions = torch.as_tensor(actions, dtype=torch.float32, device=self.device).clamp(-1.0, 1.0)
        self._reset_where(self.needs_reset)  # next-step autoreset: these rows start a new episode
        fresh = self.needs_reset.clone()
        self.vel = 0.9 * self.vel + 0.5 * actions
        self.pos = self.pos + DT * self.vel
        self.steps += 1
        distance = torch.linalg.vector_norm(self.target - self.pos, dim=1)
        terminated = (distance < GOAL_RADIUS) & ~fresh
        truncated = (self.steps >= HORIZON) & ~fresh & ~terminated
        self.needs_reset = terminated | truncated
        info = {"reached": terminated.to(torch.float32)}
        return self._obs(), self._get_rewards(), terminated, truncated, info


def context_fn(t: Transition) -> dict[str, torch.Tensor]:
    """The signals torch_reach.yaml reads, from the transition's tensors (kept on their device)."""
    pos, vel, target = t.obs[:, :2], t.obs[:, 2:4], t.obs[:, 4:]
    ctx = {"neg_distance": -torch.linalg.vector_norm(target - pos, dim=1),
           "speed": torch.linalg.vector_norm(vel, dim=1),
           "reached": t.info.get("reached", torch.zeros(pos.shape[0], device=pos.device))}
    ctx["action_sq"] = torch.zeros_like(ctx["speed"]) if t.action is None else (t.action ** 2).sum(dim=1)
    return ctx


def make_env(num_envs: int, device: str = "cpu", seed: int = 0) -> VectorComposedReward:
    """The environment with its reward replaced by torch_reach.yaml's."""
    return VectorComposedReward(TorchReach(num_envs, device, seed), RewardComposer.from_yaml(CONFIG), context_fn)


def policy(obs: torch.Tensor) -> torch.Tensor:
    """A proportional controller toward the target (a stand-in for the agent being trained)."""
    return (3.0 * (obs[:, 4:] - obs[:, :2]) - obs[:, 2:4]).clamp(-1.0, 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    env = make_env(args.envs, args.device)
    obs, _ = env.reset(seed=0)
    total, episodes, start = torch.zeros((), device=args.device), 0, time.perf_counter()
    for _ in range(args.steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        total += reward.sum()
        episodes += int((terminated | truncated).sum())
    elapsed = time.perf_counter() - start
    print(f"reward type: {type(reward).__module__}.{type(reward).__name__} {reward.dtype} on {reward.device}")
    print(f"terms: {', '.join(k for k in info['reward_terms'] if k.endswith('/contribution'))}")
    print(f"{args.envs} envs x {args.steps} steps: {episodes} episodes ended, mean reward per step "
          f"{float(total) / (args.envs * args.steps):.4f}, {args.envs * args.steps / elapsed:,.0f} env-steps/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
