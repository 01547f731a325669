"""examples/tune_mountaincar runs as a user would, at a tiny budget, and leaves a valid best reward."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rewardkit.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[3]


def test_tune_mountaincar_example_runs(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "tune_mountaincar" / "tune.py"), "--trials", "2",
                             "--steps", "256", "--eval-steps", "100", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "2 finished trials (2 complete, 0 pruned, 0 failed)" in result.stdout
    assert "energy.weight" in result.stdout and "control.weight" in result.stdout
    best = tmp_path / "best_reward.yaml"
    assert cli_main(["validate", str(best)]) == 0
    assert (tmp_path / "mountaincar" / "plots" / "history.png").stat().st_size > 1000
    assert (tmp_path / "mountaincar" / "trials" / "00000" / "metrics.json").exists()
