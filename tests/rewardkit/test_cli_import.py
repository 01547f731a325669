"""`--import MODULE` on validate, explain and docs loads the user's registered components."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).with_name("fixtures")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewardkit", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={"PYTHONPATH": str(FIXTURES), "PATH": "/usr/bin:/bin"})


def test_import_makes_user_components_usable(tmp_path):
    config = tmp_path / "r.yaml"
    config.write_text("version: 1\ncomponents:\n  two: {type: always_two, weight: 0.5}\n")
    (tmp_path / "ctx.json").write_text(json.dumps({"value": 1.0}))
    without = run("validate", str(config), cwd=tmp_path)
    assert without.returncode == 1 and "'always_two'" in without.stderr
    ok = run("validate", str(config), "--import", "user_components", cwd=tmp_path)
    assert ok.returncode == 0 and "OK (1 term" in ok.stdout
    explained = run("explain", str(config), "--context", "ctx.json", "--import", "user_components", cwd=tmp_path)
    assert explained.returncode == 0 and "total" in explained.stdout and "1" in explained.stdout.splitlines()[-1]
    docs = run("docs", "--import", "user_components", cwd=tmp_path)
    assert docs.returncode == 0 and "always_two" in docs.stdout


def test_a_module_that_fails_to_import_is_reported(tmp_path):
    bad = run("validate", "x.yaml", "--import", "no_such_module_here", cwd=tmp_path)
    assert bad.returncode == 1
    assert "--import no_such_module_here: importing it failed: ModuleNotFoundError" in bad.stderr
