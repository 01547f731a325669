"""The component registry: configs name components by registered name, never by import path.

Built-in components register on import of :mod:`rewardkit.components`; third-party packages add
theirs through the entry-point group ``rewardkit.components`` (each entry point loads a
``BaseReward`` subclass, registered under the entry point's name).
"""

from __future__ import annotations

from importlib import metadata
from typing import Callable, TypeVar

from .base import BaseReward
from .errors import ConfigError

ENTRY_POINT_GROUP = "rewardkit.components"

_REGISTRY: dict[str, type[BaseReward]] = {}
_entry_points_loaded = False

R = TypeVar("R", bound=type[BaseReward])


def register(name: str, *, replace: bool = False) -> Callable[[R], R]:
    """Class decorator that registers a ``BaseReward`` subclass under ``name``.

    Registering a second class under a taken name raises unless ``replace=True``.
    """
    if not isinstance(name, str) or not name or name == "group":
        raise ValueError(f"component name must be a non-empty string other than 'group', got {name!r}")

    def decorator(cls: R) -> R:
        if not (isinstance(cls, type) and issubclass(cls, BaseReward)):
            raise TypeError(f"@register({name!r}) needs a BaseReward subclass, got {cls!r}")
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not cls and not replace:
            raise ValueError(f"component name {name!r} is already registered to {existing.__qualname__}")
        cls.type_name = name
        _REGISTRY[name] = cls
        return cls

    return decorator


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        cls = ep.load()
        register(ep.name)(cls)


def registered() -> list[str]:
    """Names of every registered component, sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def get_component_class(name: str) -> type[BaseReward]:
    """The class registered under ``name``; ``ConfigError`` listing the known names otherwise."""
    if name not in _REGISTRY:
        _load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"expected a registered component type, got {name!r}; registered: " + ", ".join(registered())
        ) from None
