"""Training checkpoints on disk: ``<out_dir>/checkpoints/update_NNNNNN.pt`` naming, atomic writes,
pruning to the newest few, and loading (tensors and plain data only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..rl.checkpoint_file import CheckpointError, one_line, read_checkpoint
from ..rl.scorer_network import ReplicaScorerPolicy

_CKPT_RE = re.compile(r"^update_(\d{6,})\.pt$")
#: what resuming reads from a training checkpoint (``Trainer.state``); a file without one is not resumed from.
TRAINING_KEYS = ("config", "policy_kwargs", "policy_state", "optimizer", "reference_state", "update", "global_step",
                 "bc_done", "wall_time", "episode_index", "episode_step", "torch_rng", "shuffle_rng", "scaler",
                 "controller")


def to_plain(obj: Any) -> Any:
    """Convert numpy scalars/arrays inside nested containers to Python data (safe torch.load)."""
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in the same folder, then ``os.replace`` it into place."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def checkpoint_name(update: int) -> str:
    """File name of the checkpoint written after ``update`` PPO updates."""
    return f"update_{update:06d}.pt"


def _numbered(folder: Path) -> list[tuple[int, Path]]:
    """The checkpoints in ``folder`` with their update numbers, oldest first."""
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _CKPT_RE.match(p.name)))


def save_checkpoint(state: dict[str, Any], out_dir: Path, update: int, keep: int) -> Path:
    """Write ``state`` as ``out_dir/checkpoints/update_NNNNNN.pt``; keep only the ``keep`` newest."""
    folder = out_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / checkpoint_name(update)
    atomic_save(state, path)
    for _, old in _numbered(folder)[:-keep]:
        old.unlink()
    return path


def remove_checkpoints(out_dir: str | os.PathLike) -> None:
    """Delete every numbered checkpoint in ``out_dir/checkpoints`` (a run that starts over)."""
    for _, path in _numbered(Path(out_dir) / "checkpoints"):
        path.unlink()


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The highest-numbered ``checkpoints/update_*.pt`` in ``out_dir``, if any."""
    folder = Path(out_dir) / "checkpoints"
    if not folder.is_dir():
        return None
    found = _numbered(folder)
    return found[-1][1] if found else None


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint written by the trainer (tensors and plain data only; a
    :class:`~schedulers.rl.checkpoint_file.CheckpointError` when unreadable)."""
    return read_checkpoint(path)


def latest_good_checkpoint(out_dir: str | os.PathLike,
                           log: Callable[[str], None] = print) -> tuple[Path, dict[str, Any]] | None:
    """The newest numbered checkpoint in ``out_dir`` that loads, and its contents; unreadable newer
    ones (a crash mid-write on a filesystem without atomic rename, a disk fault, a file of another
    kind, weights that do not fit their declared sizes) are skipped with a message naming them and
    the one resumed from. ``None`` when there is none."""
    folder = Path(out_dir) / "checkpoints"
    if not folder.is_dir():
        return None
    skipped: list[str] = []
    for _, path in reversed(_numbered(folder)):
        try:
            data = read_checkpoint(path, required=TRAINING_KEYS)
            _check_policy(path, data)
        except CheckpointError as exc:
            skipped.append(str(exc))
            continue
        for reason in skipped:
            log(f"[resume] skipped an unreadable checkpoint: {reason}; resuming from {path.name}")
        return path, data
    if skipped:
        raise CheckpointError(f"{folder}: no readable checkpoint to resume from ({len(skipped)} unreadable: "
                              f"{skipped[0]}); start over with --no-resume or another --out")
    return None


def _check_policy(path: Path, data: dict[str, Any]) -> None:
    """The checkpoint's policy rebuilds from its declared sizes (checked against the limits first)."""
    try:
        ReplicaScorerPolicy.from_checkpoint_dict(data)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: {one_line(exc)}") from None
