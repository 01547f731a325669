"""The component registry: configs name components by registered name, never by import path.

Built-in components register on import of :mod:`rewardkit.components`; third-party packages add
theirs through the entry-point group ``rewardkit.components`` (each entry point loads a
``BaseReward`` subclass, registered under the entry point's name). A plugin that fails to load
is skipped with a warning naming its entry point, so one broken package cannot break the others.
"""

from __future__ import annotations

import difflib
import math
import warnings
from importlib import metadata
from typing import Any, Callable, TypeVar

from .base import BaseReward
from .errors import ConfigError
from .params import Param

ENTRY_POINT_GROUP = "rewardkit.components"
MONOTONE_DIRECTIONS = ("increasing", "decreasing")
#: attributes every component instance sets itself, which a parameter must not overwrite.
_INSTANCE_ATTRIBUTES = frozenset({"name", "config", "input_keys"})

_REGISTRY: dict[str, type[BaseReward]] = {}
_entry_points_loaded = False

R = TypeVar("R", bound=type[BaseReward])


class PluginWarning(UserWarning):
    """A third-party component entry point could not be loaded or registered (it is skipped)."""


def register(name: str, *, replace: bool = False) -> Callable[[R], R]:
    """Class decorator that registers a ``BaseReward`` subclass under ``name``.

    The class's declarations are checked here, not at first use: ``inputs`` (name -> number of
    axes), ``optional_inputs`` and ``monotone`` naming declared inputs, ``params`` of ``Param``
    whose defaults pass their own check, ``output_range`` and an implemented ``compute``
    (``compute_async`` for asynchronous ones). A taken
    name raises unless ``replace=True``; one class registers under one name only.
    """
    if not isinstance(name, str) or not name or name == "group":
        raise ValueError(f"component name must be a non-empty string other than 'group', got {name!r}")

    def decorator(cls: R) -> R:
        if not (isinstance(cls, type) and issubclass(cls, BaseReward)):
            raise TypeError(f"@register({name!r}) needs a BaseReward subclass, got {cls!r}")
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not cls and not replace:
            raise ValueError(f"component name {name!r} is already registered to {existing.__qualname__}")
        other_names = [n for n, c in _REGISTRY.items() if c is cls and n != name]
        if other_names:
            raise ValueError(f"{cls.__qualname__} is already registered as {other_names[0]!r}; register a subclass "
                             f"to offer it under {name!r} too")
        problems = declaration_problems(cls)
        if problems:
            raise TypeError(f"@register({name!r}): {cls.__qualname__} " + "; ".join(problems))
        cls.type_name = name
        _REGISTRY[name] = cls
        return cls

    return decorator


def declaration_problems(cls: type[BaseReward]) -> list[str]:
    """What is wrong with a component class's declarations (an empty list when nothing is)."""
    problems: list[str] = []
    inputs = cls.inputs
    if not isinstance(inputs, dict) or not all(
            isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in inputs.items()):
        problems.append(f"inputs must map input names to numbers of axes (0 for a float, 1 for a vector), "
                        f"got {inputs!r}")
        inputs = {}
    optional = cls.optional_inputs
    if not isinstance(optional, (set, frozenset)) or not set(optional) <= set(inputs):
        problems.append(f"optional_inputs must be a set of declared inputs ({', '.join(inputs) or 'none'}), "
                        f"got {optional!r}")
    problems += _monotone_problems(cls.monotone, inputs)
    problems += _params_problems(cls.params)
    if not _is_range(cls.output_range):
        problems.append(f"output_range must be (low, high) numbers with low <= high, got {cls.output_range!r}")
    if not isinstance(cls.stateful, bool):
        problems.append(f"stateful must be True or False, got {cls.stateful!r}")
    if cls.asynchronous:
        if cls.compute_async is BaseReward.compute_async:
            problems.append("sets asynchronous = True and must implement compute_async()")
    elif cls.compute is BaseReward.compute:
        problems.append("must implement compute()")
    return problems


def _monotone_problems(monotone: Any, inputs: dict[str, int]) -> list[str]:
    """What is wrong with a ``monotone`` declaration, given the class's declared inputs."""
    if not isinstance(monotone, dict):
        return [f"monotone must be a dict of input name to direction, got {monotone!r}"]
    problems: list[str] = []
    for key, direction in monotone.items():
        if key not in inputs:
            problems.append(f"monotone names {key!r}, which is not a declared input "
                            f"({', '.join(inputs) or 'none'})")
        if direction not in MONOTONE_DIRECTIONS:
            problems.append(f"monotone[{key!r}] must be 'increasing' or 'decreasing', got {direction!r}")
    return problems


def _params_problems(params: Any) -> list[str]:
    """What is wrong with a ``params`` declaration: names, ``Param`` values, defaults that pass their check."""
    if not isinstance(params, dict):
        return [f"params must be a dict of name to Param, got {params!r}"]
    problems: list[str] = []
    for pname, param in params.items():
        if (not isinstance(pname, str) or not pname.isidentifier() or hasattr(BaseReward, pname)
                or pname in _INSTANCE_ATTRIBUTES):
            problems.append(f"parameter name {pname!r} must be an identifier that is not a BaseReward attribute")
        if not isinstance(param, Param):
            problems.append(f"params[{pname!r}] must be a Param, got {param!r}")
        elif not param.required and param.default is not None:
            try:
                param.check(param.default)
            except ValueError as exc:
                problems.append(f"params[{pname!r}] default {param.default!r} fails its own check (expected {exc})")
    return problems


def _is_range(value: Any) -> bool:
    if not isinstance(value, tuple) or len(value) != 2:
        return False
    low, high = value
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) for v in value)
    return numbers and low <= high


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    loaded: dict[str, str] = {}  # name -> the entry point that registered it
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            known = _REGISTRY[ep.name]
            owner = loaded.get(ep.name, f"{known.__module__}.{known.__qualname__}")
            warnings.warn(f"rewardkit: skipped component plugin {ep.name!r} (entry point {ep.value!r} in group "
                          f"{ENTRY_POINT_GROUP!r}): the name is already registered by {owner}", PluginWarning,
                          stacklevel=3)
            continue
        try:
            register(ep.name)(ep.load())
            loaded[ep.name] = f"entry point {ep.value!r}"
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin (even one calling sys.exit) must not end rewardkit
            warnings.warn(f"rewardkit: skipped component plugin {ep.name!r} (entry point {ep.value!r} in group "
                          f"{ENTRY_POINT_GROUP!r}): {type(exc).__name__}: {exc}", PluginWarning, stacklevel=3)


def registered() -> list[str]:
    """Names of every registered component, sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def get_component_class(name: str) -> type[BaseReward]:
    """The class registered under ``name``; ``ConfigError`` suggesting the closest names otherwise."""
    if name not in _REGISTRY:
        _load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        names = registered()
        close = difflib.get_close_matches(str(name), names, n=3)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(f"expected a registered component type, got {name!r}{hint}; registered: "
                          + ", ".join(names)) from None
