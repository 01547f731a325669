"""The ``rewardkit`` subcommands: each lives in one module with an ``add(subparsers)`` function that
adds its parser and sets ``func=callable(args) -> int`` (the shape plug-ins of the entry-point group
``rewardkit.commands`` have too). :data:`CORE_COMMANDS` lists them; ``rewardkit.cli`` builds the
parser from that list and the plug-ins, so neither this docstring nor the CLI's repeats the names.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the core subcommands, in the order ``rewardkit --help`` lists them: name -> the module that adds it
CORE_COMMANDS: dict[str, str] = {
    "validate": "rewardkit.commands.validate",
    "explain": "rewardkit.commands.explain",
    "check": "rewardkit.commands.check",
    "components": "rewardkit.commands.components",
    "docs": "rewardkit.commands.docs",
    "migrate": "rewardkit.commands.migrate",
    "optimize": "rewardkit.commands.optimize",
    "audit": "rewardkit.monitor.audit",
    "stress": "rewardkit.stress.command",
    "serve-reward": "rewardkit.serve_reward.command",
}


def add_core_commands(subparsers: Any) -> None:
    """Add every core subcommand's parser (each module's ``add``)."""
    for module in CORE_COMMANDS.values():
        importlib.import_module(module).add(subparsers)
