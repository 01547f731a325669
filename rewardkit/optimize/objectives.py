"""Finding the objective named on the command line: a plugin name or ``MODULE:FUNCTION``.

``--objective vidur`` (any name without a colon) loads the entry point of that name in the group
``rewardkit.objectives``; the project's ``schedulers`` package registers ``vidur`` there, so
rewardkit never imports it. ``MODULE:FUNCTION`` imports ``MODULE`` from the working directory (or
the installed packages) and takes its ``FUNCTION``. Either way the result is a callable
``objective(config, trial) -> float | sequence``; it may carry ``directions`` (default
``("minimize",)``) and ``n_seeds`` (default 1) attributes that the command uses.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from importlib import metadata
from typing import Any, Callable

from ..errors import ConfigError

OBJECTIVE_GROUP = "rewardkit.objectives"


def objective_plugins() -> dict[str, metadata.EntryPoint]:
    """The registered objectives by name (first one of each name)."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=OBJECTIVE_GROUP):
        found.setdefault(ep.name, ep)
    return found


def resolve_objective(name: str) -> Callable[..., Any]:
    """The objective callable that ``name`` (a plugin name or ``MODULE:FUNCTION``) refers to."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"expected MODULE:FUNCTION, got {name!r}", path="--objective")
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(f"cannot import module {module_name!r} from {cwd}: {exc}", path="--objective") from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module failed while importing
            raise ConfigError(f"importing module {module_name!r} failed{_where(exc)}: {type(exc).__name__}: {exc}",
                              path="--objective") from None
        target: Any = module
        for part in attr.split("."):
            if not hasattr(target, part):
                raise ConfigError(f"module {module_name!r} has no attribute {attr!r}", path="--objective")
            target = getattr(target, part)
    else:
        plugins = objective_plugins()
        if name not in plugins:
            known = ", ".join(sorted(plugins)) or "none installed"
            raise ConfigError(f"unknown objective {name!r}; expected MODULE:FUNCTION or a registered objective "
                              f"({known})", path="--objective")
        try:
            target = plugins[name].load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - report any plugin import failure with its cause
            raise ConfigError(f"loading objective {name!r} ({plugins[name].value}) failed{_where(exc)}: "
                              f"{type(exc).__name__}: {exc}", path="--objective") from None
    if not callable(target):
        raise ConfigError(f"{name!r} is not callable as objective(config, trial)", path="--objective")
    return target


def _where(exc: BaseException) -> str:
    """`` at file.py:12`` for the user's line that raised (a SyntaxError's own line), else ''."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" at {exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename]
    return f" at {user[-1].filename}:{user[-1].lineno}" if user else ""
