"""``rewardkit optimize``: run (or continue) a study from the command line.

Settings given on the command line must agree with those stored with the study; settings left
out are taken from the study (or the defaults for a new one). Without ``--n-trials`` and
``--timeout`` no trial runs: the command prints the table, writes the plots and does
``--export-best``/``--report`` for the study as it stands.

With ``--validate K`` (default 3) the base is first run ``--repeats`` times on validation seeds
(the noise, printed), and after the search the top K configs race the base on them, paired: those
whose interval straddles zero get more repeats (up to ``--max-repeats``), those clearly worse stop
(see ``validation``); ``--export-best`` writes the validated winner, or the base when no
candidate's interval excludes "no improvement". Both verdicts exit 0; errors exit non-zero (1 also when every trial
failed). The last line printed starts with ``verdict:``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import optuna

from ..errors import ConfigError
from .objectives import resolve_objective
from .optimizer import BayesianRewardOptimizer, counted_trials
from .report import run_report
from .results import best_table, plot_lines
from .storage import open_storage, parse_storage
from .samplers import StudySettings, read_settings
from .trial_context import MAX_SEEDS_PER_PHASE, report_seeds, validation_seeds
from .validation import compute_table, export, max_repeats_for, measure_noise, training_path, validate


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


def objective_attributes(objective: Any, name: str) -> tuple[tuple[str, ...], int]:
    """The objective's ``directions`` and ``n_seeds`` attributes, checked (located at ``name``)."""
    directions = getattr(objective, "directions", ("minimize",))
    if isinstance(directions, (str, bytes)) or not isinstance(directions, (list, tuple)) or not directions \
            or any(d not in ("minimize", "maximize") for d in directions):
        raise ConfigError("expected a non-empty list or tuple of 'minimize'/'maximize' (one per value the objective "
                          f"returns), got {directions!r}", path=f"{name}.directions")
    n_seeds = getattr(objective, "n_seeds", 1)
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or not 1 <= n_seeds <= MAX_SEEDS_PER_PHASE:
        raise ConfigError(f"expected an integer from 1 to {MAX_SEEDS_PER_PHASE} (evaluation seeds per trial), "
                          f"got {n_seeds!r}", path=f"{name}.n_seeds")
    return tuple(directions), n_seeds


def run_optimize(args: argparse.Namespace) -> int:
    """Run the ``optimize`` subcommand; returns the exit code. The last line printed starts with ``verdict:``."""
    if args.export_best and (Path(args.export_best).is_dir() or args.export_best.endswith(("/", os.sep))):
        raise ConfigError(f"expected a file path to write the reward config to, got the folder {args.export_best}",
                          path="--export-best")
    objective = resolve_objective(args.objective)
    stored = stored_settings(args.storage, args.study)
    default = stored or StudySettings()
    directions, n_seeds = objective_attributes(objective, args.objective)
    opt = BayesianRewardOptimizer(
        args.base, args.search_space, objective, study_name=args.study, storage=args.storage,
        sampler=args.sampler or default.sampler,
        pruner=args.pruner or (default.pruner if stored else "none"),
        directions=directions, seed=args.seed if args.seed is not None else default.seed, n_seeds=n_seeds,
        trial_timeout=getattr(args, "trial_timeout", None))
    validating = args.validate > 0 and len(opt.settings.directions) == 1
    max_repeats = getattr(args, "max_repeats", None)
    check_repeat_flags(args.repeats, max_repeats, opt.settings.n_seeds)
    for path in args.enqueue or []:
        params = opt.enqueue(path)
        print(f"enqueued {path}: {params}")
    print(f"study {args.study} in {opt.storage_spec.describe()}: sampler {opt.settings.sampler}, "
          f"pruner {opt.settings.pruner}, directions {', '.join(opt.settings.directions)}; "
          f"trial files in {opt.study_dir}")
    print(seeds_line(opt, args.repeats if validating else 0))
    if validating:
        print(measure_noise(opt, args.repeats, args.workers).describe(), flush=True)
    if args.n_trials is not None or args.timeout is not None:
        opt.optimize(n_trials=args.n_trials, timeout=args.timeout, n_workers=args.workers)
    else:
        print("no --n-trials or --timeout: no new trial runs")
    print(best_table(opt))
    for line in plot_lines(opt):
        print(line)
    if not opt.best_trials():
        ran = counted_trials(opt.study)
        print(f"verdict: no complete trial in study {args.study} ({len(ran)} finished, none complete: "
              f"see the errors in {opt.study_dir}/trials/*/metrics.json)")
        return 1 if ran else 0
    validation = None
    if validating:
        validation = validate(opt, args.validate, args.repeats, args.workers, max_repeats)
        print(validation.table())
        print(compute_table(opt, args.repeats, getattr(objective, "full_cost", None)))
    elif args.validate > 0:
        print(f"validation skipped: it compares candidates on one objective, this study has "
              f"{len(opt.settings.directions)}")
    exported = None
    if args.export_best:
        try:
            exported = export(opt, validation, args.export_best) if validation else opt.export_best(args.export_best)
        except ConfigError as exc:
            print(f"error: --export-best: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"error: --export-best: cannot write {args.export_best}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        side = training_path(exported)
        print(f"wrote {exported}" + (f" and {side} (its training settings)" if side.exists() else ""))
    if args.report:
        table, csv_path = run_report(opt, workers=args.workers)
        print(table)
        print(f"wrote {csv_path}")
    if validation is not None:
        print(validation.verdict(exported))
    else:
        best = opt.best_trials()[0]
        values = ", ".join(f"{v:.4g}" for v in best.values)
        print(f"verdict: not validated (--validate 0 or several objectives): the best search trial is trial "
              f"{best.number} ({values} on tuning seeds, an optimistic value)"
              + (f"; exported it to {exported}" if exported else ""))
    return 0


def check_repeat_flags(repeats: int, max_repeats: int | None, n_seeds: int) -> None:
    """``--repeats`` and ``--max-repeats`` within the validation seed range for ``n_seeds`` seeds per run."""
    top = max_repeats_for(n_seeds)
    for flag, value, low in (("--repeats", repeats, 2), ("--max-repeats", max_repeats, repeats)):
        if value is not None and not low <= value <= top:
            raise ConfigError(f"expected an integer from {low} to {top} (at most {MAX_SEEDS_PER_PHASE} validation "
                              f"seeds, {n_seeds} per run), got {value}", path=flag)


def seeds_line(opt: BayesianRewardOptimizer, repeats: int) -> str:
    """Which seeds each phase uses (the objective maps them onto its own)."""
    text = f"seeds: search {opt.seeds}"
    if repeats:
        val = [validation_seeds(opt.settings.n_seeds, r) for r in range(repeats)]
        text += f"; validation {val[0][0]}-{val[-1][-1]} ({repeats} repeats of {opt.settings.n_seeds})"
    return text + f"; --report {report_seeds(opt.settings.n_seeds)}"
