"""The routing seam: a :class:`Policy` picks a replica from a snapshot; :func:`make_policy` builds one by name.

Every place that routes decides through a Policy and nothing else: both envs' evaluation and
training loops (:func:`schedulers.environments.policy_action`), the Vidur registration
(:mod:`schedulers.sim.registration`), the gateway (:mod:`schedulers.serve.gateway`) and the
serving benchmark. A policy reads a :class:`~schedulers.routing.snapshot.ReplicaSnapshot` and the
arriving request's prompt length; a learned one also reads the observation rows it declares
(``observation``), and the ``oracle`` reads the replicas' true speeds (``needs_true_speed``), which
only a simulator knows. No policy calls back into an env.

:func:`make_policy` is the only place a router name is checked:

- every heuristic of :data:`schedulers.routing.heuristics.HEURISTIC_NAMES` (pure functions of the
  snapshot, one generator seeded by :meth:`Policy.reset` breaking ties):
  :class:`HeuristicPolicy`;
- ``ppo``: a checkpoint written by ``rewardkit train``
  (:class:`schedulers.rl.ppo_router.PPORouter`, which needs torch and registers itself with
  :func:`register_policy` when its module is first imported);
- any name another module registers with :func:`register_policy`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

from .heuristics import HEURISTIC_NAMES, choose
from .observation import ObservationConfig
from .prefix_baselines import PREFIX_BASELINES, parse_router_spec
from .snapshot import ReplicaSnapshot


class Policy(ABC):
    """Picks the replica for the request awaiting routing (see the module doc)."""

    #: the name :func:`make_policy` built it under.
    name: str = ""
    #: the observation rows it reads (built by :func:`schedulers.routing.observation.build_observation`
    #: with these settings); ``None``: it reads the snapshot alone.
    observation: ObservationConfig | None = None
    #: it reads the replicas' true current speeds (``true_speed``), which only a simulator knows.
    needs_true_speed: bool = False

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 - most policies keep no state
        """Start an episode (``seed``: the episode seed; it seeds any randomness the policy uses)."""

    @abstractmethod
    def decide(self, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, *, rows: np.ndarray | None = None,
               true_speed: np.ndarray | None = None) -> int:
        """The index (into the snapshot's replicas) of the replica for a request of ``prompt_tokens``.

        ``rows`` are the observation rows of the same replicas when ``observation`` is set;
        ``true_speed`` the replicas' current speeds when ``needs_true_speed``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class HeuristicPolicy(Policy):
    """Routes like the heuristic ``name``: owns a generator for tie-breaking and ``random`` (seeded by
    :meth:`reset` with the episode seed) and the count of decisions since (``round_robin`` sends the
    k-th request to k mod n). ``params``: the thresholds of a prefix baseline (``cache_aware``,
    ``affinity_token_load``; :mod:`schedulers.routing.prefix_baselines`)."""

    def __init__(self, name: str, params: dict[str, float] | None = None, spec: str | None = None) -> None:
        #: the heuristic; ``name`` is how the router was written (with its parameters, if any).
        self.rule = name
        self.name = spec or name
        self.params = dict(params or {})
        self.needs_true_speed = name == "oracle"
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.decisions = 0

    def decide(self, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, *, rows: np.ndarray | None = None,
               true_speed: np.ndarray | None = None) -> int:
        pick = choose(self.rule, snapshot, self.rng, decision_index=self.decisions, prompt_tokens=prompt_tokens,
                      true_speed=true_speed, params=self.params or None)
        self.decisions += 1
        return pick


PolicyFactory = Callable[..., Policy]
_FACTORIES: dict[str, PolicyFactory] = {}
#: modules imported on the first use of a name, which call :func:`register_policy` for it.
_PROVIDERS = {"ppo": "schedulers.rl.ppo_router"}
#: names whose factory needs ``checkpoint``.
_NEEDS_CHECKPOINT = {"ppo"}


def register_policy(name: str, factory: PolicyFactory, *, replace: bool = False) -> None:
    """Make ``make_policy(name, checkpoint, **options)`` call ``factory(checkpoint=..., **options)``."""
    if name in HEURISTIC_NAMES:
        raise ValueError(f"{name!r} is a built-in heuristic router name")
    if name in _FACTORIES and not replace and _FACTORIES[name] is not factory:
        raise ValueError(f"a policy factory is already registered under {name!r}")
    _FACTORIES[name] = factory


def policy_names(*, simulated: bool = True) -> list[str]:
    """Router names :func:`make_policy` knows (``simulated=False``: those a live cluster can run)."""
    heuristics = [n for n in HEURISTIC_NAMES if simulated or n != "oracle"]
    return heuristics + sorted(set(_FACTORIES) | set(_PROVIDERS))


def make_policy(name: str, checkpoint: Any = None, *, seed: int | None = None, simulated: bool = True,
                **options: Any) -> Policy:
    """The policy routing as ``name``, reset with ``seed``.

    ``checkpoint`` is the file a learned policy loads (``ppo``); ``simulated=False`` refuses the
    ``oracle`` (a live cluster has no true speeds); ``options`` go to a registered factory
    (``ppo``: ``deterministic``, ``temperature``, ``threads``) or, as keyword options or written after
    the name (``cache_aware:balance_abs_threshold=8``), the thresholds of a prefix baseline. Raises
    ValueError naming the router and what was expected.
    """
    spec = name
    if isinstance(name, str) and ":" in name:
        name, params = parse_router_spec(name)
        options = {**params, **options}
    if isinstance(name, str) and name in PREFIX_BASELINES:
        if checkpoint is not None:
            raise ValueError(f"router {spec!r} is a heuristic: expected no checkpoint")
        parse_router_spec(":".join([name] + [f"{k}={v}" for k, v in options.items()]))  # checks the values
        policy: Policy = HeuristicPolicy(name, options, spec)
        policy.reset(seed)
        return policy
    if not isinstance(name, str) or name not in HEURISTIC_NAMES and name not in _FACTORIES and name not in _PROVIDERS:
        raise ValueError(f"unknown router {name!r}; expected one of: {', '.join(policy_names(simulated=simulated))}")
    if name == "oracle" and not simulated:
        raise ValueError("router 'oracle' reads the replicas' true speeds, which only the simulator knows; expected "
                         f"one of: {', '.join(policy_names(simulated=False))}")
    if name in HEURISTIC_NAMES:
        if checkpoint is not None or options:
            given = (["checkpoint"] if checkpoint is not None else []) + sorted(options)
            raise ValueError(f"router {name!r} is a heuristic: expected no checkpoint or options, got {', '.join(given)}")
        policy = HeuristicPolicy(name)
    else:
        if name in _NEEDS_CHECKPOINT and not checkpoint:
            raise ValueError(f"router {name!r} needs a checkpoint (a policy trained by rewardkit train)")
        if name not in _FACTORIES:
            importlib.import_module(_PROVIDERS[name])  # registers the factory (needs torch for ppo)
        if checkpoint is not None:
            options["checkpoint"] = checkpoint
        policy = _FACTORIES[name](**options)
    policy.reset(seed)
    return policy
