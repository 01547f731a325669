"""What every ``rewardkit`` subcommand shares: the exit codes and ``--import``, which makes a user's
own components importable before the config is read."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from ..errors import RewardKitError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class ImportFailed(RewardKitError):
    """A module named by ``--import`` could not be imported."""


def import_modules(names: Sequence[str] | None) -> None:
    """Import the user's modules named by ``--import`` so their ``@register`` components exist.

    The working directory is importable first, as with ``python -m`` (the ``rewardkit`` script
    alone would not find a module beside the user's config)."""
    if names and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names or ():
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
            raise ImportFailed(f"--import {name}: importing it failed: {type(exc).__name__}: {exc}") from None


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): modules that register the user's components."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (its @register components become usable); repeatable")
