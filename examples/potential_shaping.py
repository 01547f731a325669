"""Potential-based shaping on a chain: the shaping terms telescope, so the optimum is unchanged.

A walker starts at state 0 of a chain 0..9 and steps right with probability p (left otherwise,
never below 0); reaching 9 terminates, and a time limit truncates. potential_shaping.yaml adds
F = gamma*phi(s') - phi(s) with phi(s) = -(9 - s) to a cost of 1 per step. The script checks,
episode by episode, that sum_t gamma^t F_t = gamma^T phi(s_T) - phi(s_0), with phi(s_T) = 0 when
the episode terminated, and that shaping shifts every terminated episode's discounted return by
the same constant -phi(s_0), whatever the policy. Run: python examples/potential_shaping.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rewardkit import RewardComposer

CONFIG = Path(__file__).with_name("potential_shaping.yaml")
GOAL = 9
GAMMA = 0.95


def phi(state: int) -> float:
    return -float(GOAL - state)


def context(state: int) -> dict[str, float]:
    return {"cost": 1.0, "phi": phi(state)}


def run_episode(composer: RewardComposer, rng: np.random.Generator, p_right: float, limit: int) -> dict:
    """One episode; returns discounted sums of the shaping term and of the task reward."""
    state = 0
    composer.reset()
    # The first call of an episode records phi(s0). It is not a transition, so run it in eval
    # mode (no statistics, no step) and discard its output, as rewardkit.gym's wrappers do.
    composer.eval()
    composer(context(state))
    composer.train()
    shaped_sum = task_sum = 0.0
    for t in range(limit):
        state = min(GOAL, max(0, state + (1 if rng.random() < p_right else -1)))
        terminated = state == GOAL
        truncated = not terminated and t == limit - 1
        out = composer(context(state), terminated=terminated, truncated=truncated)
        shaped_sum += GAMMA ** t * out.terms["shaping"].contribution
        task_sum += GAMMA ** t * out.terms["step_cost"].contribution
        if terminated or truncated:
            steps = t + 1
            break
    final_phi = 0.0 if terminated else phi(state)
    return {"steps": steps, "terminated": terminated, "shaping": shaped_sum, "task": task_sum,
            "telescoped": GAMMA ** steps * final_phi - phi(0)}


def main() -> None:
    composer = RewardComposer.from_yaml(CONFIG)
    rng = np.random.default_rng(7)

    print("episode  steps  ended       sum gamma^t F_t   gamma^T phi(s_T) - phi(s0)   equal")
    worst = 0.0
    for i in range(6):
        ep = run_episode(composer, rng, p_right=0.7, limit=20)
        gap = abs(ep["shaping"] - ep["telescoped"])
        worst = max(worst, gap)
        ended = "terminated" if ep["terminated"] else "truncated"
        print(f"{i:>7}  {ep['steps']:>5}  {ended:<10}  {ep['shaping']:>16.10f}   "
              f"{ep['telescoped']:>26.10f}   {gap < 1e-9}")
    print(f"max |sum - telescoped| over episodes: {worst:.3e}")

    print()
    print("policy   mean task return   mean shaped return   shaped - task (min, max)")
    for p_right in (0.9, 0.6):
        eps = [run_episode(composer, rng, p_right=p_right, limit=10_000) for _ in range(200)]
        task = np.array([e["task"] for e in eps])
        shaped = task + np.array([e["shaping"] for e in eps])
        diff = shaped - task
        print(f"p={p_right:<5} {task.mean():>17.4f} {shaped.mean():>20.4f}   ({diff.min():.6f}, {diff.max():.6f})")
    print(f"every terminated episode is shifted by -phi(s0) = {-phi(0):.1f}: the better policy stays better")


if __name__ == "__main__":
    main()
