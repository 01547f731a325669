"""Plots of a study whose objective values are near the largest float: drawn clipped, and said
so, never a matplotlib traceback (``rewardkit optimize`` and :func:`save_plots`)."""

from __future__ import annotations

import sys

import pytest

from optimize_support import make_study_folder

from rewardkit.cli import main as cli_main

pytest.importorskip("matplotlib", reason="pip install 'rewardkit[plot]' (matplotlib draws the plots)")

HUGE_MODULE = """\
def objective(config, trial):
    # alternately near the largest and the most negative float
    return (1.7e308 if trial.number % 2 else -1.7e308) * (1.0 - 1e-3 * (trial.number % 5))


def two(config, trial):
    return objective(config, trial), 1e308 * (trial.number % 3 - 1)


two.directions = ("minimize", "minimize")
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    make_study_folder(tmp_path)
    (tmp_path / "hugemod.py").write_text(HUGE_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hugemod", raising=False)
    from rewardkit.optimize.optimizer import BayesianRewardOptimizer
    monkeypatch.setattr(BayesianRewardOptimizer, "show_progress", False)
    return tmp_path


@pytest.mark.parametrize("objective, plots", [
    ("hugemod:objective", ["history.png", "importances.png"]),
    ("hugemod:two", ["history_1.png", "history_2.png", "pareto_front.png"]),
])
def test_values_near_the_largest_float_are_drawn_clipped_and_said_so(folder, capsys, objective, plots):
    code = cli_main(["optimize", "--study", "s", "--base", "base.yaml", "--search-space", "space.yaml",
                     "--objective", objective, "--validate", "0", "--n-trials", "6", "--seed", "0"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "Traceback" not in out + err
    lines = out.splitlines()
    for name in plots:
        assert (folder / "s" / "plots" / name).stat().st_size > 0
        assert f"wrote {'s/plots/' + name}" in lines, out
        assert any(line.startswith(f"s/plots/{name}: ") and "drawn at +-1e+300" in line for line in lines), out


def test_a_plot_matplotlib_cannot_draw_is_skipped_and_named(folder, monkeypatch):
    from optuna.visualization import matplotlib as ovm

    from rewardkit.optimize.results import plot_lines
    from test_optimizer import make

    opt = make(folder, seed=0)
    opt.optimize(n_trials=3)

    def broken(*args, **kwargs):
        raise ValueError("arange: cannot compute length")

    monkeypatch.setattr(ovm, "plot_optimization_history", broken)
    lines = plot_lines(opt)
    assert "plot history.png skipped: matplotlib could not draw it (ValueError: arange: cannot compute length)" in lines
    assert f"wrote {opt.study_dir / 'plots' / 'importances.png'}" in lines
