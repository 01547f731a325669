"""The one rule for relative paths in this project's configs (env, training, reward files).

A relative path written in a config file resolves against the project root (the folder holding
``configs/``), where the shipped configs name their files from; a path that exists only relative
to the file's own folder, or (from the command line or a dict) only relative to the working
directory, is taken from there. A path that exists nowhere resolves against the project root, so
the error message names the place it was expected.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The directory that holds ``schedulers/`` and ``configs/``."""
    return Path(__file__).resolve().parents[1]


def resolve_path(value: str | os.PathLike[str], source: str | os.PathLike[str] | None = None) -> Path:
    """Resolve ``value`` (``~`` expanded) by the rule of this module; ``source`` is the file naming it."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    in_project = (project_root() / path).resolve()
    if in_project.exists():
        return in_project
    if source is not None and not str(source).startswith("<"):
        beside = (Path(source).resolve().parent / path).resolve()
        if beside.exists():
            return beside
    if path.exists():
        return path.resolve()
    return in_project
