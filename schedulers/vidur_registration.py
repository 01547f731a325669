"""Our global schedulers inside Vidur: registered from outside the package, plus cluster tracking.

Importing this module registers ``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``,
``power_of_two`` and ``ppo`` with Vidur (a ``BaseIntEnum`` of new values, one
``BaseGlobalSchedulerConfig`` dataclass per scheduler, ``GlobalSchedulerRegistry.register``), so
that Vidur's own CLI accepts ``--global_scheduler_config_type jsq`` once this module is imported
before it parses its arguments. Vidur's ``round_robin``, ``random`` and ``lor`` are untouched.

:class:`ClusterTracker` follows the requests a router sent to each replica and builds the
:class:`~schedulers.heuristics.ReplicaSnapshot` (including recent completions) that heuristics,
the PPO scheduler and :class:`~schedulers.env.VidurRoutingEnv` all read.
"""

# No ``from __future__ import annotations``: Vidur's flat CLI reads dataclass field types.
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import numpy as np
from vidur.config import (
    BaseGlobalSchedulerConfig,
    LORGlobalSchedulerConfig,
    RandomGlobalSchedulerConfig,
    RoundRobinGlobalSchedulerConfig,
    SimulationConfig,
)
from vidur.entities import Replica, Request
from vidur.scheduler import BaseGlobalScheduler, GlobalSchedulerRegistry
from vidur.scheduler.replica_scheduler.replica_scheduler_registry import ReplicaSchedulerRegistry
from vidur.types import BaseIntEnum, ReplicaId

from .heuristics import HEURISTICS, ReplicaSnapshot

DEFAULT_RECENT_WINDOW_S = 10.0


# ---- cluster tracking -----------------------------------------------------------------------------
@dataclass
class TrackedRequest:
    """A routed, unfinished request and what the router knew when routing it."""

    request: Request
    replica: int
    #: prompt length at arrival (Vidur folds generated tokens into the prompt on a restart).
    prompt_tokens: int
    first_token_seen: bool = False


@dataclass
class SyncResult:
    """What happened between two :meth:`ClusterTracker.sync` calls."""

    #: requests that completed in the interval.
    completed: List[Request] = field(default_factory=list)
    #: requests whose first output token (end of prefill) came in the interval.
    first_tokens: List[Request] = field(default_factory=list)
    #: request-seconds spent in the system by routed requests during the interval.
    in_system_area: float = 0.0
    #: length of the interval (simulated seconds).
    dt: float = 0.0


def remaining_prompt_tokens(request: Request) -> int:
    """Prompt tokens the replica has not processed yet (0 once prefill is complete)."""
    if request.is_prefill_complete:
        return 0
    return max(request.num_prefill_tokens - request.num_processed_tokens, 0)


class ClusterTracker:
    """Routed requests per replica, completions, first tokens and the per-replica snapshot.

    It reads only what a real router could know: queue contents, KV-cache use, prompt lengths and
    tokens generated so far, never a request's future output length.
    """

    def __init__(self, replica_schedulers: List[Any], recent_window_s: float = DEFAULT_RECENT_WINDOW_S) -> None:
        self.replica_schedulers = replica_schedulers
        self.num_replicas = len(replica_schedulers)
        self.recent_window_s = float(recent_window_s)
        self.inflight: List[Dict[int, TrackedRequest]] = [{} for _ in replica_schedulers]
        self.completion_times: List[deque] = [deque() for _ in replica_schedulers]
        #: (completed_at, e2e seconds) of recent completions, cluster-wide.
        self.recent_e2e: deque = deque()
        #: (first token time, time to first token) of recent first tokens, cluster-wide.
        self.recent_ttft: deque = deque()
        self.last_sync = 0.0
        self.num_completed = 0

    def assign(self, request: Request, replica: int) -> None:
        """Record that ``request`` was routed to ``replica``."""
        self.inflight[replica][request.id] = TrackedRequest(request, replica, request.num_prefill_tokens)

    @property
    def in_system(self) -> int:
        """Routed requests not yet completed."""
        return sum(len(d) for d in self.inflight)

    def sync(self, now: float) -> SyncResult:
        """Collect completions and first tokens since the previous call, up to ``now``."""
        t0, result = self.last_sync, SyncResult(dt=max(now - self.last_sync, 0.0))
        area = 0.0
        for replica, tracked in enumerate(self.inflight):
            finished = []
            for rid, item in tracked.items():
                req = item.request
                start = max(t0, req.arrived_at)
                if req.completed:
                    finished.append(rid)
                    area += max(min(req.completed_at, now) - start, 0.0)
                else:
                    area += max(now - start, 0.0)
                if not item.first_token_seen and req._prefill_completed_at > 0:
                    item.first_token_seen = True
                    result.first_tokens.append(req)
            if finished:
                times = []
                for rid in finished:
                    req = tracked.pop(rid).request
                    result.completed.append(req)
                    times.append(req.completed_at)
                self.completion_times[replica].extend(sorted(times))
        result.completed.sort(key=lambda r: (r.completed_at, r.id))
        result.first_tokens.sort(key=lambda r: (r._prefill_completed_at, r.id))
        for req in result.completed:
            self.recent_e2e.append((req.completed_at, req.completed_at - req.arrived_at))
        for req in result.first_tokens:
            self.recent_ttft.append((req._prefill_completed_at, req._prefill_completed_at - req.arrived_at))
        self.num_completed += len(result.completed)
        result.in_system_area = area
        self.last_sync = max(now, t0)
        self._expire(now)
        return result

    def _expire(self, now: float) -> None:
        horizon = now - self.recent_window_s
        for times in self.completion_times:
            while times and times[0] <= horizon:
                times.popleft()
        for window in (self.recent_e2e, self.recent_ttft):
            while window and window[0][0] <= horizon:
                window.popleft()

    def snapshot(self) -> ReplicaSnapshot:
        """Per-replica load now (call :meth:`sync` first so completions are current)."""
        n = self.num_replicas
        waiting = np.zeros(n)
        running = np.zeros(n)
        kv_blocks = np.zeros(n)
        kv_capacity = np.zeros(n)
        prefill = np.zeros(n)
        decoded = np.zeros(n)
        waiting_prefill = np.zeros(n)
        busy = np.zeros(n)
        for i, rs in enumerate(self.replica_schedulers):
            queue = rs._request_queue
            waiting[i] = len(queue)
            running[i] = len(rs._allocation_map)
            kv_blocks[i] = rs._num_allocated_blocks
            kv_capacity[i] = rs._cache_config.num_blocks
            busy[i] = 1.0 if rs._num_running_batches > 0 else 0.0
            waiting_prefill[i] = sum(remaining_prompt_tokens(r) for r in queue)
            p = d = 0
            for item in self.inflight[i].values():
                req = item.request
                if req.completed:
                    continue
                p += remaining_prompt_tokens(req)
                d += (req.num_prefill_tokens - item.prompt_tokens) + req.num_processed_decode_tokens
            prefill[i] = p
            decoded[i] = d
        recent = np.array([len(t) for t in self.completion_times], dtype=np.float64)
        return ReplicaSnapshot(
            waiting=waiting,
            running=running,
            kv_blocks=kv_blocks,
            kv_capacity=kv_capacity,
            prefill_tokens=prefill,
            decoded_tokens=decoded,
            waiting_prefill_tokens=waiting_prefill,
            recent_completions=recent,
            busy=busy,
        )


# ---- Vidur global schedulers ----------------------------------------------------------------------
class RewardkitGlobalSchedulerType(BaseIntEnum):
    """Vidur scheduler types added by rewardkit (values far from Vidur's 1-3)."""

    JSQ = 101
    LEAST_KV = 102
    LEAST_TOKENS = 103
    LEAST_PREFILL = 104
    POWER_OF_TWO = 105
    PPO = 106


@dataclass
class JsqGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.JSQ


@dataclass
class LeastKvGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_KV


@dataclass
class LeastTokensGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_TOKENS


@dataclass
class LeastPrefillGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_PREFILL


@dataclass
class PowerOfTwoGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.POWER_OF_TWO


@dataclass
class PpoGlobalSchedulerConfig(BaseGlobalSchedulerConfig):
    checkpoint: str = field(default="", metadata={"help": "PPO router checkpoint to load."})

    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.PPO


def _init_replica_schedulers(
    scheduler: BaseGlobalScheduler, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any
) -> None:
    """``BaseGlobalScheduler.__init__`` of Vidur 0.0.26 with a ready execution-time predictor."""
    scheduler._config = config
    scheduler._replicas = replicas
    scheduler._num_replicas = len(replicas)
    cluster = config.cluster_config
    scheduler._replica_schedulers = {
        replica_id: ReplicaSchedulerRegistry.get(
            cluster.replica_scheduler_config.get_type(),
            replica_config=cluster.replica_config,
            replica_scheduler_config=cluster.replica_scheduler_config,
            cache_config=cluster.cache_config,
            request_generator_config=config.request_generator_config,
            replica=replica,
            num_stages=cluster.replica_config.num_pipeline_stages,
            execution_time_predictor=predictor,
        )
        for replica_id, replica in replicas.items()
    }
    scheduler._request_queue = []


class RoutingGlobalScheduler(BaseGlobalScheduler):
    """A Vidur global scheduler that routes each queued request by :meth:`route` on a snapshot.

    ``predictor`` (optional) reuses an already built execution-time predictor instead of letting
    Vidur build one per simulator.
    """

    def __init__(
        self,
        config: SimulationConfig,
        replicas: Dict[ReplicaId, Replica],
        predictor: Any = None,
        recent_window_s: float = DEFAULT_RECENT_WINDOW_S,
    ) -> None:
        if predictor is None:
            super().__init__(config, replicas)
        else:
            _init_replica_schedulers(self, config, replicas, predictor)
        ids = sorted(self._replica_schedulers)
        if [r.id for r in ids] != list(range(len(ids))):
            raise RuntimeError(
                f"replica ids are {[r.id for r in ids]}, expected 0..{len(ids) - 1}: reset Vidur's entity id "
                "counters before building a second cluster in one process (schedulers.env.reset_vidur_ids)"
            )
        self.replica_scheduler_list = [self._replica_schedulers[r] for r in ids]
        self.tracker = ClusterTracker(self.replica_scheduler_list, recent_window_s)
        self.rng = np.random.default_rng(config.seed)
        self.num_routed = 0

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        """Replica index for ``request``; subclasses implement it."""
        raise NotImplementedError

    def schedule(self) -> List[Tuple[ReplicaId, Request]]:
        self.sort_requests()
        if not self._request_queue:
            return []
        now = max(r.arrived_at for r in self._request_queue)
        self.tracker.sync(now)
        snapshot = self.tracker.snapshot()
        mapping = []
        while self._request_queue:
            request = self._request_queue.pop(0)
            replica = int(self.route(snapshot, request))
            if not 0 <= replica < self._num_replicas:
                raise ValueError(f"{type(self).__name__} routed to replica {replica}, expected 0..{self._num_replicas - 1}")
            self.tracker.assign(request, replica)
            self.num_routed += 1
            snapshot = snapshot.with_assignment(replica, request.num_prefill_tokens)
            mapping.append((ReplicaId(replica), request))
        return mapping


class HeuristicGlobalScheduler(RoutingGlobalScheduler):
    """Routes with one of :data:`schedulers.heuristics.HEURISTICS` (``heuristic`` class attribute)."""

    heuristic = ""

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        return HEURISTICS[self.heuristic](snapshot, self.rng)


class JsqGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "jsq"


class LeastKvGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "least_kv"


class LeastTokensGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "least_tokens"


class LeastPrefillGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "least_prefill"


class PowerOfTwoGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "power_of_two"


class PpoGlobalScheduler(RoutingGlobalScheduler):
    """Routes with a router from ``schedulers.routers.make_router("ppo", checkpoint=...)``.

    The router gets the env's observation for the current request (built by
    :func:`schedulers.env.build_observation` with the router's ``observation_config`` attribute if
    it has one, else the defaults) and ``env=None``.
    """

    def __init__(self, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any = None, **kw: Any) -> None:
        from .env_config import ObservationConfig
        from .routers import make_router

        gs_config = config.cluster_config.global_scheduler_config
        checkpoint = getattr(gs_config, "checkpoint", "")
        if not checkpoint:
            raise ValueError("the ppo global scheduler needs --ppo_global_scheduler_config_checkpoint PATH")
        self.router = make_router("ppo", checkpoint=checkpoint)
        self.observation_config = getattr(self.router, "observation_config", None) or ObservationConfig()
        kw.setdefault("recent_window_s", self.observation_config.recent_window_s)
        super().__init__(config, replicas, predictor, **kw)
        self.router.reset(config.seed)

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        from .env import build_observation

        obs = build_observation(snapshot, request.num_prefill_tokens, self.observation_config)
        return int(self.router.act(obs, None))


class EnvGlobalScheduler(RoutingGlobalScheduler):
    """Holds the replica schedulers for :class:`schedulers.env.VidurRoutingEnv`, which routes itself."""

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        raise RuntimeError("VidurRoutingEnv routes requests through env.step(); schedule() is not used")


#: our scheduler name -> (type, config class, scheduler class).
REGISTERED: Dict[str, Tuple[RewardkitGlobalSchedulerType, type, type]] = {
    "jsq": (RewardkitGlobalSchedulerType.JSQ, JsqGlobalSchedulerConfig, JsqGlobalScheduler),
    "least_kv": (RewardkitGlobalSchedulerType.LEAST_KV, LeastKvGlobalSchedulerConfig, LeastKvGlobalScheduler),
    "least_tokens": (
        RewardkitGlobalSchedulerType.LEAST_TOKENS,
        LeastTokensGlobalSchedulerConfig,
        LeastTokensGlobalScheduler,
    ),
    "least_prefill": (
        RewardkitGlobalSchedulerType.LEAST_PREFILL,
        LeastPrefillGlobalSchedulerConfig,
        LeastPrefillGlobalScheduler,
    ),
    "power_of_two": (
        RewardkitGlobalSchedulerType.POWER_OF_TWO,
        PowerOfTwoGlobalSchedulerConfig,
        PowerOfTwoGlobalScheduler,
    ),
    "ppo": (RewardkitGlobalSchedulerType.PPO, PpoGlobalSchedulerConfig, PpoGlobalScheduler),
}
VIDUR_BUILTIN_CONFIGS = {
    "round_robin": RoundRobinGlobalSchedulerConfig,
    "random": RandomGlobalSchedulerConfig,
    "lor": LORGlobalSchedulerConfig,
}


def register_global_schedulers() -> None:
    """Register our schedulers with Vidur's ``GlobalSchedulerRegistry`` (idempotent)."""
    for key, _config_cls, scheduler_cls in REGISTERED.values():
        GlobalSchedulerRegistry.register(key, scheduler_cls)


def global_scheduler_names() -> List[str]:
    """Every global scheduler name Vidur accepts once this module is imported."""
    return list(VIDUR_BUILTIN_CONFIGS) + list(REGISTERED)


def global_scheduler_config(name: str, **kwargs: Any) -> BaseGlobalSchedulerConfig:
    """Vidur config object for global scheduler ``name`` (``checkpoint=`` for ``ppo``)."""
    if name in VIDUR_BUILTIN_CONFIGS:
        return VIDUR_BUILTIN_CONFIGS[name](**kwargs)
    if name in REGISTERED:
        return REGISTERED[name][1](**kwargs)
    raise ValueError(f"unknown global scheduler {name!r}; expected one of: {', '.join(global_scheduler_names())}")


def vidur_main() -> None:
    """Vidur's own command line (``vidur.main``) with our schedulers registered, offline.

    Usage: ``python -c "from schedulers.vidur_registration import vidur_main; vidur_main()"
    --global_scheduler_config_type jsq ...`` (run the module this way, not with ``-m``, so that
    its classes are defined once).
    """
    from vidur.main import main

    from .vidur_profiles import configure_offline_environment

    configure_offline_environment()
    main()


register_global_schedulers()
