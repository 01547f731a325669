"""``rewardkit migrate``: convert another library's reward config (RLlama's) into a rewardkit config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..migrate_rllama import migrate_rllama_file
from .common import EXIT_ERROR, EXIT_OK


def add(sub: Any) -> None:
    """The ``migrate`` subcommand and its sources."""
    p = sub.add_parser("migrate", help="convert a reward config from another library",
                       description="Convert another library's reward config into a rewardkit config.")
    migrate = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    m = migrate.add_parser("rllama", help="an RLlama YAML (composer_settings / reward_components / reward_shaping)",
                           description="Convert an RLlama config; what cannot be converted is listed with its line.")
    m.add_argument("old", metavar="OLD.yaml", help="the RLlama config")
    m.add_argument("-o", "--out", default=None, metavar="NEW.yaml", help="file to write (default: print it)")
    m.set_defaults(func=cmd_migrate_rllama)


def cmd_migrate_rllama(args: argparse.Namespace) -> int:
    """Convert an RLlama config; print or write it, and list what was not converted on stderr."""
    migration = migrate_rllama_file(args.old)
    text = migration.to_yaml()
    if args.out is None:
        print(text, end="")
    else:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"error: -o {args.out}: cannot write the converted config: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_ERROR
        print(f"wrote {args.out} ({len(migration.config['components'])} components)")
    for line in migration.unconverted:
        print(f"not converted: {line}", file=sys.stderr)
    return EXIT_OK
