"""The code passes ``ruff check`` with the settings in pyproject.toml (lint plus a complexity cap)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
#: Paths (relative to the repository root) that must pass ``ruff check``. schedulers/,
#: tests/schedulers/ and the scheduler benchmarks join once they are linted; the goal is the whole
#: repository: rewardkit, schedulers, tests, benchmarks and examples.
#: the whole repository's code: the library, the router, their tests, benchmarks and examples.
LINTED_PATHS = ("rewardkit", "schedulers", "tests", "benchmarks", "examples")


def ruff_check(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``ruff check --no-cache ARGS`` with the ruff installed next to this Python (a dev dependency)."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_linted_paths_pass_ruff() -> None:
    result = ruff_check(*LINTED_PATHS)
    assert result.returncode == 0, f"ruff check failed:\n{result.stdout}{result.stderr}"


def test_configuration_caps_complexity_and_asks_for_strict_zip(tmp_path: Path) -> None:
    """The [tool.ruff] settings are the ones promised: a function over complexity 15 and a zip()
    without strict= are reported, not just style."""
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(16))
    (tmp_path / "sample.py").write_text(f"def branchy(x):\n{branches}\n    return list(zip(x, x))\n")
    result = ruff_check("--config", str(PYPROJECT), "--output-format", "concise", "sample.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "C901 `branchy` is too complex (17 > 15)" in result.stdout
    assert "B905" in result.stdout
