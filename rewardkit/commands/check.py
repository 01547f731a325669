"""``rewardkit check``: prove or test the ``expect:`` section of reward configs (Hypothesis is
imported only when it runs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .arg_types import non_negative_int, positive_whole_number
from .common import EXIT_USAGE, add_import_option, import_modules


def add(sub: Any) -> None:
    """The ``check`` subcommand."""
    p = sub.add_parser("check", help="prove or test the expect: section of reward configs",
                       description="Verify each expectation of the configs' expect: sections: proved statically "
                                   "where possible, else tested on Hypothesis-sampled contexts and steps. "
                                   "Exit 1 if one is violated.")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML reward config(s) with an expect: section")
    add_import_option(p)
    p.add_argument("--examples", type=positive_whole_number, default=200, metavar="N",
                   help="Hypothesis examples per expectation that is not proved (default 200)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N",
                   help="random seed of the sampled examples: the same seed draws the same examples (default 0)")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Verify the ``expect:`` section of each config (see :mod:`rewardkit.testing.check_command`)."""
    import_modules(args.imports)
    try:
        from ..testing.check_command import run_check  # Hypothesis is needed only here
    except ImportError as exc:
        print(f"rewardkit check needs Hypothesis: pip install 'rewardkit[testing]' ({exc})", file=sys.stderr)
        return EXIT_USAGE
    return run_check(args)
