"""Every optional extra, audited as a user meets it: each module and command reachable after
``pip install ".[x]"`` either works or says exactly what to install (one line, no traceback).

An install without a package is imitated by hiding it from the import system (Python's path finder
returns nothing for it, as when it is not installed), in a fresh interpreter per case.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HIDE = """
import importlib.machinery, sys
HIDDEN = set({hidden!r})

class NotInstalled(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)

sys.meta_path[:] = [NotInstalled if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""

#: the optional top-level modules ``pip install ".[x]"`` brings (pyproject.toml's extras and what they require).
EXTRAS = {
    "gym": {"gymnasium"},
    "plot": {"matplotlib"},
    "torch": {"torch"},
    "optuna": {"optuna", "scipy", "tqdm"},
    "dashboard": {"optuna_dashboard", "optuna", "tqdm"},
    "testing": {"hypothesis"},
    "sb3": {"gymnasium", "stable_baselines3", "torch"},
    "trl": {"trl", "transformers", "datasets", "huggingface_hub", "pandas", "tqdm", "torch"},
    "router": {"gymnasium", "torch", "matplotlib", "pandas", "sklearn", "scipy", "wandb", "ddsketch", "plotly_express",
               "fasteners", "huggingface_hub", "tqdm"},
    "serve": {"httpx", "tqdm"},
    "remote": {"httpx"},
    "math": {"math_verify", "latex2sympy2_extended"},
}
OPTIONAL = set().union(*EXTRAS.values()) | {"vidur"}


def run(code: str, hidden: set[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=sorted(hidden)) + code], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def command(argv: list[str]) -> str:
    return f"from rewardkit.cli import main\nraise SystemExit(main({argv!r}))\n"


@pytest.mark.parametrize(("module", "extra"), [
    ("rewardkit.gym", "gym"),
    ("rewardkit.integrations.sb3", "sb3"),
    ("rewardkit.testing", "testing"),
    ("rewardkit.optimize", "optuna"),
])
def test_a_module_without_its_extra_names_the_install(module, extra):
    """``import rewardkit.testing`` without Hypothesis was a bare ModuleNotFoundError naming no extra."""
    done = run(f"import {module}", OPTIONAL)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and f"pip install 'rewardkit[{extra}]'" in last, last


@pytest.mark.parametrize(("module", "extra"), [
    ("rewardkit.gym", "gym"),
    ("rewardkit.integrations.sb3", "sb3"),
    ("rewardkit.testing", "testing"),
    ("rewardkit.optimize", "optuna"),
])
def test_a_module_with_its_extra_alone_imports(module, extra):
    done = run(f"import {module}", OPTIONAL - EXTRAS[extra])
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_base_install_imports_rewardkit_and_its_trl_adapter_without_extras():
    """``import rewardkit`` and the TRL adapter module (which imports TRL's stack only when used) need no extra."""
    done = run("import rewardkit, rewardkit.integrations.trl, rewardkit.breakdown_logger, rewardkit.migrate_rllama",
               OPTIONAL)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("argv", [
    ["validate", "configs/rewards/request_ttft.yaml"],
    ["components"],
    ["docs"],
    ["--help"],
])
def test_base_commands_run_without_any_extra(argv):
    done = run(command(argv), OPTIONAL)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(("argv", "installed", "install"), [
    (["check", "configs/rewards/request_ttft.yaml"], set(), "pip install 'rewardkit[testing]'"),
    (["optimize", "--study", "s", "--base", "configs/rewards/request_ttft.yaml", "--search-space", "x.yaml",
      "--objective", "vidur"], set(), "pip install 'rewardkit[optuna]'"),
    (["loadgen", "--env", "configs/envs/tiny.yaml", "--url", "http://127.0.0.1:9"], set(),
     "pip install 'rewardkit[serve]'"),
    (["train", "--config", "configs/ppo_demo.yaml"], {"vidur"}, "pip install 'rewardkit[router]'"),
    (["evaluate", "--n-seeds", "1"], set(), "pip install 'rewardkit[router]' && pip install --no-deps vidur==0.0.26"),
    # the router extra without Vidur (installed separately, --no-deps)
    (["evaluate", "--n-seeds", "1"], EXTRAS["router"], "pip install --no-deps vidur==0.0.26"),
])
def test_a_command_without_what_it_needs_says_what_to_install(argv, installed, install, tmp_path):
    """One located line naming the install, a non-zero exit, no traceback (``loadgen`` without httpx was one)."""
    done = run(command(argv + (["--out", str(tmp_path / "out")] if argv[0] in ("train", "evaluate") else [])),
               OPTIONAL - installed)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert install in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]


def test_loadgen_replays_an_env_file_with_the_serve_extra_alone():
    """The workload is the ground floor's (no Vidur, pandas or torch): with only the serve extra the
    load generator gets as far as the endpoint, and says that is what failed."""
    done = run(command(["loadgen", "--env", "configs/envs/tiny.yaml", "--url", "http://127.0.0.1:9"]),
               OPTIONAL - EXTRAS["serve"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "--url http://127.0.0.1:9: could not list models" in done.stderr.strip().splitlines()[-1]


REMOTE_CONFIG = """
from rewardkit import RewardComposer
RewardComposer.from_dict({"version": 1, "components": {"rm": {"type": "remote_score",
                          "params": {"url": "http://127.0.0.1:9/score"}}}}, source="rm.yaml")
"""


def test_a_remote_term_without_httpx_is_a_located_error_naming_the_extra():
    """``import rewardkit`` needs no httpx; a config with a remote term says what to install, where."""
    done = run(REMOTE_CONFIG, OPTIONAL)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rewardkit.errors.ConfigError: rm.yaml: components.rm: the remote_score component "
                           "needs httpx: pip install 'rewardkit[remote]'"), last
    assert run(REMOTE_CONFIG, OPTIONAL - EXTRAS["remote"]).returncode == 0


MATH_CONFIG = """
from rewardkit import RewardComposer
RewardComposer.from_dict({"version": 1, "components": {"accuracy": {"type": "answer_match",
                          "params": {"mode": "math"}}}}, source="acc.yaml")
"""


def test_math_mode_without_math_verify_is_a_located_error_naming_the_extra():
    done = run(MATH_CONFIG, OPTIONAL)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and "acc.yaml: components.accuracy.params.mode:" in last, done.stderr[-2000:]
    assert "pip install 'rewardkit[math]'" in last, last
    assert run(MATH_CONFIG, OPTIONAL - EXTRAS["math"]).returncode == 0
