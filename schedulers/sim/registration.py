"""Every registered routing policy as a Vidur global scheduler, plus cluster tracking.

Importing this module registers every policy of :func:`schedulers.routing.policy.registered_policies`
(built-ins and entry-point plug-ins; Vidur's own ``round_robin``, ``random`` and ``lor`` stay
Vidur's, and run every replica at speed 1) with Vidur: a ``BaseIntEnum`` of new values, one
``BaseGlobalSchedulerConfig`` dataclass and one scheduler class per policy, made in one loop from
what the policy class declares, and ``GlobalSchedulerRegistry.register``. Vidur's own CLI then
accepts ``--global_scheduler_config_type jsq`` once this module is imported before it parses its
arguments. Every scheduler takes ``--<name>_global_scheduler_config_cluster``: an env YAML path (or
JSON) whose ``replicas`` groups and ``slowdowns`` set each replica's speed; one whose policy needs a
checkpoint takes ``--<name>_global_scheduler_config_checkpoint``, and one with parameters takes each
(``--cache_aware_global_scheduler_config_cache_threshold 0.5``). The replica state they route on
comes from :class:`schedulers.sim.tracker.ClusterTracker`.
"""

# No ``from __future__ import annotations``: Vidur's flat CLI reads dataclass field types.
import dataclasses
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
from ..routing.policy import Policy, make_policy, registered_policies
from ..routing.snapshot import ReplicaSnapshot
from .env_config import replica_setup_from_spec
from .profiles import configure_offline_environment
from .slowdowns import SlowdownConfig, SlowdownSchedule
from .speed_scaling import BatchLog, install_replica_speeds
from .tracker import DEFAULT_RECENT_WINDOW_S, DEFAULT_SPEED_TAU_S, ClusterTracker

# ---- Vidur global schedulers ----------------------------------------------------------------------
_CLUSTER_HELP = (
    "Replica speeds and slowdowns: an env YAML path (its replicas and slowdowns sections) or their JSON; "
    "empty: every replica at speed 1, never slowed."
)
#: the first value of our scheduler types (far from Vidur's 1-3)
FIRST_TYPE_VALUE = 101


@dataclass
class ClusterOption:
    """The option every rewardkit scheduler takes inside Vidur (a mixin: Vidur lists every config subclass)."""

    cluster: str = field(default="", metadata={"help": _CLUSTER_HELP})


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
    """Routes with the policy registered as ``policy_name`` (a class attribute), reset with the simulation's
    seed: it gets the snapshot, the request's prompt length, the observation rows when it reads them and
    the true speeds when it declares ``needs_true_speed``. The checkpoint and parameters come from the
    scheduler config; a policy that reads observation rows sets the tracker's window and speed time
    constant to its own."""

    policy_name = ""
    policy: Policy

    def __init__(self, config: SimulationConfig, replicas: Dict[ReplicaId, Replica], predictor: Any = None, **kw: Any) -> None:
        name = self.policy_name
        gs_config = config.cluster_config.global_scheduler_config
        checkpoint = getattr(gs_config, "checkpoint", "") or None
        if registered_policies()[name].needs_checkpoint and not checkpoint:
            raise ValueError(f"the {name} global scheduler needs --{name}_global_scheduler_config_checkpoint PATH")
        params = {f: getattr(gs_config, f) for f in _param_fields(registered_policies()[name]) if hasattr(gs_config, f)}
        self.policy = make_policy(name, checkpoint, seed=config.seed, **params)
        if self.policy.observation is not None:
            kw.setdefault("recent_window_s", self.policy.observation.recent_window_s)
            kw.setdefault("speed_tau_s", self.policy.observation.speed_tau_s)
        super().__init__(config, replicas, predictor, **kw)

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        policy = self.policy
        rows = None if policy.observation is None else build_observation(snapshot, request.num_prefill_tokens,
                                                                          policy.observation)
        true_speed = self.true_speeds(self.now) if policy.needs_true_speed else None
        return policy.decide(snapshot, request.num_prefill_tokens, rows=rows, true_speed=true_speed)


class EnvGlobalScheduler(RoutingGlobalScheduler):
    """Holds the replica schedulers for :class:`schedulers.sim.env.VidurRoutingEnv`, which routes itself."""

    def route(self, snapshot: ReplicaSnapshot, request: Request) -> int:
        raise RuntimeError("VidurRoutingEnv routes requests through env.step(); schedule() is not used")


VIDUR_BUILTIN_CONFIGS = {
    "round_robin": RoundRobinGlobalSchedulerConfig,
    "random": RandomGlobalSchedulerConfig,
    "lor": LORGlobalSchedulerConfig,
}


def _param_fields(policy_cls: type) -> List[str]:
    return [f.name for f in dataclasses.fields(policy_cls.Params)] if policy_cls.Params is not None else []


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_") if part)


def _build_registered() -> Tuple[type, Dict[str, Tuple[Any, type, type]]]:
    """One scheduler type, config dataclass and scheduler class per registered policy Vidur lacks."""
    policies = {n: c for n, c in registered_policies().items() if n not in VIDUR_BUILTIN_CONFIGS}
    types = BaseIntEnum("RewardkitGlobalSchedulerType",
                        [(n.upper(), FIRST_TYPE_VALUE + i) for i, n in enumerate(policies)], module=__name__)
    table: Dict[str, Tuple[Any, type, type]] = {}
    for name, policy_cls in policies.items():
        key = types[name.upper()]
        fields: List[Any] = []
        if policy_cls.needs_checkpoint:
            fields.append(("checkpoint", str, field(default="", metadata={"help": f"{name} checkpoint to load."})))
        defaults = policy_cls.Params() if policy_cls.Params is not None else None
        for pname in _param_fields(policy_cls):
            fields.append((pname, float, field(default=float(getattr(defaults, pname)),
                                               metadata={"help": f"{name}'s {pname}"})))
        config_cls = dataclasses.make_dataclass(
            f"{_camel(name)}GlobalSchedulerConfig", fields, bases=(BaseGlobalSchedulerConfig, ClusterOption),
            namespace={"get_type": staticmethod(lambda key=key: key)})
        config_cls.__module__ = __name__
        scheduler_cls = type(f"{_camel(name)}GlobalScheduler", (PolicyGlobalScheduler,),
                             {"policy_name": name, "__module__": __name__})
        table[name] = (key, config_cls, scheduler_cls)
    return types, table


#: our scheduler types, and scheduler name -> (type, config class, scheduler class).
RewardkitGlobalSchedulerType, REGISTERED = _build_registered()


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
