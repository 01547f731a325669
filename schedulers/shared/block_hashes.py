"""Prompt-block hashes that mean the same in every process: what a decision log records of a prompt.

A prompt of token ids is cut into full blocks of ``block_size`` tokens, as
:class:`~schedulers.routing.prefix_index.PrefixIndex` cuts it (a partial last block is not cached by
engines either), and block ``k`` is named by BLAKE2b (8 bytes, hex) over the name of block ``k-1``
and block ``k``'s ids as little-endian 64-bit integers: a name stands for the whole prefix up to its
block, so two prompts share their first ``m`` names exactly when they share their first ``m``
blocks. Python's ``hash()`` is salted per process and never written; the text is never written.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

#: hex digits of one block name (8 bytes of BLAKE2b)
NAME_BYTES = 8


def stable_block_hashes(prompt_ids: Sequence[int], block_size: int) -> list[str]:
    """Chained BLAKE2b names (hex) of the full ``block_size``-token blocks of ``prompt_ids``."""
    if block_size < 1:
        raise ValueError(f"block_size: expected a positive integer, got {block_size!r}")
    full = len(prompt_ids) // block_size * block_size
    if not full:
        return []
    try:  # one C conversion for the whole prompt (the request path's case)
        data = np.asarray(prompt_ids[:full], dtype="<i8").tobytes()
    except (OverflowError, TypeError, ValueError):  # ids beyond 64 bits: wrapped, as two's complement
        data = np.array([((int(t) + 2**63) % 2**64) - 2**63 for t in prompt_ids[:full]], dtype="<i8").tobytes()
    step = 8 * block_size
    out: list[str] = []
    prev = b""
    blake2b = hashlib.blake2b
    for start in range(0, len(data), step):
        prev = blake2b(prev + data[start:start + step], digest_size=NAME_BYTES).digest()
        out.append(prev.hex())
    return out
