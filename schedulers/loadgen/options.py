"""The load generator's options checked before anything is sent: each bad value a one-line error
naming the option and its range, and an ``--out`` that cannot be written found before the run (not
after it, with every result lost)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ..bounds import (MAX_LENGTH_SCALE, MAX_PREFIX_GROUPS, MAX_PREFIX_SESSIONS, MAX_PREFIX_TOKENS,
                      MAX_PREFIX_TOTAL_TOKENS, MAX_SEED, MIN_LENGTH_SCALE)
from ..shared.requests import WorkloadError

#: requests one run sends, the token ids prompts are drawn below, and the longest model length
MAX_REQUESTS = 1_000_000
MAX_VOCAB_SIZE = 1 << 24
MAX_MODEL_LEN = 10_000_000
MAX_SECONDS = 7 * 86_400.0


def in_range(value: float | int | None, option: str, low: float, high: float, integer: bool = False) -> None:
    """A :class:`WorkloadError` naming ``option`` unless ``value`` (when given) is finite and in ``[low, high]``."""
    if value is None:
        return
    finite = isinstance(value, int) or math.isfinite(value)
    if not (finite and low <= value <= high):
        kind, shown = ("an integer", int) if integer else ("a number", float)
        raise WorkloadError(f"{option}: expected {kind} from {shown(low):g} to {shown(high):g}, got {value}"
                            if not integer else f"{option}: expected {kind} from {int(low)} to {int(high)}, got {value}")


def check_options(args: Any) -> None:
    """Every numeric option in range, ``--shared-prefix`` bounded, ``--out`` writable."""
    in_range(args.seed, "--seed", 0, MAX_SEED, integer=True)
    in_range(args.requests, "--requests", 1, MAX_REQUESTS, integer=True)
    in_range(args.qps, "--qps", 1e-6, 1e6)
    in_range(args.duration, "--duration", 1e-3, MAX_SECONDS)
    in_range(args.timeout, "--timeout", 1e-3, MAX_SECONDS)
    in_range(args.length_scale, "--length-scale", MIN_LENGTH_SCALE, MAX_LENGTH_SCALE)
    in_range(args.max_model_len, "--max-model-len", 2, MAX_MODEL_LEN, integer=True)
    in_range(args.vocab_size, "--vocab-size", 5, MAX_VOCAB_SIZE, integer=True)
    in_range(args.sessions, "--sessions", 0, MAX_PREFIX_SESSIONS, integer=True)
    if args.shared_prefix:
        check_shared_prefix(args.shared_prefix)
    if args.out:
        check_writable(args.out, "--out")


def check_shared_prefix(spec: str) -> None:
    """``GROUPS:TOKENS`` within the bounds (the system prompts are made and held before the run)."""
    try:
        groups, tokens = (int(x) for x in spec.split(":"))
    except ValueError:
        raise WorkloadError(f"--shared-prefix: expected GROUPS:TOKENS such as 4:128, got {spec!r}") from None
    in_range(groups, "--shared-prefix GROUPS", 1, MAX_PREFIX_GROUPS, integer=True)
    in_range(tokens, "--shared-prefix TOKENS", 1, MAX_PREFIX_TOKENS, integer=True)
    if groups * tokens > MAX_PREFIX_TOTAL_TOKENS:
        raise WorkloadError(f"--shared-prefix: expected at most {MAX_PREFIX_TOTAL_TOKENS} system-prompt tokens in all "
                            f"(GROUPS x TOKENS), got {groups} x {tokens} = {groups * tokens}")


def check_writable(path: str, option: str) -> None:
    """A located error unless ``path`` can be written as a file (its folder made if missing)."""
    target = Path(path)
    if target.is_dir():
        raise WorkloadError(f"{option} {path}: expected a file, got a folder")
    existed = target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise WorkloadError(f"{option} {path}: cannot write it ({exc.strerror or type(exc).__name__})") from None
    if not existed:
        os.remove(target)
