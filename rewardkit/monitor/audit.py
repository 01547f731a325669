"""``rewardkit audit LOG --config CONFIG``: the monitor over a finished (or running) training's log.

Prints each alert with the step where it began and the step it fired, and the detectors that
could not run on this log and why; ``--json`` prints one JSON object instead. Exit codes: 0 no
alert, 1 an alert fired (with ``--fail-on hacking``: an alert of kind hacking),
2 bad input (missing or malformed log, invalid config, a term of the
config absent from the log, a failing ``--import``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from ..errors import RewardKitError
from .logs import check_terms, read_log
from .detectors import HACKING
from .monitor import Monitor

EXIT_CLEAN, EXIT_ALERT, EXIT_BAD_INPUT = 0, 1, 2


def add_audit_parser(sub: Any, add_import_option: Callable[[Any], None],
                     import_modules: Callable[[list[str]], None]) -> None:
    """The ``audit`` subcommand's parser; the CLI hands over its ``--import`` option and importer."""
    p = sub.add_parser("audit", help="look for reward hacking in a training log (exit 1 on an alert)",
                       description="Run the reward-hacking monitor over TRL's trainer_state.json (its log_history) "
                                   "or a rewardkit breakdown CSV, with the reward config's monitor: section. "
                                   "Exit 0: no alert; 1: an alert fired; 2: bad input.")
    p.add_argument("log", metavar="LOG", help="trainer_state.json (or a JSON with log_history), or a breakdown .csv")
    p.add_argument("--config", required=True, metavar="CONFIG", help="the reward config the run trained with")
    p.add_argument("--json", action="store_true", help="print one JSON object (alerts, steps, detectors not run)")
    p.add_argument("--fail-on", choices=("any", HACKING), default="any",
                   help="which alerts make the exit code 1: any (default) or only those of kind hacking "
                        "(health alerts, such as collapsed GRPO groups, are still printed)")
    add_import_option(p)
    p.set_defaults(func=lambda args: run_audit(args, import_modules))


def run_audit(args: argparse.Namespace, import_modules: Callable[[list[str]], None] | None = None) -> int:
    """Audit ``args.log`` with ``args.config``; print the alerts; return 0, 1 or 2."""
    try:
        if import_modules is not None:
            import_modules(args.imports)
        monitor = Monitor.from_config(args.config)
        records = read_log(args.log)
        check_terms(records, monitor.reward.terms, args.log, args.config)
    except RewardKitError as exc:
        print(f"rewardkit audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    alerts = monitor.run(records)
    skipped = monitor.not_applicable()
    steps = [int(r["step"]) for r in records]
    if args.json:
        print(json.dumps({"log": args.log, "config": args.config, "records": len(records),
                          "first_step": steps[0], "last_step": steps[-1],
                          "alerts": [a.to_dict() for a in alerts], "not_checked": skipped}, indent=1))
    else:
        span = f"{len(records)} logged steps ({steps[0]}-{steps[-1]})"
        if alerts:
            print(f"{args.log}: {len(alerts)} alert{'s' if len(alerts) > 1 else ''} in {span}")
            for alert in alerts:
                print(f"  {alert}")
        else:
            print(f"{args.log}: no alert in {span}")
        for name, reason in skipped.items():
            print(f"  not checked: {name} ({reason})")
    failing = [a for a in alerts if getattr(args, "fail_on", "any") == "any" or a.kind == HACKING]
    return EXIT_ALERT if failing else EXIT_CLEAN
