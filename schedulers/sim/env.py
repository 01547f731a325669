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
    declared_speed            the replica's static speed from the env YAML (1 = reference)
    measured_speed            its current speed estimated from finished batches (moving average,
                              time constant observation.speed_tau_s): what a router can measure
    tokens_per_s              tokens it processed per second over recent_window_s / token_scale
    since_completion          seconds since its last completed request / recent_window_s
                              (capped at 6 windows)
    expected_wait             (prefill_tokens + the arriving prompt) / measured_speed / token_scale
                              (what the ``adaptive`` heuristic minimises)
    rel_expected_wait         expected_wait - cluster mean
    req_prompt_tokens         the arriving request's prompt tokens / token_scale
    req_prompt_kv_frac        KV blocks its prompt needs / the replica's total blocks
    ========================  ====================================================================

    No feature depends on any request's future output length (Vidur's ``num_decode_tokens``) nor on
    a replica's current slowdown: a slowdown shows only through batches that have ended.

Cluster
    Replica ``i`` runs at ``env_config.replica_speeds[i]`` (the YAML's ``replicas`` groups) times
    the episode's slowdown factor (``slowdowns``, seeded by the episode seed, so every router meets
    the same slowdowns): see :mod:`schedulers.sim.speed_scaling` and :mod:`schedulers.sim.slowdowns`.

Reward context
    Each step feeds the reward composer the context built by :mod:`schedulers.sim.reward_context`
    (every key is documented there); ``info["reward_terms"]`` holds ``out.as_dict()``.

Per-request credit
    A reward that reads only per-request keys (``ttft``, ``e2e``, ``prompt_tokens``,
    ``decode_tokens``: :func:`schedulers.shared.request_reward.request_context`) is evaluated once per
    request when it completes, and credited to the decision that routed it: ``env.reward_credit``
    is then ``"request"`` and ``info["credits"]`` lists ``(decision index, reward)`` pairs of the
    requests that completed during the step (the step's reward is their sum, so an episode's return
    is unchanged). The episode is always drained after its last decision, so every decision of an
    episode gets its credit by the episode's last step. Judging each decision by its own request's
    outcome, instead of the whole cluster's, cuts the variance that arrivals put into the return.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import os
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..routing.observation import build_observation, feature_names, observation_bounds
from ..routing.snapshot import ReplicaSnapshot
from ..shared.arrivals import resolved_trace_file, sample_arrivals
from ..shared.episode_metrics import EpisodeMetrics
from ..shared.request_reward import credit_requests, load_reward_composer
from .env_config import EnvConfig, load_env_config
from .prefix_cache import PromptedArrivals, SimulatedPrefixCache, shared_prefix_workload
from .profiles import get_predictor
from .registration import EnvGlobalScheduler
from .reward_context import RewardContextBuilder, reward_credit, vidur_request_context
from .simulation_config import to_simulation_config
from .tracker import SyncResult
from .vidur_ids import reset_vidur_ids
from .vidur_restart_fix import apply_restart_fix

# ---- the env -------------------------------------------------------------------------------------
class _Episode:
    """Mutable state of one simulated episode."""

    def __init__(self, seed: int, num_replicas: int) -> None:
        self.seed = seed
        self.time = 0.0
        self.heap: list = []
        self.pending: list = []
        self.touched: set[int] = set()
        self.requests: list = []
        #: request id -> index of the decision that routed it (per-request credit).
        self.decision_of: dict[int, int] = {}
        #: request id -> (replica, position among that replica's routed requests) (``delay_caused``).
        self.placed: dict[int, tuple[int, int]] = {}
        #: per replica, the arrival times of the requests routed to it, in routing order.
        self.arrivals_on: list[list[float]] = [[] for _ in range(num_replicas)]
        self.decisions = 0
        self.done = False
        self.snapshot: ReplicaSnapshot | None = None
        self.rng = np.random.default_rng(seed)


class VidurRoutingEnv(gym.Env):
    """Route each arriving request of a Vidur-simulated LLM cluster to one of its replicas.

    ``env_config`` is an :class:`~schedulers.sim.env_config.EnvConfig` or a path to its YAML.
    ``reward_composer`` is ``None`` (load ``env_config.reward_config``), a path to a rewardkit
    YAML, or any callable ``composer(ctx, step=..., terminated=..., truncated=...)`` returning an
    object with ``.total`` and ``.as_dict()``. ``compute_reward=False`` skips rewards (reward 0).
    ``evaluate=True`` drains the simulation after the final decision. ``arrivals_source`` (episode
    seed -> :class:`~schedulers.sim.prefix_cache.PromptedArrivals`) replaces the arrivals the config
    draws, e.g. with a gateway log's (:mod:`schedulers.replay`). See the module docstring.
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
        arrivals_source: Callable[[int], PromptedArrivals] | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None:
            raise ValueError(f"VidurRoutingEnv has no render modes, got render_mode={render_mode!r}")
        cfg = env_config if isinstance(env_config, EnvConfig) else load_env_config(env_config)
        self.env_config = cfg
        self.evaluate = evaluate
        self.num_replicas = cfg.num_replicas
        self.feature_names: tuple[str, ...] = feature_names(cfg.observation)
        self.action_space = spaces.Discrete(cfg.num_replicas)
        low, high = observation_bounds(
            cfg.observation, cfg.requests_per_episode, cfg.max_tokens, min(cfg.replica_speeds)
        )
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
        #: ``"step"`` (the reward describes each step) or ``"request"`` (credited per routed request).
        self.reward_credit = "step"
        if compute_reward:
            self.composer, self.reward_source = load_reward_composer(reward_composer, cfg)
            needed = getattr(self.composer, "context_keys", None)
            if callable(needed):
                self.reward_credit = reward_credit(set(needed()), self.reward_source)
        self._context = RewardContextBuilder(cfg.observation.recent_window_s)
        self._ep: _Episode | None = None
        self._scheduler = None
        self._tracker = None
        #: episode seed -> its arrivals with prompt blocks (a replayed log); None: drawn from the env config
        self._arrivals_source = arrivals_source

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
        ep.decision_of[request.id] = ep.decisions
        ep.placed[request.id] = (replica, len(ep.arrivals_on[replica]))
        ep.arrivals_on[replica].append(float(request.arrived_at))
        ep.touched.add(replica)
        ep.decisions += 1
        ep.snapshot = None
        if not ep.pending:
            self._release_touched()
        truncated = ep.decisions >= self.env_config.requests_per_episode
        if not truncated and not ep.pending and not self._advance():
            raise RuntimeError(f"simulation ran out of events after {ep.decisions} decisions")
        sync = self._tracker.sync(ep.time)
        info: dict[str, Any] = {"time": ep.time, "decisions": ep.decisions, "episode_seed": ep.seed}
        reward = 0.0
        if self.composer is not None and self.reward_credit == "request":
            completed = list(sync.completed)
            if truncated:
                observation = self._observation()  # the state at the last decision, before draining
                ep.done = True
                completed += self.drain().completed
            reward = self._credit_requests(completed, info)
            if truncated:
                return observation, reward, False, True, info
        elif self.composer is not None:
            ctx = self._context(self._tracker, sync, self._current_snapshot(), ep.time, len(ep.pending))
            out = self.composer(ctx, terminated=False, truncated=truncated)
            reward = float(out.total)
            info["reward_terms"] = out.as_dict()
        if truncated:
            ep.done = True
            if self.evaluate:
                self.drain()
        return self._observation(), reward, False, truncated, info

    def _credit_requests(self, completed: list, info: dict[str, Any]) -> float:
        """Reward each completed request and credit it to its routing decision (``info["credits"]``)."""
        contexts = ((self._ep.decision_of[request.id],
                     vidur_request_context(request, delay_caused=self._delay_caused(request))) for request in completed)
        return credit_requests(self.composer, contexts, info)

    def _delay_caused(self, request: Any) -> float:
        """Prefill wait ``request`` added to the requests routed after it to its replica (s).

        Each request routed to the same replica after it, and arriving before its first token,
        queued behind its prefill (Sarathi serves prefills first come, first served), so each
        waited about its prefill time (scheduled to first token, slowdowns included). Routing
        is in arrival order, so those requests are the next ones in the replica's arrival list.
        """
        ep = self._ep
        replica, position = ep.placed[request.id]
        arrivals = ep.arrivals_on[replica]
        behind = bisect.bisect_left(arrivals, request._prefill_completed_at, lo=position + 1) - (position + 1)
        prefill_s = max(request._prefill_completed_at - request.scheduled_at, 0.0)
        return float(max(behind, 0) * prefill_s)

    def close(self) -> None:
        self._ep = None
        self._scheduler = None
        self._tracker = None

    # ---- what policies read, and metrics -----------------------------------------------------------------
    def true_speeds(self) -> np.ndarray:
        """Every replica's speed now, slowdowns included: hidden from observations, for the oracle and tests."""
        if self._scheduler is None or self._ep is None:
            raise RuntimeError("true_speeds() called before reset()")
        return self._scheduler.true_speeds(self._ep.time)

    def snapshot(self) -> ReplicaSnapshot:
        """Per-replica state at the current decision (what heuristics and observations read)."""
        return self._current_snapshot()

    @property
    def pending_prompt_tokens(self) -> int:
        """Prompt length of the request awaiting routing (0 when none)."""
        ep = self._ep
        return int(ep.pending[0].num_prefill_tokens) if ep and ep.pending else 0

    @property
    def requests_per_episode(self) -> int:
        """Routing decisions per episode (the env config's ``requests_per_episode``)."""
        return int(self.env_config.requests_per_episode)

    @property
    def sim_time(self) -> float:
        """Current simulated time (s)."""
        return self._ep.time if self._ep else 0.0

    def drain(self) -> SyncResult:
        """Run the simulation to its end (all routed requests complete; no further routing).

        Returns what happened meanwhile (the tracker's sync over the drained interval).
        """
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
        result = self._tracker.sync(ep.time)
        ep.snapshot = None
        return result

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
        cache = self._tracker.prefix_cache
        prompt_tokens = cache.prompt_tokens if cache is not None else sum(int(r.num_prefill_tokens) for r in ep.requests)
        return EpisodeMetrics(
            prompt_tokens=prompt_tokens,
            cached_prompt_tokens=cache.cached_tokens if cache is not None else 0,
            seed=ep.seed,
            num_requests=len(ep.requests),
            num_routed=ep.decisions,
            num_completed=len(done),
            e2e=e2e,
            ttft=ttft,
            scheduling_delay=delay,
            throughput=float(throughput),
            makespan=float(makespan),
            routed_per_replica=np.array([len(a) for a in ep.arrivals_on], dtype=np.int64),
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

        reset_vidur_ids()
        apply_restart_fix()
        cfg = self.env_config
        arrivals = sample_arrivals(cfg, seed) if self._arrivals_source is None else None
        self._sim_config.seed = seed
        cluster = Cluster(self._sim_config.cluster_config, self._sim_config.metrics_config)
        scheduler = EnvGlobalScheduler(
            self._sim_config,
            cluster.replicas,
            predictor=self._predictor,
            recent_window_s=cfg.observation.recent_window_s,
            declared_speeds=cfg.replica_speeds,
            slowdowns=cfg.slowdowns,
            speed_tau_s=cfg.observation.speed_tau_s,
        )
        ep = _Episode(seed, cfg.num_replicas)
        prompts, cache = None, None
        if self._arrivals_source is not None:
            prompts = self._arrivals_source(seed)
            arrivals = prompts.arrivals
        elif cfg.shared_prefix is not None:
            prompts = shared_prefix_workload(cfg, arrivals, seed, self._block_size)
            arrivals = prompts.arrivals
        if prompts is not None:
            vidur_blocks = min(int(rs._cache_config.num_blocks) for rs in scheduler.replica_scheduler_list)
            capacity = [vidur_blocks if own is None else own for own in cfg.replica_kv_blocks]
            cache = scheduler.tracker.prefix_cache = SimulatedPrefixCache(cfg.num_replicas, capacity, self._block_size)
        for i, (t, p, d) in enumerate(zip(arrivals.arrived_at, arrivals.prefill_tokens, arrivals.decode_tokens,
                                          strict=True)):
            request = Request(arrived_at=float(t), num_prefill_tokens=int(p), num_decode_tokens=int(d))
            if cache is not None:
                cache.add_request(request, prompts.block_hashes[i])
            ep.requests.append(request)
            event = RequestArrivalEvent(request.arrived_at, request)
            heapq.heappush(ep.heap, (event._priority_number, event))
        self._ep, self._scheduler, self._tracker = ep, scheduler, scheduler.tracker
        self._context.reset()

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
            cache = self._tracker.prefix_cache
            if cache is not None and ep.pending:
                ep.snapshot = dataclasses.replace(ep.snapshot, prefix_match=cache.match(ep.pending[0]),
                                                  prefix_blocks=cache.router_blocks())
        return ep.snapshot

    def _observation(self) -> np.ndarray:
        return build_observation(
            self._current_snapshot(), self.pending_prompt_tokens, self.env_config.observation, self._block_size
        )

ENV_ID = "rewardkit/VidurRouting-v0"
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="schedulers.sim.env:VidurRoutingEnv")
