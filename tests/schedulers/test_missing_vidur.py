"""Without Vidur installed, importing the router names the command that installs it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys, importlib.abc
class HideVidur(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "vidur" or name.startswith("vidur."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, HideVidur())
import importlib.util
importlib.util.find_spec = (lambda orig: (lambda name, *a: None if name == "vidur" else orig(name, *a)))(importlib.util.find_spec)
try:
    import schedulers.sim.env
except ImportError as exc:
    print(exc)
"""


def test_importing_the_router_without_vidur_names_the_install_command() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert "needs the Vidur simulator" in out.stdout, out.stdout + out.stderr
    assert "pip install --no-deps vidur==0.0.26" in out.stdout


def test_train_command_without_vidur_prints_the_install_command(capsys) -> None:
    import argparse

    from schedulers.cli import EXIT_BAD_INPUT, reporting_missing_vidur

    def needs_vidur(args: argparse.Namespace) -> int:
        raise ImportError("the Vidur request router needs the Vidur simulator ...; install it with: X", name="vidur")

    def other(args: argparse.Namespace) -> int:
        raise ImportError("something else", name="numpy")

    assert reporting_missing_vidur(needs_vidur)(argparse.Namespace()) == EXIT_BAD_INPUT
    assert "install it with" in capsys.readouterr().err
    import pytest

    with pytest.raises(ImportError, match="something else"):
        reporting_missing_vidur(other)(argparse.Namespace())
