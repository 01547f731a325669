"""The reward server's state file: what a restart must not lose.

The composer's ``state_dict()`` (step, normalizer statistics, stateful terms, the config's
fingerprint), the requests each remote term has spent against its ``max_requests`` budget (not
part of ``state_dict``), and the server's counters. Written as JSON through a temporary file and
an atomic rename, so a crash mid-write leaves the previous state whole; :func:`check_writable`
refuses at start a path where it could not be written.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ..composer import RewardComposer
from ..errors import ConfigError
from ..remote.term import RemoteTerm

FORMAT = 1


def _budgets(composer: RewardComposer) -> dict[str, Any]:
    """Each remote term's request budget (``RemoteTerm.budget``), by term name."""
    return {node.name: node.component.budget for node in composer.leaves() if isinstance(node.component, RemoteTerm)}


def snapshot(composer: RewardComposer, counters: dict[str, int]) -> dict[str, Any]:
    """The state to save, as plain JSON data."""
    return {"format": FORMAT, "composer": composer.state_dict(),
            "budgets_spent": {name: budget.spent for name, budget in _budgets(composer).items()},
            "counters": dict(counters)}


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def save(path: Path, composer: RewardComposer, counters: dict[str, int]) -> None:
    """Write the state to ``path`` atomically (a temporary file beside it, then a rename); a write
    that fails leaves the previous file and no temporary one."""
    data = json.dumps(snapshot(composer, counters), allow_nan=False)
    tmp = _temporary(path)
    try:
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def check_writable(path: Path) -> None:
    """``ValueError`` saying why the state could not be written at ``path``: its folder does not
    exist (it is not created: a mistyped path would start from a fresh state), ``path`` is a folder,
    or the folder takes no new file (its permissions, a read-only disk)."""
    folder = path.parent
    if path.is_dir():
        raise ValueError("it is a folder; expected the path of a file (which may not exist yet)")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"the folder {folder} {what}; expected a file path in an existing folder (create it first)")
    tmp = _temporary(path)
    try:
        tmp.write_bytes(b"")
        tmp.unlink()
    except OSError as exc:
        raise ValueError(f"the folder {folder} takes no new file ({exc.strerror or exc}); the state could not be "
                         "written there") from None


def restore(path: Path, composer: RewardComposer) -> dict[str, int]:
    """Load ``path`` into ``composer`` (all or nothing) and return the saved counters.

    A ``ConfigError`` names the file and what is wrong (not JSON, another config's state)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: expected a reward server state file (JSON): {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("composer"), dict):
        raise ConfigError(f"{path}: expected a reward server state file (format {FORMAT}) with a 'composer' state")
    budgets = _budgets(composer)
    spent = data.get("budgets_spent", {})
    if not isinstance(spent, dict) or any(name not in budgets or isinstance(v, bool) or not isinstance(v, int) or v < 0
                                          for name, v in spent.items()):
        raise ConfigError(f"{path}: budgets_spent: expected a count of requests per remote term of this config "
                          f"({', '.join(sorted(budgets)) or 'none'}), got {spent!r}")
    try:
        composer.load_state_dict(data["composer"])
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    for name, value in spent.items():
        budgets[name].spent = value
    counters = data.get("counters", {})
    return {k: int(v) for k, v in counters.items() if isinstance(v, int)} if isinstance(counters, dict) else {}
