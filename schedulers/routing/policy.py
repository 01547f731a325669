"""The routing seam: a :class:`Policy` picks a replica from a snapshot; policies are registered by name.

Every place that routes decides through a Policy and nothing else: both envs' evaluation and
training loops (:func:`schedulers.environments.policy_action`), the Vidur registration
(:mod:`schedulers.sim.registration`), the gateway (:mod:`schedulers.serve.gateway`) and the
benchmarks. A policy reads a :class:`~schedulers.routing.snapshot.ReplicaSnapshot` and the
arriving request's prompt length; a learned one also reads the observation rows it declares
(``observation``), and one that declares ``needs_true_speed`` the replicas' true speeds, which
only a simulator knows. No policy calls back into an env.

A policy is a :class:`Policy` subclass registered with ``@register_policy("name")``; the class
declares what it needs (:attr:`Policy.needs_true_speed`, :attr:`Policy.needs_checkpoint`,
:attr:`Policy.live`, a parameters dataclass :attr:`Policy.Params`) and every caller reads those
declarations instead of branching on names. :func:`make_policy` is a lookup in that registry. The
built-in policies live in :mod:`schedulers.routing.policies`, one module per family; policies of
other packages come in through the entry-point group ``schedulers.policies`` (name -> a Policy
subclass), loaded the first time a name is not found.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from abc import ABC, abstractmethod
from importlib.metadata import entry_points
from typing import Any, TypeVar

import numpy as np

from ..shared.observation_config import ObservationConfig
from .snapshot import ReplicaSnapshot

#: the entry-point group through which other packages add policies (name -> a :class:`Policy` subclass)
ENTRY_POINT_GROUP = "schedulers.policies"
#: the package whose modules register the built-in policies when imported
BUILTIN_PACKAGE = "schedulers.routing.policies"


class Policy(ABC):
    """Picks the replica for the request awaiting routing (see the module doc).

    Subclasses implement :meth:`decide` (and :meth:`reset` when they keep state) and declare what
    they need as class attributes; :func:`make_policy` builds them through :meth:`create`.
    """

    #: the name the router was built under (``make_policy`` sets it to the spec as written).
    name: str = ""
    #: the observation rows it reads (built by :func:`schedulers.routing.observation.build_observation`
    #: with these settings); ``None``: it reads the snapshot alone.
    observation: ObservationConfig | None = None
    #: it reads the replicas' true current speeds (``true_speed``), which only a simulator knows.
    needs_true_speed: bool = False
    #: which replica speed it reads: "" none, "declared" (the env's hardware types), "measured" (estimated
    #: online) or "true" (the simulator's hidden current speeds; then ``needs_true_speed``).
    reads_speed: str = ""
    #: it is built from a file (``make_policy(name, checkpoint)``), e.g. a trained network.
    needs_checkpoint: bool = False
    #: it can route a live cluster (False for what only a simulator can feed it).
    live: bool = True
    #: it learned its rule from data (not counted among the heuristics an evaluation compares against).
    learned: bool = False
    #: its parameters: a frozen dataclass whose fields are set as ``name:key=value`` or keyword options;
    #: ``None``: it takes none. :meth:`create` passes the instance to the constructor as ``params``.
    Params: type | None = None
    #: it accepts other keyword options of ``make_policy`` (passed to :meth:`create`).
    takes_options: bool = True

    @classmethod
    def create(cls, *, params: Any = None, checkpoint: Any = None, threads: int | None = None,
               **options: Any) -> "Policy":
        """Build the policy: ``params`` is a :attr:`Params` instance (or None), ``checkpoint`` the file of
        a policy that declares :attr:`needs_checkpoint`, ``threads`` a thread count a learned policy may
        use (others ignore it), ``options`` the rest of ``make_policy``'s keywords."""
        if cls.Params is not None:
            return cls(params=params, **options)
        return cls(**options)

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
    """A rule of the snapshot alone: owns a generator for tie-breaking and random draws (seeded by
    :meth:`reset` with the episode seed) and the count of decisions since (``round_robin`` sends the
    k-th request to k mod n). Subclasses implement :meth:`pick`."""

    takes_options = False

    def __init__(self, params: Any = None) -> None:
        self.params = params
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.decisions = 0

    def decide(self, snapshot: ReplicaSnapshot, prompt_tokens: float = 0.0, *, rows: np.ndarray | None = None,
               true_speed: np.ndarray | None = None) -> int:
        pick = self.pick(snapshot, prompt_tokens, true_speed)
        self.decisions += 1
        return pick

    @abstractmethod
    def pick(self, snapshot: ReplicaSnapshot, prompt_tokens: float, true_speed: np.ndarray | None) -> int:
        """The replica for this request (``self.rng`` breaks ties; ``self.decisions`` counts earlier picks)."""


P = TypeVar("P", bound=type)
_REGISTRY: dict[str, type[Policy]] = {}
_loaded = {"builtins": False, "entry_points": False}
#: entry points that failed to load: name -> why
_BROKEN: dict[str, str] = {}
#: name -> the entry-point values already read for it (the first registered it; the rest were warned about)
_LOADED_FROM: dict[str, tuple[str, ...]] = {}


class PluginWarning(UserWarning):
    """A router plug-in was skipped: its name is taken by a built-in or by another plug-in."""


def register_policy(name: str, cls: type[Policy] | None = None, *, replace: bool = False) -> Any:
    """Register the :class:`Policy` subclass ``cls`` under ``name``: ``@register_policy("name")`` on the
    class, or ``register_policy("name", cls)``. A name is registered once (``replace=True`` overrides)."""

    def add(policy_cls: P) -> P:
        if not (isinstance(policy_cls, type) and issubclass(policy_cls, Policy)):
            raise TypeError(f"register_policy({name!r}): expected a Policy subclass, got {policy_cls!r}")
        if not isinstance(name, str) or not name or ":" in name or "=" in name:
            raise ValueError(f"register_policy: expected a name without ':' or '=', got {name!r}")
        _load_builtins()  # a built-in name is taken before anything else registers
        known = _REGISTRY.get(name)
        if known is not None and known is not policy_cls and not replace:
            raise ValueError(f"a policy is already registered under {name!r} ({known.__module__}.{known.__qualname__})")
        _REGISTRY[name] = policy_cls
        return policy_cls

    return add if cls is None else add(cls)


def _load_builtins() -> None:
    if not _loaded["builtins"]:
        _loaded["builtins"] = True
        importlib.import_module(BUILTIN_PACKAGE)


def _load_entry_points(again: bool = False) -> None:
    """Register every policy of the ``schedulers.policies`` entry-point group (once, or ``again`` when a
    name is not found: a package may have been installed since); a broken one is remembered with why."""
    if _loaded["entry_points"] and not again:
        return
    _loaded["entry_points"] = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY or ep.name in _BROKEN:
            seen = _LOADED_FROM.get(ep.name, ())
            if ep.value not in seen:  # another entry point, or a built-in, owns the name: said once
                known = _REGISTRY.get(ep.name)
                owner = (f"entry point {seen[0]!r}" if seen else
                         f"{known.__module__}.{known.__qualname__}" if known is not None else "another entry point")
                warnings.warn(f"router plug-in {ep.name!r} (entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r}) "
                              f"skipped: the name is already taken by {owner}", PluginWarning, stacklevel=3)
                _LOADED_FROM[ep.name] = (*seen, ep.value)
            continue
        try:
            cls = ep.load()
            register_policy(ep.name, cls)
            _LOADED_FROM[ep.name] = (ep.value,)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plug-in (even one calling sys.exit) is
            # reported by name, never ends the process nor hides the others
            _BROKEN[ep.name] = f"entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r} failed: " \
                               f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            _LOADED_FROM[ep.name] = (ep.value,)


def is_heuristic(policy: Policy | type[Policy]) -> bool:
    """Whether a router (or its class) counts among the heuristics an evaluation compares against:
    not learned, and runnable without the true speeds no real router knows."""
    return not policy.learned and not policy.needs_true_speed


def registered_policies() -> dict[str, type[Policy]]:
    """Every registered policy class by name (built-ins, then registered and entry-point ones)."""
    _load_builtins()
    _load_entry_points()
    return dict(_REGISTRY)


def policy_class(name: str, *, simulated: bool = True) -> type[Policy]:
    """The class registered under ``name``; ValueError naming the router and the names expected."""
    _load_builtins()
    if name not in _REGISTRY:
        _load_entry_points(again=True)
    if name in _BROKEN:
        raise ValueError(f"router {name!r}: {_BROKEN[name]}")
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown router {name!r}; expected one of: {', '.join(policy_names(simulated=simulated))}")
    return _REGISTRY[name]


def policy_names(*, simulated: bool = True) -> list[str]:
    """Router names :func:`make_policy` knows (``simulated=False``: those a live cluster can run)."""
    return [name for name, cls in registered_policies().items() if simulated or cls.live]


def parse_router_spec(spec: str) -> tuple[str, dict[str, float]]:
    """``"cache_aware:balance_abs_threshold=8:cache_threshold=0.5"`` -> the name and its parameters.

    Only policies with a :attr:`Policy.Params` dataclass take parameters; each key once, each value
    a number checked by the dataclass. Errors name the spec and the parameters the router has.
    """
    name, params = _split_spec(spec)
    if params:
        _build_params(policy_class(name), params, spec)
    return name, params


def _split_spec(spec: str) -> tuple[str, dict[str, float]]:
    """The name and the parameters written in ``spec``, each key known and each value a number; the
    values' ranges are the dataclass's to check (:func:`_build_params`, once)."""
    name, *pairs = [part.strip() for part in str(spec).split(":")]
    if not pairs:
        return name, {}
    cls = policy_class(name)
    if cls.Params is None:
        takes = [n for n, c in registered_policies().items() if c.Params is not None]
        raise ValueError(f"router {spec!r}: {name} takes no parameters; only {', '.join(takes)} do (name:key=value)")
    fields = [f.name for f in dataclasses.fields(cls.Params)]
    params: dict[str, float] = {}
    for pair in pairs:
        key, eq, value = (part.strip() for part in pair.partition("="))
        if not eq or key not in fields:
            raise ValueError(f"router {spec!r}: expected key=value with a key among {', '.join(fields)}, got {pair!r}")
        if key in params:
            raise ValueError(f"router {spec!r}: {key} is given twice; expected each parameter at most once")
        try:
            params[key] = float(value)
        except ValueError:
            raise ValueError(f"router {spec!r}: {key}: expected a number, got {value!r}") from None
    return name, params


def _build_params(cls: type[Policy], values: dict[str, Any], spec: str) -> Any:
    """``cls.Params(**values)``; its ValueError or TypeError names ``spec``."""
    try:
        return cls.Params(**values)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"router {spec!r}: {exc}") from None


def make_policy(name: str, checkpoint: Any = None, *, seed: int | None = None, simulated: bool = True,
                threads: int | None = None, **options: Any) -> Policy:
    """The policy registered as ``name``, reset with ``seed``.

    ``name`` may carry parameters (``cache_aware:balance_abs_threshold=8``), which keyword
    ``options`` naming fields of the policy's :attr:`Policy.Params` may also set; ``checkpoint`` is
    the file a policy that needs one loads; ``simulated=False`` refuses a policy that cannot run
    live (the ``oracle``: a live cluster has no true speeds); ``threads`` is the thread count a
    learned policy may use; other ``options`` go to the policy's :meth:`Policy.create`. Raises
    ValueError naming the router and what was expected.
    """
    spec = name
    if not isinstance(name, str):
        raise ValueError(f"unknown router {name!r}; expected one of: {', '.join(policy_names(simulated=simulated))}")
    name, params = _split_spec(name)
    cls = policy_class(name, simulated=simulated)
    if not simulated and not cls.live:
        reads = "the replicas' true speeds, which only the simulator knows" if cls.needs_true_speed else \
            "what only the simulator knows"
        raise ValueError(f"router {name!r} reads {reads}; expected one of: {', '.join(policy_names(simulated=False))}")
    fields = {f.name for f in dataclasses.fields(cls.Params)} if cls.Params is not None else set()
    params = {**params, **{k: options.pop(k) for k in list(options) if k in fields}}
    if cls.needs_checkpoint and not checkpoint:
        raise ValueError(f"router {name!r} needs a checkpoint (a policy trained by rewardkit train)")
    if (checkpoint is not None and not cls.needs_checkpoint) or (options and not cls.takes_options):
        given = (["checkpoint"] if checkpoint is not None and not cls.needs_checkpoint else []) + sorted(options)
        kind = "a heuristic" if not cls.learned else "a policy"
        raise ValueError(f"router {name!r} is {kind}: expected no checkpoint or options, got {', '.join(given)}")
    built_params = None if cls.Params is None else _build_params(cls, params, spec)
    kwargs: dict[str, Any] = dict(options)
    if cls.needs_checkpoint:
        kwargs["checkpoint"] = checkpoint
    policy = cls.create(params=built_params, threads=threads, **kwargs)
    if not isinstance(policy, Policy):
        raise TypeError(f"router {name!r}: {cls.__qualname__}.create returned {type(policy).__name__}, expected a Policy")
    policy.name = spec  # as written, with its parameters
    policy.reset(seed)
    return policy
