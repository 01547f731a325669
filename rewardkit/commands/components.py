"""``rewardkit components``: list the registered components with their params and inputs."""

from __future__ import annotations

import argparse
from typing import Any

from ..docgen import components_text
from .common import EXIT_OK


def add(sub: Any) -> None:
    """The ``components`` subcommand."""
    p = sub.add_parser("components", help="list registered components with params and inputs")
    p.set_defaults(func=cmd_components)


def cmd_components(args: argparse.Namespace) -> int:
    """Print every registered component with its summary, params and inputs."""
    print(components_text(), end="")
    return EXIT_OK
