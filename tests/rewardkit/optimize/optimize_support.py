"""Shared by the multi-process optimizer tests: a study folder with an objective module, and
running ``rewardkit optimize`` in a subprocess as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from rewardkit.optimize.storage import open_storage, parse_storage

BASE_YAML = """\
version: 1
components:
  progress: {type: linear, inputs: {value: progress}, weight: 1.0}
  effort: {type: linear, inputs: {value: effort}, weight: -0.1}
"""
SPACE_YAML = """\
components.progress.weight: {type: float, low: 0.0, high: 2.0}
components.effort.weight: {type: float, low: -1.0, high: 0.0}
"""
# Logs every call (trial number, pid, params) durably before working; hangs on the trial named in
# hang_on_trial (after writing 'hanging'), so that a test can kill the process mid-trial.
OBJECTIVE_PY = """\
import json, os, time
from pathlib import Path

def objective(config, trial):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"trial": trial.number, "pid": os.getpid(), "params": trial.params}) + "\\n")
        f.flush()
        os.fsync(f.fileno())
    hang = Path("hang_on_trial")
    if hang.exists() and hang.read_text().strip() == str(trial.number):
        Path("hanging").write_text(str(os.getpid()))
        time.sleep(300)
    time.sleep(float(os.environ.get("TRIAL_SLEEP", "0")))
    c = config["components"]
    return (c["progress"]["weight"] - 1.3) ** 2 + (c["effort"]["weight"] + 0.25) ** 2
"""


def make_study_folder(folder: Path) -> Path:
    """Write base.yaml, space.yaml and objmod.py into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(BASE_YAML)
    (folder / "space.yaml").write_text(SPACE_YAML)
    (folder / "objmod.py").write_text(OBJECTIVE_PY)
    return folder


def optimize_command(storage: str, n_trials: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rewardkit", "optimize", "--study", "s", "--base", "base.yaml",
            "--search-space", "space.yaml", "--objective", "objmod:objective", "--storage", storage,
            "--n-trials", str(n_trials), "--seed", "0", "--validate", "0", *extra]


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3]) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_optimize(folder: Path, storage: str, n_trials: int, *extra: str, timeout: float = 240,
                 **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(optimize_command(storage, n_trials, *extra), cwd=folder, env=child_env(**env),
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def load_trials(folder: Path, storage: str) -> list[FrozenTrial]:
    cwd = os.getcwd()
    os.chdir(folder)  # a journal path is relative to the study folder
    try:
        study = optuna.load_study(study_name="s", storage=open_storage(parse_storage(storage, "s")))
        return study.get_trials(deepcopy=True)
    finally:
        os.chdir(cwd)


def calls(folder: Path) -> list[dict[str, Any]]:
    path = folder / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def kill_while_hanging(folder: Path, command: list[str], timeout: float = 120) -> None:
    """Run ``command`` (``rewardkit optimize``) in ``folder`` until its trial named in ``hang_on_trial`` hangs,
    then SIGKILL its whole process group: a worker killed mid-trial."""
    proc = subprocess.Popen(command, cwd=folder, env=child_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while not (folder / "hanging").exists():
            assert time.monotonic() < deadline, f"{folder / 'hanging'} never appeared"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
