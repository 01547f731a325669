"""``rewardkit stress CONFIG --data ROWS``: find a reward config's loopholes before training.

Prints each loophole as a sentence a person can act on ("a wrong answer in the right format
earns 100% of the control: `29 + 23 = 53` (format +1.00, correct +1.00)") and each control the
reward does not pay in full, and warns of each row where a wrong reply out-earns the bare right
answer (an inversion); ``--json`` prints one object instead. Exit codes: 0 nothing found, 1 a
loophole, an unpaid control or (with ``stress.inversions: fail``) an inversion, 2 bad input
(config, rows, ``--import``, flags).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Callable

from ..commands.arg_types import exact_integer, seconds
from ..commands.common import add_import_option, import_modules
from ..composer import RewardComposer
from ..errors import RewardKitError
from ..stress_spec import MAX_BUDGET_S
from .rows import read_rows
from .runner import StressReport, stress

EXIT_CLEAN, EXIT_FOUND, EXIT_BAD_INPUT = 0, 1, 2


def add(sub: Any) -> None:
    """The ``stress`` subcommand."""
    p = sub.add_parser("stress", help="find a reward config's loopholes before training (exit 1 on one)",
                       description="Build probes from each row's control (its `completion` column): wrong answers in "
                                   "the right format, several answers, the bare answer, the prompt echoed, empty, "
                                   "truncated and padded replies, required words alone, judge phrases, look-alike "
                                   "characters, and an adaptive search of edits. Report each probe the oracle (the "
                                   "gold term, or the probe's construction) calls wrong that the reward pays at least "
                                   "as well as the control. Exit 0: none; 1: a loophole or an unpaid control; "
                                   "2: bad input.")
    p.add_argument("config", metavar="CONFIG", help="the reward config (YAML)")
    p.add_argument("--data", required=True, metavar="ROWS",
                   help="JSONL or CSV rows: the columns the config reads and `completion`, a reply that should be "
                        "paid well (the control)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--seed", type=exact_integer, default=0, metavar="N", help="random seed of the probes and the search")
    p.add_argument("--budget-s", type=seconds(MAX_BUDGET_S), default=None, metavar="S",
                   help="bound on the whole run in seconds (default: the config's stress.budget_s, else 20)")
    p.add_argument("--step", type=exact_integer, default=0, metavar="N", help="training step for weight schedules (default 0)")
    add_import_option(p)
    p.set_defaults(func=lambda args: run_stress(args, import_modules))


def run_stress(args: argparse.Namespace, import_modules: Callable[[list[str]], None] | None = None) -> int:
    """Stress ``args.config`` on ``args.data``; print the report; return 0, 1 or 2."""
    try:
        if import_modules is not None:
            import_modules(args.imports)
        composer = RewardComposer.from_yaml(args.config)
        text_keys = composer.text_keys
        required = set(composer.required_context_keys()) - {"completion"}
        rows = read_rows(args.data, composer.context_keys(), required, text_keys)
    except RewardKitError as exc:
        print(f"rewardkit stress: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    progress = None if args.json or not sys.stderr.isatty() else _progress
    try:
        report = stress(composer, rows, seed=args.seed, budget_s=args.budget_s, step=args.step, progress=progress)
    except RewardKitError as exc:  # a row the reward refuses (a column of the wrong kind, a non-finite value)
        print(f"rewardkit stress: error: {args.data}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        composer.close()
    if args.json:
        print(json.dumps({"config": args.config, "data": args.data, **report.to_dict()}, indent=1))
    else:
        print(format_report(report, args.config, args.data))
    return EXIT_CLEAN if report.clean else EXIT_FOUND


def _progress(message: str) -> None:
    print(f"\rrewardkit stress: {message}\033[K", end="", file=sys.stderr, flush=True)


def _terms(terms: dict[str, float]) -> str:
    shown = [f"{name} {value:+.2f}" for name, value in terms.items() if abs(value) > 1e-12]
    return ", ".join(shown) or "every term 0"


def _quote(text: str, limit: int = 100) -> str:
    flat = text.replace("\n", "\\n")
    if len(flat) > limit:
        flat = flat[:limit - 20] + f" ... ({len(text)} chars)"
    return f"`{flat}`"


def format_report(report: StressReport, config: str, data: str) -> str:
    """The report as text: a headline, one paragraph per loophole and unpaid control, the families."""
    n = len(report.loopholes)
    headline = (f"{config}: {n} loophole{'s' if n != 1 else ''}" if n else f"{config}: no loophole") + \
        (f", {len(report.unpaid_controls)} unpaid control{'s' if len(report.unpaid_controls) != 1 else ''}"
         if report.unpaid_controls else "") + \
        (f", {len(report.inversions)} inversion{'s' if len(report.inversions) != 1 else ''}"
         f"{' (warning)' if report.inversion_mode != 'fail' else ''}" if report.inversions else "") + \
        f" in {report.rows} row{'s' if report.rows != 1 else ''} of {data} ({report.evaluations} evaluations, " \
        f"{report.seconds:.1f} s" + (f", {report.requests} remote requests" if report.requests else "") + ")"
    lines = [headline]
    oracle = f"gold term {report.gold!r}" if report.gold else "the probes' construction"
    lines.append(f"  oracle: {oracle}; margin {report.margin:g}")
    from .families import summary
    for hole in report.loopholes:
        share = "" if math.isnan(hole.share) else f"{hole.share:.0%} of "
        verb = "is paid more than" if hole.paid_more or math.isnan(hole.share) and hole.total > hole.control_total \
            else "earns"
        lines.append(f"- {hole.family} (held on {hole.rows_held} of {report.rows} rows): {summary(hole.family)} "
                     f"{verb} {share}the control: {_quote(hole.completion)} total {hole.total:.3g} against "
                     f"{hole.control_total:.3g} for {_quote(hole.control, 60)} ({_terms(hole.terms)})")
    if report.unpaid_controls:
        worst = min(report.unpaid_controls, key=lambda u: u.total)
        n_unpaid = len(report.unpaid_controls)
        lines.append(f"- unpaid controls ({n_unpaid} of {report.rows} rows): controls the oracle accepts are paid below "
                     f"the reward's best ({worst.best:.3g}); the lowest: row {worst.row}, {_quote(worst.control, 60)} "
                     f"total {worst.total:.3g} ({_terms(worst.terms)}; short: {', '.join(worst.short) or 'the total'})")
    if report.inversions:
        worst = report.inversions[0]
        n_inv = len(report.inversions)
        what = "a finding (stress.inversions: fail)" if report.inversion_mode == "fail" else \
            "a warning; stress.inversions: fail makes it a finding"
        lines.append(f"- form over substance ({n_inv} of {report.rows} rows; {what}): a wrong reply that drops the "
                     f"answer is paid more than the bare right answer, so a policy that has the answer gains by "
                     f"trading it for the form: {_quote(worst.completion)} total {worst.total:.3g} against "
                     f"{_quote(worst.bare, 40)} {worst.bare_total:.3g} (control {worst.control_total:.3g}; "
                     f"{_terms(worst.terms)} against {_terms(worst.bare_terms)})")
    if report.watch:
        lines.append(f"  watch in training: monitor.watch: [{', '.join(report.watch)}] (the terms that pay these "
                     f"exploits; the audit with completions watches what they pay that gold rejects)")
    tried = ", ".join(f"{f.name} {f.held}/{f.tried}" for f in report.families)
    lines.append(f"  families (rows held / probes tried): {tried}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
