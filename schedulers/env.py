"""``VidurRoutingEnv``: Gymnasium env in which each step routes one arriving request in Vidur.

Vidur's ``Simulator.run()`` is a heap-queue event loop without a step API, so this env drives the
event queue itself: it pops and handles events exactly as ``Simulator.run()`` does, and stops
when a ``GlobalScheduleEvent`` would route requests. Each waiting request is one decision (several
requests arriving at once are decided one by one, each observation showing the earlier choices).
``step(action)`` queues the request on replica ``action`` (what Vidur's global scheduler would do)
and runs the simulation to the next decision.

Episodes
    ``reset(seed=s)`` builds a fresh cluster (resetting Vidur's class-level id counters, so many
    episodes run in one process) and draws ``requests_per_episode`` arrivals: Poisson at ``qps``
    with prompt/output lengths from the trace, exactly as Vidur's synthetic generator does for
    ``seed=s`` (same ``random.Random(s)`` interval stream, same ``pandas.sample(random_state=s)``
    shuffle, same clipping to ``max_tokens``), but without touching global random state. Same seed,
    same episode. ``reset()`` without a seed draws an episode seed from ``self.np_random``.

    The episode ends right after the last routing decision with ``truncated=True`` and
    ``terminated=False``: requests still in flight are the value function's business (PPO
    bootstraps from the final observation, whose request features are zero). The last step covers
    no simulated time. With ``evaluate=True`` the env then drains the simulation to the end so
    that :meth:`VidurRoutingEnv.episode_metrics` covers every request.

Observation
    ``Box(shape=(num_replicas, n_features), float32)``. Row ``i`` is replica ``i``'s features
    followed by the arriving request's features (the same on every row), so a scorer applied to
    each row is permutation-equivariant. Names in ``env.feature_names``:

    ========================  ====================================================================
    waiting                   requests queued on the replica, not yet admitted / count_scale
    running                   admitted unfinished requests (holding KV cache) / count_scale
    kv_used_frac              allocated share of the replica's KV-cache blocks, in [0, 1]
    prefill_tokens            prompt tokens not yet processed, queued or running / token_scale
    decoded_tokens            output tokens generated so far by unfinished requests / token_scale
    outstanding_tokens        prefill_tokens + decoded_tokens (what ``least_tokens`` minimises)
    waiting_prefill_tokens    prompt tokens of the queued (not admitted) requests / token_scale
    recent_completions        requests completed in the last recent_window_s / count_scale
    busy                      1 while the replica executes a batch, else 0
    rel_outstanding_requests  (waiting + running - cluster mean) / count_scale
    rel_outstanding_tokens    (outstanding tokens - cluster mean) / token_scale
    rel_kv_used_frac          kv_used_frac - cluster mean
    req_prompt_tokens         the arriving request's prompt tokens / token_scale
    req_prompt_kv_frac        KV blocks its prompt needs / the replica's total blocks
    ========================  ====================================================================

    No feature depends on any request's future output length (Vidur's ``num_decode_tokens``).

Reward context
    Each step feeds the reward composer (``env_config.reward_config``) this context, describing
    the ``dt`` simulated seconds from the previous decision to this one; ``info["reward_terms"]``
    holds ``out.as_dict()``:

    =======================  ======================================================================
    dt                       simulated seconds since the previous decision (0 on the last step)
    in_system                time-averaged number of requests in the system over the step
                             (routed and unfinished), so ``in_system * dt`` is exactly the
                             request-seconds spent (Little's law); the instantaneous count if dt=0
    in_system_now            requests in the system now, including the one(s) awaiting routing
    in_system_area           request-seconds spent in the system during the step
    completed                requests completed during the step
    throughput               completions in the last recent_window_s divided by that window
                             (or by the elapsed time while shorter), requests/s
    latency                  mean end-to-end latency (s) of completions in the last
                             recent_window_s; the previous value when there were none (0 at first)
    completed_latency_mean   mean e2e latency (s) of requests completed during the step (0 if none)
    completed_latency_max    max e2e latency (s) of requests completed during the step (0 if none)
    completed_latency_sum    sum of e2e latencies (s) of requests completed during the step
    awaiting_first_token     time-averaged number of routed requests whose prefill has not
                             completed (no first token yet) over the step, so the episode's sum of
                             ``awaiting_first_token * dt`` is exactly the total time to first token
                             spent up to the last decision (Little's law for TTFT); the count now
                             if dt=0
    awaiting_first_token_now routed requests without a first token now, plus the one(s) awaiting
                             routing
    awaiting_first_token_age time-averaged sum over those requests of their age (s since arrival),
                             so the sum of ``awaiting_first_token_age * dt`` is sum(TTFT^2) / 2
                             (penalises long waits superlinearly, for the TTFT tail); the sum of
                             ages now if dt=0
    ttft_count               first tokens (prefill completions) during the step
    ttft_mean, ttft_max      time to first token (s) of those (0 if none)
    ttft_recent_mean         mean TTFT (s) of first tokens in the last recent_window_s (carried)
    ttft_recent_p99          99th percentile of those (carried)
    replica_loads            per-replica outstanding requests (waiting + running), array (n,)
    replica_tokens           per-replica outstanding tokens, array (n,)
    kv_util_mean             mean KV-cache use fraction over replicas
    queue_waiting            requests queued (not admitted) over all replicas
    =======================  ======================================================================
"""

from __future__ import annotations

import heapq
import math
import os
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rewardkit.errors import ConfigError

from .env_config import EnvConfig, ObservationConfig, load_env_config, resolved_trace_file, to_simulation_config
from .heuristics import POLICY_NAMES, ReplicaSnapshot, choose
from .vidur_profiles import get_predictor, resolve_path

REPLICA_FEATURES = (
    "waiting",
    "running",
    "kv_used_frac",
    "prefill_tokens",
    "decoded_tokens",
    "outstanding_tokens",
    "waiting_prefill_tokens",
    "recent_completions",
    "busy",
    "rel_outstanding_requests",
    "rel_outstanding_tokens",
    "rel_kv_used_frac",
)
REQUEST_FEATURES = ("req_prompt_tokens", "req_prompt_kv_frac")
FEATURE_NAMES = REPLICA_FEATURES + REQUEST_FEATURES

#: every key of the reward context (see the module docstring).
CONTEXT_KEYS = frozenset(
    {
        "dt",
        "in_system",
        "in_system_now",
        "in_system_area",
        "completed",
        "throughput",
        "latency",
        "completed_latency_mean",
        "completed_latency_max",
        "completed_latency_sum",
        "awaiting_first_token",
        "awaiting_first_token_now",
        "awaiting_first_token_age",
        "ttft_count",
        "ttft_mean",
        "ttft_max",
        "ttft_recent_mean",
        "ttft_recent_p99",
        "replica_loads",
        "replica_tokens",
        "kv_util_mean",
        "queue_waiting",
    }
)

DEFAULT_BLOCK_SIZE = 16


def build_observation(
    snapshot: ReplicaSnapshot,
    prompt_tokens: float,
    obs_config: ObservationConfig,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> np.ndarray:
    """Observation rows ``(num_replicas, len(FEATURE_NAMES))`` for a request of ``prompt_tokens``."""
    cs, ts = obs_config.count_scale, obs_config.token_scale
    outstanding_req = snapshot.outstanding_requests
    outstanding_tok = snapshot.outstanding_tokens
    kv = snapshot.kv_fraction
    replica = np.stack(
        [
            snapshot.waiting / cs,
            snapshot.running / cs,
            kv,
            snapshot.prefill_tokens / ts,
            snapshot.decoded_tokens / ts,
            outstanding_tok / ts,
            snapshot.waiting_prefill_tokens / ts,
            snapshot.recent_completions / cs,
            snapshot.busy,
            (outstanding_req - outstanding_req.mean()) / cs,
            (outstanding_tok - outstanding_tok.mean()) / ts,
            kv - kv.mean(),
        ],
        axis=1,
    )
    blocks = math.ceil(prompt_tokens / block_size)
    request = np.stack(
        [np.full(snapshot.num_replicas, prompt_tokens / ts), blocks / np.maximum(snapshot.kv_capacity, 1.0)], axis=1
    )
    return np.concatenate([replica, request], axis=1).astype(np.float32)


def observation_bounds(cfg: EnvConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds implied by the config (at most ``requests_per_episode`` in flight)."""
    obs = cfg.observation
    counts = cfg.requests_per_episode / obs.count_scale
    tokens = cfg.requests_per_episode * cfg.max_tokens / obs.token_scale
    high = {
        "waiting": counts,
        "running": counts,
        "kv_used_frac": 1.0,
        "prefill_tokens": tokens,
        "decoded_tokens": tokens,
        "outstanding_tokens": tokens,
        "waiting_prefill_tokens": tokens,
        "recent_completions": counts,
        "busy": 1.0,
        "rel_outstanding_requests": counts,
        "rel_outstanding_tokens": tokens,
        "rel_kv_used_frac": 1.0,
        "req_prompt_tokens": cfg.max_tokens / obs.token_scale,
        "req_prompt_kv_frac": 1.0,
    }
    high_arr = np.array([high[name] for name in FEATURE_NAMES], dtype=np.float32)
    low_arr = np.array([-high[name] if name.startswith("rel_") else 0.0 for name in FEATURE_NAMES], dtype=np.float32)
    return low_arr, high_arr


def reset_vidur_ids() -> None:
    """Reset Vidur's class-level id counters so a new cluster gets replica ids 0..n-1 again."""
    from vidur.entities.base_entity import BaseEntity
    from vidur.events.base_event import BaseEvent

    stack = [BaseEntity]
    while stack:
        cls = stack.pop()
        if "_id" in cls.__dict__:
            cls._id = -1
        stack.extend(cls.__subclasses__())
    stack = [BaseEvent]
    while stack:
        cls = stack.pop()
        if "_id" in cls.__dict__:
            cls._id = 0
        stack.extend(cls.__subclasses__())


# ---- arrivals ---------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _trace_lengths(trace_file: str, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of a trace, shortened to ``max_tokens`` as Vidur does."""
    import pandas as pd

    df = pd.read_csv(trace_file)
    for col in ("num_prefill_tokens", "num_decode_tokens"):
        if col not in df.columns:
            raise ConfigError(f"{trace_file}: expected a column {col!r}, got columns {list(df.columns)}", path="trace_file")
    prefill = df["num_prefill_tokens"].astype(int)
    decode = df["num_decode_tokens"].astype(int)
    total = prefill + decode
    diff = (total - max_tokens).clip(lower=0)
    prefill = prefill - np.ceil(diff * (prefill / total)).astype(int)
    decode = decode - np.ceil(diff * (decode / total)).astype(int)
    return prefill.clip(lower=1).to_numpy(), decode.clip(lower=1).to_numpy()


@lru_cache(maxsize=64)
def _shuffle(n: int, seed: int) -> np.ndarray:
    import pandas as pd

    return pd.Series(np.arange(n)).sample(frac=1, random_state=seed).to_numpy()


@dataclass(frozen=True)
class Arrivals:
    """One episode's arrivals: times (s) and prompt/output lengths (the latter hidden from policies)."""

    arrived_at: np.ndarray
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray


def sample_arrivals(cfg: EnvConfig, seed: int) -> Arrivals:
    """Vidur's synthetic generator (trace lengths, Poisson intervals capped at 3/qps) for ``seed``."""
    prefill, decode = _trace_lengths(str(resolved_trace_file(cfg)), cfg.max_tokens)
    n = cfg.requests_per_episode
    if n > len(prefill):
        raise ConfigError(
            f"expected at most {len(prefill)} (the trace's length), got {n}", source=cfg.source, path="requests_per_episode"
        )
    order = _shuffle(len(prefill), seed)[:n]
    rng = random.Random(seed)
    cap = 3.0 / cfg.qps
    times = np.empty(n)
    now = 0.0
    for i in range(n):
        now += min(-math.log(1.0 - rng.random()) / cfg.qps, cap)
        times[i] = now
    return Arrivals(times, prefill[order].astype(np.int64), decode[order].astype(np.int64))


# ---- metrics -------------------------------------------------------------------------------------
@dataclass
class EpisodeMetrics:
    """Per-request latencies of one episode, from Vidur's request objects (completed requests only)."""

    seed: int
    num_requests: int
    num_routed: int
    num_completed: int
    #: end-to-end time, completed_at - arrived_at (Vidur's request_e2e_time), s.
    e2e: np.ndarray
    #: time to first token, prefill_completed_at - arrived_at (Vidur's prefill_e2e_time), s.
    ttft: np.ndarray
    #: arrival to first scheduling on a replica (Vidur's request_scheduling_delay), s.
    scheduling_delay: np.ndarray
    #: completed requests per second between the first arrival and the last completion.
    throughput: float
    #: simulated seconds from the first arrival to the last completion.
    makespan: float
    #: requests routed to each replica.
    routed_per_replica: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def complete(self) -> bool:
        """Whether every request of the episode completed (``evaluate=True`` drains to the end)."""
        return self.num_completed == self.num_requests

    def summary(self) -> dict[str, float]:
        """Scalar statistics (numpy's linear percentiles); NaN where no request completed."""

        def stat(values: np.ndarray, fn: Callable[[np.ndarray], float]) -> float:
            return float(fn(values)) if len(values) else float("nan")

        out: dict[str, float] = {}
        for name, values in (("e2e", self.e2e), ("ttft", self.ttft), ("sched_delay", self.scheduling_delay)):
            out[f"{name}_mean"] = stat(values, np.mean)
            for q in (50, 90, 99):
                out[f"{name}_p{q}"] = stat(values, lambda v, q=q: np.percentile(v, q))
        out["throughput"] = self.throughput
        out["makespan"] = self.makespan
        out["num_completed"] = float(self.num_completed)
        out["num_requests"] = float(self.num_requests)
        return out


# ---- the env -------------------------------------------------------------------------------------
class _Episode:
    """Mutable state of one simulated episode."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.time = 0.0
        self.heap: list = []
        self.pending: list = []
        self.touched: set[int] = set()
        self.requests: list = []
        self.decisions = 0
        self.last_decision_time = 0.0
        self.done = False
        self.snapshot: ReplicaSnapshot | None = None
        self.latency = 0.0
        self.ttft_recent_mean = 0.0
        self.ttft_recent_p99 = 0.0
        self.routed = None
        self.rng = np.random.default_rng(seed)


def _load_composer(reward_composer: Any, cfg: EnvConfig) -> tuple[Any, str]:
    """The composer object and a label naming where it came from."""
    if callable(reward_composer) and not isinstance(reward_composer, (str, os.PathLike)):
        return reward_composer, type(reward_composer).__name__
    if reward_composer is None:
        path, label = resolve_path(cfg.reward_config), cfg.reward_config
    else:
        given = Path(reward_composer)
        path = given if given.is_file() else resolve_path(given)
        label = str(reward_composer)
    if not path.is_file():
        raise ConfigError(
            f"expected a rewardkit reward YAML file, got {label!r} (resolved to {path}, which does not exist)",
            source=cfg.source,
            path="reward_config",
        )
    try:
        from rewardkit import RewardComposer
    except ImportError as exc:
        raise ImportError(
            f"rewardkit.RewardComposer is not importable ({exc}); pass reward_composer=<callable> or compute_reward=False"
        ) from exc
    return RewardComposer.from_yaml(path), str(path)


class VidurRoutingEnv(gym.Env):
    """Route each arriving request of a Vidur-simulated LLM cluster to one of its replicas.

    ``env_config`` is an :class:`~schedulers.env_config.EnvConfig` or a path to its YAML.
    ``reward_composer`` is ``None`` (load ``env_config.reward_config``), a path to a rewardkit
    YAML, or any callable ``composer(ctx, step=..., terminated=..., truncated=...)`` returning an
    object with ``.total`` and ``.as_dict()``. ``compute_reward=False`` skips rewards (reward 0).
    ``evaluate=True`` drains the simulation after the final decision. See the module docstring.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        env_config: EnvConfig | str | os.PathLike[str],
        reward_composer: Any = None,
        *,
        evaluate: bool = False,
        compute_reward: bool = True,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None:
            raise ValueError(f"VidurRoutingEnv has no render modes, got render_mode={render_mode!r}")
        cfg = env_config if isinstance(env_config, EnvConfig) else load_env_config(env_config)
        self.env_config = cfg
        self.evaluate = evaluate
        self.num_replicas = cfg.num_replicas
        self.feature_names: tuple[str, ...] = FEATURE_NAMES
        self.action_space = spaces.Discrete(cfg.num_replicas)
        low, high = observation_bounds(cfg)
        self.observation_space = spaces.Box(
            low=np.tile(low, (cfg.num_replicas, 1)), high=np.tile(high, (cfg.num_replicas, 1)), dtype=np.float32
        )
        resolved_trace_file(cfg)
        self._sim_config = to_simulation_config(cfg, global_scheduler="round_robin", seed=0)
        self._predictor = get_predictor(self._sim_config)
        from vidur.metrics import MetricsStore

        self._metrics_store = MetricsStore(self._sim_config)  # write_metrics=False: handlers are no-ops
        self._block_size = self._sim_config.cluster_config.cache_config.block_size
        self.composer = None
        self.reward_source = None
        if compute_reward:
            self.composer, self.reward_source = _load_composer(reward_composer, cfg)
            needed = getattr(self.composer, "context_keys", None)
            if callable(needed):
                missing = set(needed()) - CONTEXT_KEYS
                if missing:
                    raise ConfigError(
                        f"reads context keys {sorted(missing)} that VidurRoutingEnv does not provide; "
                        f"expected keys among: {', '.join(sorted(CONTEXT_KEYS))}",
                        source=self.reward_source,
                    )
        self._ep: _Episode | None = None
        self._scheduler = None
        self._tracker = None

    # ---- gymnasium API -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._start_episode(episode_seed)
        if self.composer is not None and hasattr(self.composer, "reset"):
            self.composer.reset()
        if not self._advance():
            raise RuntimeError("the episode has no arrivals to route")
        ep = self._ep
        ep.last_decision_time = ep.time
        self._tracker.sync(ep.time)
        return self._observation(), {"episode_seed": episode_seed, "time": ep.time, "decisions": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        ep = self._ep
        if ep is None or ep.done:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset()")
        replica = self._check_action(action)
        request = ep.pending.pop(0)
        self._tracker.replica_schedulers[replica].add_request(request)
        self._tracker.assign(request, replica)
        ep.routed[replica] += 1
        ep.touched.add(replica)
        ep.decisions += 1
        ep.snapshot = None
        if not ep.pending:
            self._release_touched()
        truncated = ep.decisions >= self.env_config.requests_per_episode
        if not truncated and not ep.pending and not self._advance():
            raise RuntimeError(f"simulation ran out of events after {ep.decisions} decisions")
        sync = self._tracker.sync(ep.time)
        ctx = self._reward_context(sync)
        ep.last_decision_time = ep.time
        info: dict[str, Any] = {"time": ep.time, "decisions": ep.decisions, "episode_seed": ep.seed}
        reward = 0.0
        if self.composer is not None:
            out = self.composer(ctx, terminated=False, truncated=truncated)
            reward = float(out.total)
            info["reward_terms"] = out.as_dict()
        if truncated:
            ep.done = True
            if self.evaluate:
                self.drain()
        return self._observation(), reward, False, truncated, info

    def close(self) -> None:
        self._ep = None
        self._scheduler = None
        self._tracker = None

    # ---- policies and metrics -----------------------------------------------------------------
    def heuristic_action(self, name: str) -> int:
        """The replica heuristic ``name`` (see :data:`schedulers.heuristics.POLICY_NAMES`) picks now.

        Tie-breaking and ``random`` use a generator seeded with the episode seed, so a heuristic's
        episode is reproducible; ``round_robin`` sends the k-th request of the episode to k mod n.
        """
        ep = self._ep
        if ep is None or ep.done or not ep.pending:
            raise RuntimeError("heuristic_action() needs a pending routing decision; call reset() first")
        if name not in POLICY_NAMES:
            raise ValueError(f"unknown heuristic {name!r}; expected one of: {', '.join(POLICY_NAMES)}")
        return choose(name, self._current_snapshot(), ep.rng, decision_index=ep.decisions)

    def snapshot(self) -> ReplicaSnapshot:
        """Per-replica state at the current decision (what heuristics and observations read)."""
        return self._current_snapshot()

    @property
    def pending_prompt_tokens(self) -> int:
        """Prompt length of the request awaiting routing (0 when none)."""
        ep = self._ep
        return int(ep.pending[0].num_prefill_tokens) if ep and ep.pending else 0

    @property
    def sim_time(self) -> float:
        """Current simulated time (s)."""
        return self._ep.time if self._ep else 0.0

    def drain(self) -> None:
        """Run the simulation to its end (all routed requests complete; no further routing)."""
        ep = self._ep
        if ep is None:
            raise RuntimeError("drain() called before reset()")
        if ep.pending:
            raise RuntimeError("drain() with requests awaiting routing; route them with step() first")
        self._release_touched()
        sched, metrics = self._scheduler, self._metrics_store
        while ep.heap:
            _, event = heapq.heappop(ep.heap)
            ep.time = event._time
            for new in event.handle_event(sched, metrics):
                heapq.heappush(ep.heap, (new._priority_number, new))
        if sched._request_queue:
            raise RuntimeError(f"{len(sched._request_queue)} requests arrived but were never routed")
        self._tracker.sync(ep.time)
        ep.snapshot = None

    def episode_metrics(self) -> EpisodeMetrics:
        """Latency and throughput of the current episode's completed requests (drained if evaluating)."""
        ep = self._ep
        if ep is None:
            raise RuntimeError("episode_metrics() called before reset()")
        done = [r for r in ep.requests if r.completed]
        e2e = np.array([r.completed_at - r.arrived_at for r in done])
        ttft = np.array([r._prefill_completed_at - r.arrived_at for r in done])
        delay = np.array([r._scheduling_delay for r in done])
        if done:
            start = min(r.arrived_at for r in ep.requests)
            makespan = max(r.completed_at for r in done) - start
            throughput = len(done) / makespan if makespan > 0 else float("nan")
        else:
            makespan, throughput = 0.0, 0.0
        return EpisodeMetrics(
            seed=ep.seed,
            num_requests=len(ep.requests),
            num_routed=ep.decisions,
            num_completed=len(done),
            e2e=e2e,
            ttft=ttft,
            scheduling_delay=delay,
            throughput=float(throughput),
            makespan=float(makespan),
            routed_per_replica=ep.routed.copy(),
        )

    # ---- internals ------------------------------------------------------------------------------
    def _check_action(self, action: Any) -> int:
        try:
            value = int(action)
        except (TypeError, ValueError):
            raise ValueError(f"action must be an integer replica index in [0, {self.num_replicas}), got {action!r}") from None
        if value != action or not 0 <= value < self.num_replicas:
            raise ValueError(f"action must be an integer replica index in [0, {self.num_replicas}), got {action!r}")
        return value

    def _start_episode(self, seed: int) -> None:
        from vidur.entities import Cluster, Request
        from vidur.events import RequestArrivalEvent

        from .vidur_registration import EnvGlobalScheduler

        reset_vidur_ids()
        cfg = self.env_config
        arrivals = sample_arrivals(cfg, seed)
        self._sim_config.seed = seed
        cluster = Cluster(self._sim_config.cluster_config, self._sim_config.metrics_config)
        scheduler = EnvGlobalScheduler(
            self._sim_config,
            cluster.replicas,
            predictor=self._predictor,
            recent_window_s=cfg.observation.recent_window_s,
        )
        ep = _Episode(seed)
        ep.routed = np.zeros(cfg.num_replicas, dtype=np.int64)
        for t, p, d in zip(arrivals.arrived_at, arrivals.prefill_tokens, arrivals.decode_tokens):
            request = Request(arrived_at=float(t), num_prefill_tokens=int(p), num_decode_tokens=int(d))
            ep.requests.append(request)
            event = RequestArrivalEvent(request.arrived_at, request)
            heapq.heappush(ep.heap, (event._priority_number, event))
        self._ep, self._scheduler, self._tracker = ep, scheduler, scheduler.tracker

    def _advance(self) -> bool:
        """Handle events until requests await routing; False when the event queue runs dry."""
        from vidur.events.global_schedule_event import GlobalScheduleEvent

        ep, sched, metrics = self._ep, self._scheduler, self._metrics_store
        ep.snapshot = None
        while ep.heap:
            _, event = heapq.heappop(ep.heap)
            ep.time = event._time
            if isinstance(event, GlobalScheduleEvent):
                if sched._request_queue:
                    sched.sort_requests()
                    ep.pending.extend(sched._request_queue)
                    sched._request_queue.clear()
                    return True
                continue
            for new in event.handle_event(sched, metrics):
                heapq.heappush(ep.heap, (new._priority_number, new))
        return False

    def _release_touched(self) -> None:
        """Wake the replicas that got requests, as ``GlobalScheduleEvent.handle_event`` does."""
        from vidur.events.replica_schedule_event import ReplicaScheduleEvent
        from vidur.types import ReplicaId

        ep = self._ep
        for replica in sorted(ep.touched):
            event = ReplicaScheduleEvent(ep.time, ReplicaId(replica))
            heapq.heappush(ep.heap, (event._priority_number, event))
        ep.touched.clear()
        ep.snapshot = None

    def _current_snapshot(self) -> ReplicaSnapshot:
        ep = self._ep
        if ep.snapshot is None:
            ep.snapshot = self._tracker.snapshot()
        return ep.snapshot

    def _observation(self) -> np.ndarray:
        return build_observation(
            self._current_snapshot(), self.pending_prompt_tokens, self.env_config.observation, self._block_size
        )

    def _reward_context(self, sync: Any) -> dict[str, Any]:
        ep, tracker = self._ep, self._tracker
        snap = self._current_snapshot()
        window = self.env_config.observation.recent_window_s
        now = ep.time
        e2e = [r.completed_at - r.arrived_at for r in sync.completed]
        ttft = [r._prefill_completed_at - r.arrived_at for r in sync.first_tokens]
        if tracker.recent_e2e:
            ep.latency = float(np.mean([v for _, v in tracker.recent_e2e]))
        if tracker.recent_ttft:
            recent = np.array([v for _, v in tracker.recent_ttft])
            ep.ttft_recent_mean = float(recent.mean())
            ep.ttft_recent_p99 = float(np.percentile(recent, 99))
        span = min(window, now)
        in_now = float(tracker.in_system + len(ep.pending))
        awaiting_area, awaiting_age_area, awaiting_now, age_now = _awaiting_first_token(tracker, sync, now)
        awaiting_now += len(ep.pending)  # requests awaiting routing arrived now: age 0
        return {
            "dt": float(sync.dt),
            "in_system": float(sync.in_system_area / sync.dt) if sync.dt > 0 else in_now,
            "in_system_now": in_now,
            "in_system_area": float(sync.in_system_area),
            "completed": float(len(sync.completed)),
            "throughput": float(sum(len(t) for t in tracker.completion_times) / span) if span > 0 else 0.0,
            "latency": ep.latency,
            "completed_latency_mean": float(np.mean(e2e)) if e2e else 0.0,
            "completed_latency_max": float(np.max(e2e)) if e2e else 0.0,
            "completed_latency_sum": float(np.sum(e2e)) if e2e else 0.0,
            "awaiting_first_token": float(awaiting_area / sync.dt) if sync.dt > 0 else float(awaiting_now),
            "awaiting_first_token_now": float(awaiting_now),
            "awaiting_first_token_age": float(awaiting_age_area / sync.dt) if sync.dt > 0 else float(age_now),
            "ttft_count": float(len(ttft)),
            "ttft_mean": float(np.mean(ttft)) if ttft else 0.0,
            "ttft_max": float(np.max(ttft)) if ttft else 0.0,
            "ttft_recent_mean": ep.ttft_recent_mean,
            "ttft_recent_p99": ep.ttft_recent_p99,
            "replica_loads": snap.outstanding_requests.astype(np.float64),
            "replica_tokens": snap.outstanding_tokens.astype(np.float64),
            "kv_util_mean": float(snap.kv_fraction.mean()),
            "queue_waiting": float(snap.waiting.sum()),
        }


def _awaiting_first_token(tracker: Any, sync: Any, now: float) -> tuple[float, float, int, float]:
    """Areas over the synced step ``(now - sync.dt, now]`` of requests still awaiting a first token.

    Returns ``(count_area, age_area, count_now, age_sum_now)``: the integral over the step of the
    number of routed requests without a first token, the integral of the sum of their ages, and
    that number and age sum now. Every request whose first token came during the step is in
    ``sync.first_tokens`` (even if it also completed), and every routed request still without one
    is in the tracker's in-flight table, so the areas are exact.
    """
    t0 = now - sync.dt
    count_area = age_area = 0.0

    def add(arrived: float, end: float) -> None:
        nonlocal count_area, age_area
        start = max(t0, arrived)
        if end > start:
            count_area += end - start
            age_area += 0.5 * ((end - arrived) ** 2 - (start - arrived) ** 2)

    for req in sync.first_tokens:
        add(req.arrived_at, min(req._prefill_completed_at, now))
    count_now, age_now = 0, 0.0
    for tracked in tracker.inflight:
        for item in tracked.values():
            if not item.first_token_seen:
                req = item.request
                add(req.arrived_at, now)
                count_now += 1
                age_now += max(now - req.arrived_at, 0.0)
    return count_area, age_area, count_now, age_now


def make_env(env_config: EnvConfig | str, **kwargs: Any) -> VidurRoutingEnv:
    """``VidurRoutingEnv(env_config, **kwargs)`` (a picklable factory for vector envs)."""
    return VidurRoutingEnv(env_config, **kwargs)


ENV_ID = "rewardkit/VidurRouting-v0"
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="schedulers.env:VidurRoutingEnv")
