"""``rewardkit optimize``: tune a reward's weights and parameters with Optuna. The flags live here;
the study (:mod:`rewardkit.optimize.command`) is imported only when the command runs, so the
CLI needs no optuna."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .arg_types import int_range, seconds
from .common import EXIT_USAGE

#: optimize's flag ranges (the seconds: the OS timer's limit, about 115 days; repeats: the validation seed range)
MAX_SECONDS = 1e7
MAX_TRIALS = 10**9
MAX_WORKERS = 256
MAX_FINALISTS = 100
MAX_REPEATS = 100_000


def add(sub: Any) -> None:
    """The ``optimize`` subcommand's flags (docs/optimization.md)."""
    p = sub.add_parser("optimize", help="tune a reward's weights and parameters with Optuna (resumable)",
                       description="Run or continue an Optuna study over the keys of a search space; "
                                   "--n-trials is the study's total, so running again continues it.")
    p.add_argument("--study", required=True, metavar="NAME", help="study name")
    p.add_argument("--base", required=True, metavar="REWARD.yaml", help="base reward config")
    p.add_argument("--search-space", required=True, metavar="SPACE.yaml", help="key paths to tune and their ranges")
    p.add_argument("--objective", required=True, metavar="vidur|MODULE:FUNCTION",
                   help="a registered objective (group rewardkit.objectives) or MODULE:FUNCTION importable "
                        "from the working directory")
    p.add_argument("--storage", default=None, metavar="URL|PATH",
                   help="RDB URL with a scheme (sqlite:///s.db, postgresql://...) or a journal file "
                        "(default: <study>.journal here)")
    p.add_argument("--n-trials", type=int_range(0, MAX_TRIALS), default=None, metavar="N",
                   help="the study's total of finished trials (complete, pruned or failed)")
    p.add_argument("--timeout", type=seconds(MAX_SECONDS), default=None, metavar="S",
                   help="stop starting trials after S seconds")
    p.add_argument("--workers", type=int_range(1, MAX_WORKERS), default=1, metavar="W",
                   help="worker processes on this machine")
    p.add_argument("--sampler", choices=("tpe", "gp", "random", "nsga2"), default=None,
                   help="default: the study's stored sampler, else tpe")
    p.add_argument("--pruner", choices=("none", "median", "halving", "hyperband", "wilcoxon"), default=None,
                   help="default: the study's stored pruner, else none")
    p.add_argument("--seed", type=int_range(0, 2**32 - 1), default=None, metavar="S",
                   help="sampler seed, an integer from 0 to 2**32 - 1 (stored with the study; trial n draws from (S, n), so "
                        "workers and later runs never replay a draw)")
    p.add_argument("--trial-timeout", type=seconds(MAX_SECONDS), default=None, metavar="SECONDS",
                   help="stop a trial (or a noise, validation or report run) after SECONDS and record it as failed")
    p.add_argument("--enqueue", nargs="+", default=None, metavar="CONFIG.yaml",
                   help="seed the study with known reward configs (each once)")
    p.add_argument("--validate", type=int_range(0, MAX_FINALISTS), default=3, metavar="K",
                   help="re-run the top K configs and the base on validation seeds, paired, and export the winner "
                        "only when it beats the base reliably (default 3; 0: off)")
    p.add_argument("--repeats", type=int_range(2, MAX_REPEATS, "repeats measure the noise"), default=3,
                   metavar="R", help="evaluations of the base (the noise) and of each finalist at the race's first "
                                     "look, each with its own seeds and training seed (default 3)")
    p.add_argument("--max-repeats", type=int_range(2, MAX_REPEATS), default=None, metavar="R",
                   help="the race's cap: finalists whose interval still straddles zero get more repeats, up to R "
                        "(default 4 x --repeats)")
    p.add_argument("--export-best", default=None, metavar="OUT.yaml",
                   help="write the validated winner's reward config (the base when none is reliably better)")
    p.add_argument("--report", action="store_true",
                   help="re-evaluate the best trials and the base config on fresh seeds")
    p.set_defaults(func=cmd_optimize)


def cmd_optimize(args: argparse.Namespace) -> int:
    """Run or continue a reward-tuning study (rewardkit.optimize, which imports optuna)."""
    try:
        from ..optimize.command import run_optimize
    except ImportError as exc:
        print(f"error: {exc}" if "pip install" in str(exc) else
              f"rewardkit optimize needs optuna (pip install 'rewardkit[optuna]'): {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_optimize(args)
