"""The README's pip install path, run in a fresh virtual environment: it must give a working router.

Selected with ``pytest -m install`` (skipped by nothing: ``make test`` runs it). It copies the
project's packaging files to a temporary folder (so no build files land in the checkout), creates
a virtual environment without system site packages, runs the README's install commands with pip's
warm cache, then checks ``rewardkit validate``, the ``train``/``evaluate`` plugins and that every
module of ``schedulers`` but ``schedulers.tune`` (which needs the ``optuna`` extra) imports: the
router needs vidur, gymnasium, torch, pandas, matplotlib.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
COPIED = ["pyproject.toml", "README.md", "constraints.txt", "rewardkit", "schedulers", "configs"]
# Packages of the extras this install leaves out: a module may fail to import only for lack of one of them.
OTHER_EXTRAS = {"optuna": "optuna", "starlette": "serve", "uvicorn": "serve", "prometheus_client": "serve", "ray": "ray"}
IMPORT_EVERYTHING = (
    "import importlib, pkgutil, schedulers, vidur, gymnasium, torch\n"
    f"extras = {OTHER_EXTRAS!r}\n"
    "names = [m.name for m in pkgutil.walk_packages(schedulers.__path__, 'schedulers.')]\n"
    "gated = []\n"
    "for name in names:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except ModuleNotFoundError as exc:\n"
    "        if (exc.name or '').split('.')[0] not in extras:\n"
    "            raise\n"
    "        gated.append(name)\n"
    "print(len(names), 'modules; needing another extra:', ' '.join(sorted(gated)))\n"
)


def readme_commands() -> list[str]:
    """The shell lines between the README's install-commands markers."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- install-commands.*?-->\s*```bash\n(.*?)```\s*<!-- /install-commands -->", text, re.S)
    assert block, "README.md lost its install-commands block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.split("#", 1)[0].strip()]


def test_readme_lists_the_install_commands():
    commands = readme_commands()
    assert commands[0] == "pip install torch==2.13.0"  # torch first: any other spelling pulls CUDA wheels
    assert any("[router]" in c and "-c constraints.txt" in c for c in commands)
    assert "pip install --no-deps vidur==0.0.26" in commands


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{shlex.join(argv)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def fresh_venv(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the project's packaging files and an empty virtual environment: (checkout, venv, env)."""
    src = tmp_path / "checkout"
    src.mkdir()
    for name in COPIED:
        item = ROOT / name
        if item.is_dir():
            shutil.copytree(item, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(item, src / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_COMPILE"] = "1"  # skip byte-compiling torch's thousands of files: a third of the time
    return src, env_dir, env


def test_documented_pip_install_gives_a_working_router(tmp_path):
    src, env_dir, env = fresh_venv(tmp_path)
    python = env_dir / "bin" / "python"
    for line in readme_commands():
        argv = shlex.split(line)
        if argv[0] == "pip":
            run([str(python), "-m", "pip", "--quiet", *argv[1:]], src, env)
        else:  # the CLI checks the README shows, from the environment's own scripts
            run([str(env_dir / "bin" / argv[0]), *argv[1:]], src, env)
    # the environment is isolated: nothing comes from the checkout or the system site packages
    where = run([str(python), "-c", "import rewardkit, sys; print(rewardkit.__file__); print(sys.prefix)"],
                tmp_path, env).stdout.split()
    assert where[0].startswith(str(env_dir)) and where[1] == str(env_dir)
    out = run([str(env_dir / "bin" / "rewardkit"), "validate", str(src / "configs" / "rewards" / "vidur_hybrid.yaml")],
              tmp_path, env).stdout
    assert ": OK (" in out
    for command in ("train", "evaluate"):
        assert "usage: rewardkit" in run([str(env_dir / "bin" / "rewardkit"), command, "--help"], tmp_path, env).stdout
    imported = run([str(python), "-c", IMPORT_EVERYTHING], tmp_path, env).stdout
    gated = set(imported.split("another extra:", 1)[1].split())
    assert "schedulers.serve.gateway" in gated  # starlette is not part of the router extra
    assert all(name.startswith(("schedulers.tune", "schedulers.serve", "schedulers.engines", "schedulers.integrations.ray_serve"))
               for name in gated), gated
    # a command whose extra is missing says which extra to install, in one line
    gateway = subprocess.run([str(env_dir / "bin" / "rewardkit"), "gateway", "--backend", "http://127.0.0.1:9"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert gateway.returncode == 2 and "rewardkit[serve]" in gateway.stderr and "Traceback" not in gateway.stderr
    # compatible ranges, not pins: the installed versions satisfy pyproject.toml and constraints.txt
    # (vidur's own metadata lists packages it never imports; those are the only lines allowed)
    check = subprocess.run([str(python), "-m", "pip", "check"], cwd=tmp_path, env=env, capture_output=True, text=True)
    broken = [line for line in check.stdout.splitlines()
              if line.strip() and not re.fullmatch(r"vidur 0\.0\.26 requires [\w.-]+, which is not installed\.", line)]
    assert broken == [], check.stdout


def test_library_dependencies_are_ranges_not_pins():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    pinned = [r for r in requirements if "==" in r]
    assert pinned == [], f"exact pins belong in constraints.txt: {pinned}"
    assert all(">=" in r for r in requirements), requirements
    constraints = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = {line.split("==")[0].lower().replace("_", "-") for line in constraints if "==" in line}
    for r in requirements:
        name = re.split(r"[<>=!\[ ]", r, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pins, f"{name} has no exact version in constraints.txt"


OPTIMIZE_SPACE = "components.progress.weight: {type: float, low: 0.0, high: 2.0}\n"
OPTIMIZE_OBJECTIVE = """\
from rewardkit.optimize import trial_seeds
from rewardkit.optimize.trial_context import trial_repeat

def objective(config, trial):
    w = config["components"]["progress"]["weight"]
    return (w - 1.5) ** 2 + 0.001 * ((trial_repeat(trial) * 7 + trial_seeds(trial)[0]) % 5)
"""


def test_the_optuna_extra_alone_runs_a_study_to_the_end(tmp_path):
    """``pip install ".[optuna]"``: no matplotlib, no torch; optimize runs, validates, exports, says plots were skipped."""
    src, env_dir, env = fresh_venv(tmp_path)
    python = env_dir / "bin" / "python"
    run([str(python), "-m", "pip", "--quiet", "install", "-c", "constraints.txt", ".[optuna]"], src, env)
    work = tmp_path / "work"
    work.mkdir()
    (work / "base.yaml").write_text(
        "version: 1\ncomponents:\n  progress: {type: linear, inputs: {value: progress}, weight: 0.2}\n")
    (work / "space.yaml").write_text(OPTIMIZE_SPACE)
    (work / "objmod.py").write_text(OPTIMIZE_OBJECTIVE)
    env = {**env, "PYTHONPATH": str(work)}
    missing = subprocess.run([str(python), "-c", "import matplotlib"], cwd=work, env=env, capture_output=True)
    assert missing.returncode != 0  # the extra alone does not bring matplotlib
    out = run([str(env_dir / "bin" / "rewardkit"), "optimize", "--study", "s", "--base", "base.yaml",
               "--search-space", "space.yaml", "--objective", "objmod:objective", "--n-trials", "8", "--seed", "0",
               "--export-best", "best.yaml"], work, env).stdout
    lines = out.strip().splitlines()
    assert any(line.startswith("plots skipped: matplotlib is not installed") for line in lines), out
    assert lines[-1].startswith("verdict:"), out
    assert (work / "best.yaml").exists()
    assert ": OK (" in run([str(env_dir / "bin" / "rewardkit"), "validate", "best.yaml"], work, env).stdout
