"""A tiny queueing router environment with the Vidur routing env's contract, for fast PPO tests.

Requests of random size arrive one at a time; the agent sends each to one of N FIFO servers.
Between arrivals the servers work off their queues, and the reward is minus the area under the
number-of-requests-in-system curve (Little's law: the episode's return is minus the total time
requests spent in the system). Least-work routing is far better than random routing here, so a
learner that beats random in a few thousand steps shows the PPO loop works.

With ``reward_credit="request"`` it follows the Vidur env's per-request credit instead: each
request's reward is minus its own time in the system, reported in ``info["credits"]`` as
``(decision index, reward)`` only once the request completes (all the rest at the episode's end).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

N_FEATURES = 3  # queue length, outstanding work, arriving request's size


class ToyRewardComposer:
    """Stand-in for a rewardkit composer: counts steps so tests can check that state is saved."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])


class ToyRoutingEnv(gym.Env):
    """N FIFO servers; the action picks the server for the arriving request.

    Observation ``(N, 3)``: per row the server's queue length and outstanding work (divided by
    ``scale``) and the arriving request's size (divided by the mean size). Episodes are
    truncated after ``episode_length`` routed requests; with ``max_queue`` set, an episode is
    terminated (with a penalty of ``overflow_penalty``) when any queue exceeds it.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        num_replicas: int = 4,
        episode_length: int = 64,
        load: float = 0.85,
        mean_size: float = 1.0,
        speeds: list[float] | None = None,
        scale: float = 8.0,
        max_queue: int | None = None,
        overflow_penalty: float = 50.0,
        reward_credit: str = "step",
    ) -> None:
        super().__init__()
        if num_replicas < 1 or episode_length < 1 or not 0 < load:
            raise ValueError("num_replicas and episode_length must be >= 1 and load > 0")
        self.num_replicas = num_replicas
        self.episode_length = episode_length
        self.mean_size = mean_size
        self.speeds = np.ones(num_replicas) if speeds is None else np.asarray(speeds, dtype=float)
        if self.speeds.shape != (num_replicas,) or np.any(self.speeds <= 0):
            raise ValueError("speeds must be num_replicas positive numbers")
        # Arrival rate so that the offered load is `load` of total service capacity.
        self.arrival_rate = load * float(self.speeds.sum()) / mean_size
        self.scale = scale
        self.max_queue = max_queue
        self.overflow_penalty = overflow_penalty
        self.observation_space = spaces.Box(0.0, np.inf, shape=(num_replicas, N_FEATURES), dtype=np.float32)
        self.action_space = spaces.Discrete(num_replicas)
        if reward_credit not in ("step", "request"):
            raise ValueError(f"reward_credit must be 'step' or 'request', got {reward_credit!r}")
        self.reward_credit = reward_credit
        self.requests_per_episode = episode_length
        self._pending: list[tuple[float, int, float]] = []  # (completion time, decision, reward)
        self._now = 0.0
        self.composer = ToyRewardComposer()
        self._queues: list[list[float]] = [[] for _ in range(num_replicas)]
        self._size = 0.0
        self._t = 0
        self._rr = 0

    # ---- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._queues = [[] for _ in range(self.num_replicas)]
        self._pending, self._now = [], 0.0
        self._t = 0
        self._rr = 0
        self._size = self._draw_size()
        return self._obs(), {}

    def step(self, action: Any):
        a = int(action)
        if not 0 <= a < self.num_replicas:
            raise ValueError(f"action must be in [0, {self.num_replicas}), got {action!r}")
        sojourn = (sum(self._queues[a]) + self._size) / self.speeds[a]  # FIFO: known at routing
        self._pending.append((self._now + sojourn, self._t, -sojourn))
        self._queues[a].append(self._size)
        dt = float(self.np_random.exponential(1.0 / self.arrival_rate))
        self._now += dt
        area, completed = 0.0, 0
        for i, queue in enumerate(self._queues):
            a_i, c_i = self._serve(queue, dt * self.speeds[i])
            area += a_i / self.speeds[i]
            completed += c_i
        self.composer.step += 1
        self._t += 1
        self._size = self._draw_size()
        reward = -area
        terminated = self.max_queue is not None and max(len(q) for q in self._queues) > self.max_queue
        if terminated:
            reward -= self.overflow_penalty
        truncated = (not terminated) and self._t >= self.episode_length
        info = {"reward_terms": {"time_in_system": -area, "completed": float(completed), "dt": dt}}
        if self.reward_credit == "request":
            done = terminated or truncated
            info["credits"] = [(d, r) for end, d, r in self._pending if done or end <= self._now]
            self._pending = [] if done else [p for p in self._pending if p[0] > self._now]
            reward = sum(r for _, r in info["credits"])
        return self._obs(), float(reward), bool(terminated), bool(truncated), info

    # ---- contract extras ------------------------------------------------------------------------
    def snapshot(self) -> Any:
        """The servers as the routing heuristics read them: queued requests and work, declared speeds
        (``cap_least_tokens`` is least-work routing here, ``jsq`` the shortest queue)."""
        from schedulers.routing.snapshot import ReplicaSnapshot

        return ReplicaSnapshot.build(waiting=[len(q) for q in self._queues], prefill_tokens=[sum(q) for q in self._queues],
                                     declared_speed=self.speeds, measured_speed=self.speeds)

    @property
    def pending_prompt_tokens(self) -> float:
        return float(self._size)

    # ---- internals ------------------------------------------------------------------------------
    def _draw_size(self) -> float:
        return float(self.np_random.exponential(self.mean_size))

    @staticmethod
    def _serve(queue: list[float], budget: float) -> tuple[float, int]:
        """Work ``budget`` units off a FIFO queue; return (area of queue length x work, completions)."""
        area, completed = 0.0, 0
        while queue and budget > 0:
            head = queue[0]
            if head <= budget:
                area += len(queue) * head
                budget -= head
                queue.pop(0)
                completed += 1
            else:
                area += len(queue) * budget
                queue[0] = head - budget
                budget = 0.0
        return area, completed

    def _obs(self) -> np.ndarray:
        obs = np.empty((self.num_replicas, N_FEATURES), dtype=np.float32)
        for i, queue in enumerate(self._queues):
            obs[i, 0] = len(queue) / self.scale
            obs[i, 1] = sum(queue) / self.speeds[i] / self.scale
        obs[:, 2] = self._size / self.mean_size
        return obs
