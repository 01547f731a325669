"""``rewardkit validate``: build each config and report OK or every error (file, key path, expected)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..composer import RewardComposer
from ..errors import ConfigError
from .common import EXIT_ERROR, EXIT_OK, add_import_option, import_modules


def add(sub: Any) -> None:
    """The ``validate`` subcommand."""
    p = sub.add_parser("validate", help="check reward configs; print OK or the error per file",
                       description="Build each config and report OK or every error (file, key path, expected).")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML reward config(s)")
    add_import_option(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    """Build each config; print ``<path>: OK`` or the ConfigError. Exit 1 if any failed."""
    import_modules(args.imports)
    failed = 0
    for path in args.configs:
        try:
            composer = RewardComposer.from_yaml(path)
        except ConfigError as exc:
            failed += 1
            print(str(exc) if exc.source else f"{path}: {exc}", file=sys.stderr)
            continue
        keys = ", ".join(sorted(composer.context_keys()))
        n = len(composer.term_names)
        print(f"{path}: OK ({n} term{'s' if n != 1 else ''}; context keys: {keys})")
    return EXIT_ERROR if failed else EXIT_OK
