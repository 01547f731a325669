"""Reading a checkpoint file safely: tensors and plain data only, bounded in size, located errors.

Used by training resume and by the PPO router; a truncated, corrupt or foreign file is a
:class:`CheckpointError` naming the file and what was expected, never a traceback from deep in
``torch.load``. Loading stays ``weights_only=True`` (no code in a checkpoint is ever run).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from rewardkit.config import require_path

from ..bounds import MAX_CHECKPOINT_BYTES


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, truncated, corrupt, too large or of the wrong kind."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``exc``'s message on one line, at most ``limit`` characters (torch's state-dict errors span lines)."""
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()).replace(":;", ":")
    return (text or type(exc).__name__)[:limit]


def read_checkpoint(path: str | os.PathLike[str], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The mapping stored in ``path`` (on the CPU), with every key of ``required`` present."""
    require_path(path, "read_checkpoint")
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such checkpoint") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({exc.strerror or exc})") from None
    if not path.is_file():
        raise CheckpointError(f"{path}: expected a checkpoint file, got a folder or a special file")
    if size > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{path}: expected a checkpoint of at most {MAX_CHECKPOINT_BYTES} bytes (the limit), "
                              f"got {size}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, KeyError,
            IndexError, TypeError, AttributeError, UnicodeDecodeError, MemoryError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: expected a checkpoint written by schedulers.train, got an unreadable file "
                              f"(truncated or corrupt: {reason})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a checkpoint mapping, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    if missing:
        raise CheckpointError(f"{path}: expected a checkpoint with {', '.join(required)}, missing {', '.join(missing)}")
    return data
