"""Every file a code docstring names exists: docstrings drift as docs do, and a bare name
(``results.py``, ``simulation_config.py``) is invisible to the Markdown check beside this one.

Each module, class and function docstring of the project's Python files is read; a word that ends in
``.py``, ``.yaml``, ``.yml``, ``.md`` or ``.toml`` must name a file: with a folder, the path from
the repository root (or from the module's folder, or under ``../shared``); bare, a file of that name
somewhere in the repository. Placeholders (``x.yaml``, ``OUT.training.yaml``, ``<run>``) and paths
of other projects (a folder that is not one of ours) are not checked.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("rewardkit", "schedulers", "benchmarks", "examples")
TOP_LEVEL = ("rewardkit/", "schedulers/", "configs/", "examples/", "tests/", "docs/", "benchmarks/", ".ci/", "../shared/")
FILE_NAME = re.compile(r"(?<![\w./-])([\w./-]+\.(?:py|yaml|yml|md|toml))(?![\w/-])")
SKIPPED = {".git", "runs", "__pycache__", "node_modules", ".pytest_cache", ".ruff_cache"}
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|^(?:x|file|env|out|OUT|my_\w+|NEW|OLD|CONFIG|REWARD|SPACE)\.")


@functools.lru_cache(maxsize=1)
def repository_basenames() -> frozenset[str]:
    """Names of every file and folder of the repository (virtualenvs, git data and run outputs left out)."""
    names: set[str] = set()
    for _folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.startswith(".venv")]
        names.update(dirs)
        names.update(files)
    return frozenset(names)


def python_files() -> list[Path]:
    return sorted(p for top in SOURCES for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def named_files(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every file name in the docstrings of ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            for name in FILE_NAME.findall(doc or ""):
                name = re.sub(r"(\.py):[\w.]+$", r"\1", name.strip(".,;:()'\""))
                if not PLACEHOLDER.search(Path(name).name) and not PLACEHOLDER.search(name):
                    found.append((getattr(node, "lineno", 1), name))
    return found


def exists(name: str, module: Path, basenames: set[str] | frozenset[str]) -> bool:
    if "/" not in name:
        return name in basenames
    if not name.startswith(TOP_LEVEL) and not name.startswith("./"):
        return True  # another project's path (llm-d's guides, vLLM's sources)
    return any(p.exists() for p in (ROOT / name, module.parent / name, ROOT.parent / name.removeprefix("../")))


def test_the_checker_finds_a_drifted_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Reads ``results.py`` and configs/envs/tiny.yaml; writes x.yaml."""\n', encoding="utf-8")
    names = [name for _, name in named_files(module)]
    assert names == ["results.py", "configs/envs/tiny.yaml"]
    assert not exists("results.py", module, {"tiny.yaml"}) and exists("configs/envs/tiny.yaml", module, set())


@pytest.mark.parametrize("top", SOURCES)
def test_every_file_a_docstring_names_exists(top: str) -> None:
    basenames = repository_basenames()
    missing = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in python_files() if path.parts[len(ROOT.parts)] == top
               for line, name in named_files(path) if not exists(name, path, basenames)]
    assert not missing, "docstrings name files that do not exist:\n" + "\n".join(missing)
