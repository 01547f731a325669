"""``rewardkit audit LOG --config CONFIG [--completions FILE] [--stress REPORT]``: the monitor over a training's log.

Prints each alert with the step where it began and the step it fired, what reading the log changed
(non-finite values read as missing, steps sorted), and the detectors that did not check this log
and why (they cannot run on it, or it is too short for them to fire); ``--json`` prints one JSON
object instead. With ``--completions FILE`` (the JSONL of every sampled completion,
:mod:`rewardkit.monitor.completions`) the content detectors run too, each alert shows the paid
completions that gold rejects at its steps, and a statistics alert of kind hacking whose steps show
none is demoted to health, with the reason. ``--stress REPORT`` (what ``rewardkit stress --json`` printed
for the config before training) adds the report's ``watch`` terms, the ones that pay its loopholes, to
``monitor.watch``: the audit then also watches how many completions gold rejects those terms pay
(``watched_spread``), which catches a hole learned while the reward falls.

Exit codes:

- **0** no alert (with ``--fail-on hacking``: no alert of kind hacking);
- **1** an alert fired (with ``--fail-on hacking``: one of kind hacking), and only then;
- **2** bad input: a missing or malformed log, completions file or stress report, a ``reward`` that is not a number,
  two records of one step, an invalid config, a term of the config absent from the log, a failing
  ``--import``;
- **3** an internal error of the audit (a bug: the traceback is printed) or output closed before the
  report was written, never mistaken for an alert.

``--import MODULE`` imports with the current directory on ``sys.path`` (as ``python -m`` does), so a
module beside the config can register its components.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any, Callable

from ..commands.common import add_import_option, import_modules
from ..errors import RewardKitError
from .completions import by_log_step, read_completions
from .detectors import HACKING
from .logs import check_terms, read_log_report
from .monitor import Alert, Monitor

EXIT_CLEAN, EXIT_ALERT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
#: completions shown per alert in the text output (``--json`` has all of an alert's evidence)
SHOWN = 2


def add(sub: Any) -> None:
    """The ``audit`` subcommand."""
    p = sub.add_parser("audit", help="look for reward hacking in a training log (exit 1 on an alert)",
                       description="Run the reward-hacking monitor over TRL's trainer_state.json (its log_history) "
                                   "or a rewardkit breakdown CSV, with the reward config's monitor: section. "
                                   "Exit 0: no alert; 1: an alert fired; 2: bad input; 3: internal error.")
    p.add_argument("log", metavar="LOG", help="trainer_state.json (or a JSON with log_history), or a breakdown .csv")
    p.add_argument("--config", required=True, metavar="CONFIG", help="the reward config the run trained with")
    p.add_argument("--completions", metavar="FILE", default=None,
                   help="the run's sampled completions (JSONL: step, prompt or question, completion, terms, total), "
                        "as MonitorCallback(completions=...) writes: content detectors, evidence, demotion")
    p.add_argument("--stress", metavar="REPORT", default=None,
                   help="what `rewardkit stress CONFIG --json` printed before training: its watch terms (those "
                        "that pay its loopholes) join monitor.watch (watched_spread; needs --completions)")
    p.add_argument("--json", action="store_true", help="print one JSON object (alerts, steps, detectors not run)")
    p.add_argument("--fail-on", choices=("any", HACKING), default="any",
                   help="which alerts make the exit code 1: any (default) or only those of kind hacking "
                        "(health alerts, such as collapsed GRPO groups, are still printed)")
    add_import_option(p)
    p.set_defaults(func=lambda args: run_audit(args, import_modules))


def run_audit(args: argparse.Namespace, import_modules: Callable[[list[str]], None] | None = None) -> int:
    """Audit ``args.log`` with ``args.config``; print the alerts; return 0, 1, 2 or 3 (module doc)."""
    try:
        return _audit(args, import_modules)
    except BrokenPipeError:  # the reader went away (`| head`): not an alert, not a bug
        try:
            print("rewardkit audit: output closed before the report was written (exit 3)", file=sys.stderr)
        except OSError:
            pass
        return EXIT_INTERNAL
    except Exception:  # noqa: BLE001 - a bug of the audit must not read as an alert (exit 1)
        print("rewardkit audit: internal error (exit 3; please report it):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return EXIT_INTERNAL


def _importable_cwd() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _audit(args: argparse.Namespace, import_modules: Callable[[list[str]], None] | None) -> int:
    completions_path = getattr(args, "completions", None)
    try:
        if import_modules is not None and args.imports:
            _importable_cwd()
            import_modules(args.imports)
        monitor = Monitor.from_config(args.config, stress=getattr(args, "stress", None))
        read = read_log_report(args.log)
        records = read.records
        check_terms(records, monitor.reward.terms, args.log, args.config)
        steps = [int(r["step"]) for r in records]
        rows = None
        notes = read.notes()
        if completions_path is not None:
            sampled = read_completions(completions_path, monitor.reward.terms)
            rows = by_log_step(sampled, steps)
            notes += sampled.notes()
    except RewardKitError as exc:
        print(f"rewardkit audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    alerts = monitor.run(records, rows)
    skipped = monitor.not_applicable()
    if args.json:
        print(json.dumps({"log": args.log, "config": args.config, "completions": completions_path,
                          "watch": list(monitor.reward.watch),
                          "records": len(records), "first_step": steps[0], "last_step": steps[-1],
                          "missing_values": dict(sorted(read.missing.items())), "sorted": read.reordered,
                          "notes": notes, "alerts": [a.to_dict() for a in alerts], "not_checked": skipped},
                         indent=1))
    else:
        span = f"{len(records)} logged steps ({steps[0]}-{steps[-1]})"
        if alerts:
            print(f"{args.log}: {len(alerts)} alert{'s' if len(alerts) > 1 else ''} in {span}")
            for alert in alerts:
                print(f"  {alert}")
                for line in _evidence_lines(alert):
                    print(f"      {line}")
        else:
            print(f"{args.log}: no alert in {span}")
        for note in notes:
            print(f"  note: {note}")
        for name, reason in skipped.items():
            print(f"  not checked: {name} ({reason})")
    failing = [a for a in alerts if getattr(args, "fail_on", "any") == "any" or a.kind == HACKING]
    return EXIT_ALERT if failing else EXIT_CLEAN


def _evidence_lines(alert: Alert) -> list[str]:
    lines = []
    for row in alert.completions[:SHOWN]:
        terms = ", ".join(f"{t} {'-' if v is None else f'{v:g}'}" for t, v in row["terms"].items())
        text = row["completion"] if len(row["completion"]) <= 80 else row["completion"][:77] + "..."
        lines.append(f"paid {row['total']:g} ({terms}) at step {row['step']}: {text!r}")
    if len(alert.completions) > SHOWN:
        lines.append(f"... {len(alert.completions) - SHOWN} more in --json")
    return lines
