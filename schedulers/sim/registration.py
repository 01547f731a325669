"""Our global schedulers inside Vidur: registered from outside the package, plus cluster tracking.

Importing this module registers ``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``,
``power_of_two`` and ``ppo`` with Vidur (a ``BaseIntEnum`` of new values, one
``BaseGlobalSchedulerConfig`` dataclass per scheduler, ``GlobalSchedulerRegistry.register``), so
that Vidur's own CLI accepts ``--global_scheduler_config_type jsq`` once this module is imported
before it parses its arguments. Vidur's ``round_robin``, ``random`` and ``lor`` are untouched.
The replica state they route on comes from :class:`schedulers.sim.tracker.ClusterTracker`.
"""

# No ``from __future__ import annotations``: Vidur's flat CLI reads dataclass field types.
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

from ..routing.heuristics import HEURISTICS
from ..routing.observation import ObservationConfig, build_observation
from ..routing.router import make_router
from ..routing.snapshot import ReplicaSnapshot
from .profiles import configure_offline_environment
from .tracker import DEFAULT_RECENT_WINDOW_S, ClusterTracker

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
            snapshot = snapshot.with_assignment(replica, request.num_prefill_tokens)
            mapping.append((ReplicaId(replica), request))
        return mapping


class HeuristicGlobalScheduler(RoutingGlobalScheduler):
    """Routes with one of :data:`schedulers.routing.heuristics.HEURISTICS` (``heuristic`` class attribute)."""

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
    """Routes with a router from ``schedulers.routing.router.make_router("ppo", checkpoint=...)``.

    The router gets the env's observation for the current request (built by
    :func:`schedulers.routing.observation.build_observation` with the router's ``observation_config`` attribute if
    it has one, else the defaults) and ``env=None``.
    """

    def __init__(self, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any = None, **kw: Any) -> None:
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
        obs = build_observation(snapshot, request.num_prefill_tokens, self.observation_config)
        return int(self.router.act(obs, None))


class EnvGlobalScheduler(RoutingGlobalScheduler):
    """Holds the replica schedulers for :class:`schedulers.sim.env.VidurRoutingEnv`, which routes itself."""

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

    Usage: ``python -c "from schedulers.sim.registration import vidur_main; vidur_main()"
    --global_scheduler_config_type jsq ...`` (run the module this way, not with ``-m``, so that
    its classes are defined once).
    """
    from vidur.main import main

    configure_offline_environment()
    main()


register_global_schedulers()
