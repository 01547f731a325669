"""Routers run on a replayed workload: one drained episode per (router, seed), the requests in log order.

:class:`LoggedActions` routes each request where the log says it went (what the speed fit replays);
any registered router routes as it would live. A learned router whose checkpoint was trained on other
observation settings than the log's gets its own rows (built from the same snapshot). Progress goes
to ``log`` once per episode, and every :data:`PROGRESS_EVERY` decisions within a long one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..routing.observation import build_observation
from ..routing.policy import Policy
from ..routing.snapshot import ReplicaSnapshot
from .workload import ReplayWorkload

#: decisions between two progress lines within one episode
PROGRESS_EVERY = 2000


class LoggedActions(Policy):
    """Routes the ``k``-th request of an episode to the replica the log sent it to."""

    name = "logged"

    def __init__(self, actions: Sequence[int]) -> None:
        self.actions = [int(a) for a in actions]
        self.k = 0

    def reset(self, seed: int | None = None) -> None:
        self.k = 0

    def decide(self, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, *, rows: np.ndarray | None = None,
               true_speed: np.ndarray | None = None) -> int:
        action = self.actions[min(self.k, len(self.actions) - 1)]
        self.k += 1
        return action


@dataclass
class EpisodeResult:
    """One router on one seed: every request's TTFT and e2e (s, in arrival order) and the cache hit rate."""

    router: str
    seed: int
    ttft: np.ndarray
    e2e: np.ndarray
    prefix_hit_rate: float
    wall_s: float


def make_replay_env(cfg: Any, workload: ReplayWorkload) -> Any:
    """A drained-episode Vidur env whose arrivals are ``workload``'s."""
    from ..sim.env import VidurRoutingEnv

    return VidurRoutingEnv(cfg, evaluate=True, compute_reward=False, arrivals_source=workload.arrivals)


def _action(policy: Policy, env: Any, obs: np.ndarray) -> int:
    true_speed = env.true_speeds() if policy.needs_true_speed else None
    rows = obs
    wanted = policy.observation
    if wanted is not None and wanted != env.env_config.observation:
        rows = build_observation(env.snapshot(), env.pending_prompt_tokens, wanted, env._block_size)
    return int(policy.decide(env.snapshot(), env.pending_prompt_tokens, rows=rows, true_speed=true_speed))


def run_episode(env: Any, name: str, policy: Policy, seed: int,
                log: Callable[[str], None] | None = None) -> EpisodeResult:
    """``policy`` routes every request of seed ``seed``; the episode is drained and measured."""
    start = time.perf_counter()
    obs, _ = env.reset(seed=int(seed))
    policy.reset(int(seed))
    steps = 0
    while True:
        obs, _, terminated, truncated, _ = env.step(_action(policy, env, obs))
        steps += 1
        if log is not None and steps % PROGRESS_EVERY == 0:
            log(f"[replay] {name} seed {seed}: {steps}/{env.requests_per_episode} requests routed")
        if terminated or truncated:
            break
    metrics = env.episode_metrics()
    requests = env._ep.requests
    ttft = np.array([r._prefill_completed_at - r.arrived_at if r.completed else np.nan for r in requests])
    e2e = np.array([r.completed_at - r.arrived_at if r.completed else np.nan for r in requests])
    return EpisodeResult(name, int(seed), ttft, e2e, float(metrics.prefix_hit_rate), time.perf_counter() - start)


def run_routers(env: Any, routers: dict[str, Policy], seeds: Sequence[int],
                log: Callable[[str], None] | None = None) -> dict[str, list[EpisodeResult]]:
    """Every router on every seed (the same arrivals per seed), with a progress line per episode."""
    out: dict[str, list[EpisodeResult]] = {name: [] for name in routers}
    total, done = len(routers) * len(seeds), 0
    for seed in seeds:
        for name, policy in routers.items():
            result = run_episode(env, name, policy, seed, log)
            out[name].append(result)
            done += 1
            if log is not None:
                log(f"[replay {done}/{total}] seed {seed} {name}: TTFT p50 {np.nanmedian(result.ttft):.3f} s, "
                    f"p99 {np.nanpercentile(result.ttft, 99):.3f} s ({result.wall_s:.1f} s wall)")
    return out
