"""What people look at after a study: a table of the best trials and PNG plots.

Plots (matplotlib, written to ``<study folder>/plots/``): the optimization history, parameter
importances (once two trials are complete) and, for two objectives, the Pareto front. Objective
values beyond +-1e300 (near the largest float, where matplotlib cannot lay out an axis) are drawn
at +-1e300, and a plot matplotlib still cannot draw is skipped; both are said on the plot and in
the notes :func:`save_plots` hands back.
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

from optuna.trial import FrozenTrial, TrialState

from .optimizer import FINISHED, BayesianRewardOptimizer, counted_trials


def short_name(path: str) -> str:
    """``components.absolute.components.latency.weight`` -> ``absolute.latency.weight``."""
    return ".".join(k for k in path.split(".") if k != "components")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned others, a rule under the header."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        cells = [str(r[0]).ljust(widths[0])] + [str(c).rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), "-" * len(line(header)), *(line(r) for r in rows)])


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "null" if value is None else str(value)


def best_table(opt: BayesianRewardOptimizer, k: int = 5) -> str:
    """The best ``k`` trials (or the Pareto front) with their values and parameters, and counts."""
    study = opt.study
    finished = counted_trials(study, FINISHED)
    states = [t.state for t in finished]
    summary = (f"study {opt.study_name}: {len(finished)} finished trials "
               f"({states.count(TrialState.COMPLETE)} complete, {states.count(TrialState.PRUNED)} pruned, "
               f"{states.count(TrialState.FAIL)} failed)")
    best = opt.best_trials()[:k]
    if not best:
        return summary + "\nno complete trial yet"
    n_obj = len(opt.settings.directions)
    value_names = ["value"] if n_obj == 1 else [f"value{i + 1}" for i in range(n_obj)]
    names = [p for p in opt.space.param_names if any(p in t.params for t in best)]
    header = ["trial", *value_names, *(short_name(p) for p in names)]
    rows = [[str(t.number), *(_fmt(v) for v in t.values), *(_fmt(t.params[p]) if p in t.params else "-" for p in names)]
            for t in best]
    title = "best trials" if n_obj == 1 else "Pareto front"
    directions = ", ".join(opt.settings.directions)
    return f"{summary}\n{title} ({directions}):\n" + format_table(header, rows)


PLOTS_SKIPPED = ("plots skipped: matplotlib is not installed; pip install 'rewardkit[plot]' (or "
                 "'rewardkit[optuna,plot]') and run the same command without --n-trials to draw them")


def plotting_available() -> bool:
    """Whether matplotlib can be imported (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


#: Objective values beyond this magnitude are drawn at it: matplotlib cannot lay out an axis whose
#: span overflows (values near the largest float end in a ValueError while it places ticks).
DRAWABLE = 1e300


def _drawable(value: float) -> float:
    """``value`` clipped to [-DRAWABLE, DRAWABLE] (infinities too)."""
    return max(-DRAWABLE, min(DRAWABLE, value))


def save_plots(opt: BayesianRewardOptimizer, out_dir: Path | None = None,
               notes: list[str] | None = None) -> list[Path]:
    """Write the study's plots as PNG; return the files written (needs matplotlib: :func:`plotting_available`).

    What could not be drawn as it is (values beyond +-1e300 drawn clipped, a plot skipped) is said
    on the plot and appended to ``notes`` (one line each), for the caller to print."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    out_dir = out_dir or opt.study_dir / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    study = opt.study
    complete = counted_trials(study, (TrialState.COMPLETE,))
    written: list[Path] = []
    n_obj = len(opt.settings.directions)
    names = ["objective"] if n_obj == 1 else [f"objective {i + 1}" for i in range(n_obj)]
    # per objective: how many values lie beyond what can be drawn
    beyond = [sum(not abs(t.values[i]) <= DRAWABLE for t in complete) for i in range(n_obj)]

    def save(name: str, make: Callable[[], object], clipped: int = 0) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = make()
            fig = (ax.flat[0] if hasattr(ax, "flat") else ax).figure
            fig.set_size_inches(8, 5)
            if clipped:
                fig.text(0.01, 0.005, f"{clipped} value(s) beyond +-{DRAWABLE:g} drawn at +-{DRAWABLE:g}",
                         fontsize=8, color="firebrick")
            fig.tight_layout()
            path = out_dir / name
            fig.savefig(path, dpi=100)
        except (ValueError, OverflowError, FloatingPointError) as exc:  # matplotlib's layout of extreme values
            notes.append(f"plot {name} skipped: matplotlib could not draw it ({type(exc).__name__}: {exc})")
            return
        finally:
            plt.close("all")
        if clipped:
            notes.append(f"{path}: {clipped} trial value(s) beyond +-{DRAWABLE:g} (too large to draw) are drawn "
                         f"at +-{DRAWABLE:g}")
        written.append(path)

    def target(i: int) -> Callable[[FrozenTrial], float] | None:
        """The plotted value of objective ``i``: clipped when some value cannot be drawn (optuna
        then leaves out its best-value line), else optuna's own (``None`` with one objective)."""
        if beyond[i]:
            return lambda t: _drawable(t.values[i])
        return None if n_obj == 1 else (lambda t: t.values[i])

    if not complete:
        return written
    for i, label in enumerate(names):
        suffix = "" if n_obj == 1 else f"_{i + 1}"
        save(f"history{suffix}.png", partial(ovm.plot_optimization_history, study, target=target(i), target_name=label),
             beyond[i])
    if len(complete) >= 2 and _varied(complete):
        for i, label in enumerate(names):
            suffix = "" if n_obj == 1 else f"_{i + 1}"
            save(f"importances{suffix}.png",
                 partial(ovm.plot_param_importances, study, target=target(i), target_name=label), beyond[i])
    if n_obj == 2:
        targets = (lambda t: [_drawable(v) for v in t.values]) if any(beyond) else None
        save("pareto_front.png", lambda: ovm.plot_pareto_front(study, target_names=names, targets=targets), sum(beyond))
    return written


def plot_lines(opt: BayesianRewardOptimizer) -> list[str]:
    """Draw the plots and say what happened: a line per file written, then the notes (values
    clipped, plots skipped), or why nothing was drawn (matplotlib missing)."""
    if not plotting_available():
        return [PLOTS_SKIPPED]
    notes: list[str] = []
    return [f"wrote {path}" for path in save_plots(opt, notes=notes)] + notes


def _varied(trials: list[FrozenTrial]) -> bool:
    """True when some parameter takes two values across ``trials`` (importances need that)."""
    keys = {k for t in trials for k in t.params}
    return any(len({repr(t.params.get(k)) for t in trials}) > 1 for k in keys)

