"""``rewardkit optimize``: run (or continue) a study from the command line.

Settings given on the command line must agree with those stored with the study; settings left
out are taken from the study (or the defaults for a new one). Without ``--n-trials`` and
``--timeout`` no trial runs: the command prints the table, writes the plots and does
``--export-best``/``--report`` for the study as it stands.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import optuna

from ..errors import ConfigError
from .objectives import resolve_objective
from .optimizer import BayesianRewardOptimizer
from .report import run_report
from .results import best_table, save_plots
from .storage import open_storage, parse_storage
from .strategies import StudySettings, read_settings


def stored_settings(storage: str | None, study_name: str) -> StudySettings | None:
    """The settings stored with an existing study, None when the study does not exist yet."""
    spec = parse_storage(storage, study_name)
    if spec.journal is not None and not spec.journal.exists():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            study = optuna.load_study(study_name=study_name, storage=open_storage(spec))
        except KeyError:  # no such study
            return None
    return read_settings(study)


def run_optimize(args: argparse.Namespace) -> int:
    """Run the ``optimize`` subcommand; returns the exit code."""
    objective = resolve_objective(args.objective)
    stored = stored_settings(args.storage, args.study)
    default = stored or StudySettings()
    directions = tuple(getattr(objective, "directions", ("minimize",)))
    n_seeds = int(getattr(objective, "n_seeds", 1))
    opt = BayesianRewardOptimizer(
        args.base, args.search_space, objective, study_name=args.study, storage=args.storage,
        sampler=args.sampler or default.sampler,
        pruner=args.pruner or (default.pruner if stored else "none"),
        directions=directions, seed=args.seed if args.seed is not None else default.seed, n_seeds=n_seeds)
    for path in args.enqueue or []:
        params = opt.enqueue(path)
        print(f"enqueued {path}: {params}")
    print(f"study {args.study} in {opt.storage_spec.describe()}: sampler {opt.settings.sampler}, "
          f"pruner {opt.settings.pruner}, directions {', '.join(opt.settings.directions)}; "
          f"trial files in {opt.study_dir}")
    if args.n_trials is not None or args.timeout is not None:
        opt.optimize(n_trials=args.n_trials, timeout=args.timeout, n_workers=args.workers)
    else:
        print("no --n-trials or --timeout: no new trial runs")
    print(best_table(opt))
    for path in save_plots(opt):
        print(f"wrote {path}")
    if args.export_best:
        try:
            print(f"wrote {opt.export_best(args.export_best)} (the best trial's reward config)")
        except ConfigError as exc:
            print(f"error: --export-best: {exc}", file=sys.stderr)
            return 1
    if args.report:
        table, csv_path = run_report(opt)
        print(table)
        print(f"wrote {csv_path}")
    return 0
