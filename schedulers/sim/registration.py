"""Our global schedulers inside Vidur: registered from outside the package, plus cluster tracking.

Importing this module registers ``jsq``, ``least_kv``, ``least_tokens``, ``least_prefill``,
``power_of_two``, the speed-aware ``cap_jsq``, ``cap_least_tokens``, ``cap_least_prefill``,
``adaptive``, ``oracle`` and ``ppo`` with Vidur (a ``BaseIntEnum`` of new values, one
``BaseGlobalSchedulerConfig`` dataclass per scheduler, ``GlobalSchedulerRegistry.register``), so
that Vidur's own CLI accepts ``--global_scheduler_config_type jsq`` once this module is imported
before it parses its arguments. Vidur's ``round_robin``, ``random`` and ``lor`` are untouched (and
run every replica at speed 1). Every registered scheduler takes ``--<name>_global_scheduler_config_cluster``:
an env YAML path (or JSON) whose ``replicas`` groups and ``slowdowns`` set each replica's speed.
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

from ..routing.observation import build_observation
from ..routing.policy import Policy, make_policy
from ..routing.snapshot import ReplicaSnapshot
from .env_config import replica_setup_from_spec
from .profiles import configure_offline_environment
from .slowdowns import SlowdownConfig, SlowdownSchedule
from .speed_scaling import BatchLog, install_replica_speeds
from .tracker import DEFAULT_RECENT_WINDOW_S, DEFAULT_SPEED_TAU_S, ClusterTracker

# ---- Vidur global schedulers ----------------------------------------------------------------------
class RewardkitGlobalSchedulerType(BaseIntEnum):
    """Vidur scheduler types added by rewardkit (values far from Vidur's 1-3)."""

    JSQ = 101
    LEAST_KV = 102
    LEAST_TOKENS = 103
    LEAST_PREFILL = 104
    POWER_OF_TWO = 105
    PPO = 106
    CAP_JSQ = 107
    CAP_LEAST_TOKENS = 108
    CAP_LEAST_PREFILL = 109
    ADAPTIVE = 110
    ORACLE = 111


_CLUSTER_HELP = (
    "Replica speeds and slowdowns: an env YAML path (its replicas and slowdowns sections) or their JSON; "
    "empty: every replica at speed 1, never slowed."
)


@dataclass
class ClusterOption:
    """The option every rewardkit scheduler takes inside Vidur (a mixin: Vidur lists every config subclass)."""

    cluster: str = field(default="", metadata={"help": _CLUSTER_HELP})


@dataclass
class JsqGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.JSQ


@dataclass
class LeastKvGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_KV


@dataclass
class LeastTokensGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_TOKENS


@dataclass
class LeastPrefillGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.LEAST_PREFILL


@dataclass
class PowerOfTwoGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.POWER_OF_TWO


@dataclass
class PpoGlobalSchedulerConfig(BaseGlobalSchedulerConfig, ClusterOption):
    checkpoint: str = field(default="", metadata={"help": "PPO router checkpoint to load."})

    @staticmethod
    def get_type():
        return RewardkitGlobalSchedulerType.PPO


def _speed_config(name: str, type_: RewardkitGlobalSchedulerType) -> type:
    """A config dataclass for a speed-aware heuristic (same options as the others)."""
    cls = dataclass(type(name, (BaseGlobalSchedulerConfig, ClusterOption), {"get_type": staticmethod(lambda: type_)}))
    cls.__module__ = __name__
    return cls


CapJsqGlobalSchedulerConfig = _speed_config("CapJsqGlobalSchedulerConfig", RewardkitGlobalSchedulerType.CAP_JSQ)
CapLeastTokensGlobalSchedulerConfig = _speed_config(
    "CapLeastTokensGlobalSchedulerConfig", RewardkitGlobalSchedulerType.CAP_LEAST_TOKENS
)
CapLeastPrefillGlobalSchedulerConfig = _speed_config(
    "CapLeastPrefillGlobalSchedulerConfig", RewardkitGlobalSchedulerType.CAP_LEAST_PREFILL
)
AdaptiveGlobalSchedulerConfig = _speed_config("AdaptiveGlobalSchedulerConfig", RewardkitGlobalSchedulerType.ADAPTIVE)
OracleGlobalSchedulerConfig = _speed_config("OracleGlobalSchedulerConfig", RewardkitGlobalSchedulerType.ORACLE)


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
    Vidur build one per simulator. Replica ``i`` runs at ``declared_speeds[i]`` times the
    slowdown factor of the episode's :class:`~schedulers.sim.slowdowns.SlowdownSchedule` (seeded
    with ``config.seed``); when neither is given they come from the scheduler config's ``cluster``
    option (see :func:`schedulers.sim.env_config.replica_setup_from_spec`).
    """

    def __init__(
        self,
        config: SimulationConfig,
        replicas: Dict[ReplicaId, Replica],
        predictor: Any = None,
        recent_window_s: float = DEFAULT_RECENT_WINDOW_S,
        declared_speeds: Any = None,
        slowdowns: SlowdownConfig | None = None,
        speed_tau_s: float = DEFAULT_SPEED_TAU_S,
    ) -> None:
        if predictor is None:
            super().__init__(config, replicas)
        else:
            _init_replica_schedulers(self, config, replicas, predictor)
        ids = sorted(self._replica_schedulers)
        if [r.id for r in ids] != list(range(len(ids))):
            raise RuntimeError(
                f"replica ids are {[r.id for r in ids]}, expected 0..{len(ids) - 1}: reset Vidur's entity id "
                "counters before building a second cluster in one process (schedulers.sim.vidur_ids.reset_vidur_ids)"
            )
        self.replica_scheduler_list = [self._replica_schedulers[r] for r in ids]
        if declared_speeds is None and slowdowns is None:
            spec = getattr(config.cluster_config.global_scheduler_config, "cluster", "")
            declared_speeds, slowdowns = replica_setup_from_spec(spec, len(ids))
        speeds = np.ones(len(ids)) if declared_speeds is None else np.asarray(declared_speeds, dtype=np.float64)
        if speeds.shape != (len(ids),):
            raise ValueError(f"{len(ids)} replicas but declared speeds {list(speeds)}")
        self.declared_speeds = speeds
        self.slowdown_schedule = SlowdownSchedule(slowdowns, len(ids), config.seed)
        self.batch_log = BatchLog()
        install_replica_speeds(self.replica_scheduler_list, speeds, self.slowdown_schedule.factor, self.batch_log)
        self.tracker = ClusterTracker(self.replica_scheduler_list, recent_window_s, speeds, self.batch_log, speed_tau_s)
        self.now = 0.0

    def true_speeds(self, t: float) -> np.ndarray:
        """Every replica's current speed (declared times the hidden slowdown factor): for the oracle only."""
        return self.declared_speeds * self.slowdown_schedule.factors(t)

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        """Replica index for ``request``; subclasses implement it."""
        raise NotImplementedError

    def schedule(self) -> List[Tuple[ReplicaId, Request]]:
        self.sort_requests()
        if not self._request_queue:
            return []
        now = max(r.arrived_at for r in self._request_queue)
        self.now = now
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


class PolicyGlobalScheduler(RoutingGlobalScheduler):
    """Routes with a :class:`~schedulers.routing.policy.Policy`, reset with the simulation's seed: it gets
    the snapshot, the request's prompt length, the observation rows when it reads them and the true
    speeds when it is the oracle."""

    policy: Policy

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        policy = self.policy
        rows = None if policy.observation is None else build_observation(snapshot, request.num_prefill_tokens,
                                                                          policy.observation)
        true_speed = self.true_speeds(self.now) if policy.needs_true_speed else None
        return policy.decide(snapshot, request.num_prefill_tokens, rows=rows, true_speed=true_speed)


class HeuristicGlobalScheduler(PolicyGlobalScheduler):
    """Routes with the heuristic named by the ``heuristic`` class attribute."""

    heuristic = ""

    def __init__(self, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any = None, **kw: Any) -> None:
        super().__init__(config, replicas, predictor, **kw)
        self.policy = make_policy(self.heuristic, seed=config.seed)


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


class CapJsqGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "cap_jsq"


class CapLeastTokensGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "cap_least_tokens"


class CapLeastPrefillGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "cap_least_prefill"


class AdaptiveGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "adaptive"


class OracleGlobalScheduler(HeuristicGlobalScheduler):
    heuristic = "oracle"


class PpoGlobalScheduler(PolicyGlobalScheduler):
    """Routes with ``make_policy("ppo", checkpoint)``: observation rows built with the checkpoint's own
    settings, whose window and speed time constant the tracker takes too."""

    def __init__(self, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any = None, **kw: Any) -> None:
        gs_config = config.cluster_config.global_scheduler_config
        checkpoint = getattr(gs_config, "checkpoint", "")
        if not checkpoint:
            raise ValueError("the ppo global scheduler needs --ppo_global_scheduler_config_checkpoint PATH")
        self.policy = make_policy("ppo", checkpoint, seed=config.seed)
        kw.setdefault("recent_window_s", self.policy.observation.recent_window_s)
        kw.setdefault("speed_tau_s", self.policy.observation.speed_tau_s)
        super().__init__(config, replicas, predictor, **kw)


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
    "cap_jsq": (RewardkitGlobalSchedulerType.CAP_JSQ, CapJsqGlobalSchedulerConfig, CapJsqGlobalScheduler),
    "cap_least_tokens": (
        RewardkitGlobalSchedulerType.CAP_LEAST_TOKENS,
        CapLeastTokensGlobalSchedulerConfig,
        CapLeastTokensGlobalScheduler,
    ),
    "cap_least_prefill": (
        RewardkitGlobalSchedulerType.CAP_LEAST_PREFILL,
        CapLeastPrefillGlobalSchedulerConfig,
        CapLeastPrefillGlobalScheduler,
    ),
    "adaptive": (RewardkitGlobalSchedulerType.ADAPTIVE, AdaptiveGlobalSchedulerConfig, AdaptiveGlobalScheduler),
    "oracle": (RewardkitGlobalSchedulerType.ORACLE, OracleGlobalSchedulerConfig, OracleGlobalScheduler),
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
