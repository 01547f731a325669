"""Routers: anything that picks a replica for the request awaiting routing in the env.

A :class:`Router` has ``act(obs, env) -> int`` and ``reset(seed)``; all routers run through the
same :class:`~schedulers.sim.env.VidurRoutingEnv` path, so they see the same arrivals for a seed.
:func:`make_router` builds one by name: every heuristic of
:data:`schedulers.routing.heuristics.HEURISTIC_NAMES` (including Vidur's ``round_robin``, ``random``,
``lor``), and ``ppo``, whose factory ``schedulers.rl.ppo_router`` registers with
:func:`register_router` (imported on first use).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from .heuristics import HEURISTIC_NAMES
from .prefix_baselines import parse_router_spec


@runtime_checkable
class Router(Protocol):
    """Picks a replica index for the request awaiting routing."""

    name: str

    def reset(self, seed: int | None = None) -> None:
        """Prepare for a new episode (``seed`` is the episode seed)."""

    def act(self, obs: np.ndarray, env: Any) -> int:
        """Replica index for the current observation; ``env`` may be ``None`` inside Vidur."""


class HeuristicRouter:
    """Routes like heuristic ``name`` by asking ``env.unwrapped.heuristic_action(name, params)``.

    ``name`` may carry parameters of the prefix baselines: ``cache_aware:balance_abs_threshold=8``
    (:func:`schedulers.routing.prefix_baselines.parse_router_spec`); ``spec`` keeps the whole string.
    """

    def __init__(self, name: str) -> None:
        self.spec = name
        name, self.params = parse_router_spec(name)
        if name not in HEURISTIC_NAMES:
            raise ValueError(f"unknown heuristic {name!r}; expected one of: {', '.join(HEURISTIC_NAMES)}")
        self.name = name

    def reset(self, seed: int | None = None) -> None:
        """Stateless: tie-breaking state lives in the env, seeded by the episode seed."""

    def act(self, obs: np.ndarray, env: Any) -> int:
        if env is None:
            raise ValueError(f"HeuristicRouter({self.name!r}) needs the env; inside Vidur use the registered scheduler")
        return int(env.unwrapped.heuristic_action(self.name, self.params or None))

    def __repr__(self) -> str:
        return f"HeuristicRouter({self.spec!r})"


RouterFactory = Callable[..., Router]
_FACTORIES: dict[str, RouterFactory] = {}
#: modules imported on first use of a name, which call :func:`register_router` for it.
_PROVIDERS = {"ppo": "schedulers.rl.ppo_router"}


def register_router(name: str, factory: RouterFactory, *, replace: bool = False) -> None:
    """Make ``make_router(name, **kw)`` call ``factory(**kw)``."""
    if name in HEURISTIC_NAMES:
        raise ValueError(f"{name!r} is a built-in heuristic router name")
    if name in _FACTORIES and not replace and _FACTORIES[name] is not factory:
        raise ValueError(f"a router factory is already registered under {name!r}")
    _FACTORIES[name] = factory


def router_names() -> list[str]:
    """Names :func:`make_router` knows (heuristics, registered and lazily provided routers)."""
    return list(HEURISTIC_NAMES) + sorted(set(_FACTORIES) | set(_PROVIDERS))


def make_router(name: str, **kwargs: Any) -> Router:
    """Router ``name``: a heuristic, or a registered factory called with ``kwargs``.

    ``make_router("ppo", checkpoint=path)`` imports ``schedulers.rl.ppo_router``, which must call
    ``register_router("ppo", factory)`` at import time.
    """
    if parse_router_spec(name)[0] in HEURISTIC_NAMES:
        if kwargs:
            raise TypeError(f"heuristic router {name!r} takes no options, got {sorted(kwargs)}")
        return HeuristicRouter(name)
    if name not in _FACTORIES and name in _PROVIDERS:
        try:
            importlib.import_module(_PROVIDERS[name])
        except ModuleNotFoundError as exc:
            if exc.name != _PROVIDERS[name]:
                raise
            raise ValueError(f"router {name!r} needs module {_PROVIDERS[name]}, which is not available") from None
    if name not in _FACTORIES:
        raise ValueError(f"unknown router {name!r}; expected one of: {', '.join(router_names())}")
    return _FACTORIES[name](**kwargs)
