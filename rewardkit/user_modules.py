"""``--import MODULE``: import the user's modules (which register their components) before a
command builds a config that names them."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Sequence

from .errors import RewardKitError


class UserModuleError(RewardKitError):
    """A module named with ``--import`` could not be imported."""


def import_user_modules(names: Sequence[str]) -> None:
    """Import each module by dotted name, searching the current directory first (as ``python -m``
    does), so that ``@register`` runs; a failure names the module and the reason."""
    cwd = os.getcwd()
    if names and cwd not in sys.path:
        sys.path.insert(0, cwd)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
            raise UserModuleError(f"--import {name}: cannot import module {name!r}: "
                                  f"{type(exc).__name__}: {exc}") from None
