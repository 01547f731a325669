"""``rewardkit check CONFIG``: verify the ``expect:`` section of reward configs.

Prints each expectation as ``proved`` (with the reason), ``tested`` (with the number of
examples) or ``violated`` (with the shrunk context and step). Exit code 1 if any expectation is
violated or a config is invalid, else 0.
"""

from __future__ import annotations

import argparse
import sys

from ..composer import RewardComposer
from ..errors import ConfigError
from .config_checks import check_config

EXIT_OK, EXIT_ERROR = 0, 1


def run_check(args: argparse.Namespace) -> int:
    """Check every config named in ``args.configs`` with ``args.examples`` examples per expectation."""
    print(f"examples drawn with seed {args.seed} (--seed N for others)")
    failed = 0
    for n, path in enumerate(args.configs):
        if n:
            print()
        try:
            composer = RewardComposer.from_yaml(path)
        except ConfigError as exc:
            failed += 1
            print(str(exc) if exc.source else f"{path}: {exc}", file=sys.stderr)
            continue
        expect = composer.spec.expect
        if expect is None or expect.is_empty():
            print(f"{path}: no expectations to check (add an expect: section; see docs/testing-rewards.md)")
            continue
        print(path)
        counts = {"proved": 0, "tested": 0, "violated": 0}
        for result in check_config(composer, examples=args.examples, seed=args.seed):
            counts[result.status] += 1
            if result.status == "tested":
                status = f"tested ({result.examples} examples)"
            else:
                status = result.status
            print(f"  {result.name}: {status}")
            print("    " + result.detail.replace("\n", "\n    "))
        print("  " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        failed += counts["violated"] > 0
    return EXIT_ERROR if failed else EXIT_OK
