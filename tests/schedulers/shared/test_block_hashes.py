"""Stable prompt-block names: the same in every process, chained (a name stands for its whole prefix), never the text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from schedulers.routing.prefix_index import PrefixIndex
from schedulers.shared.block_hashes import stable_block_hashes


def test_names_are_the_same_in_another_process_with_another_hash_seed():
    prompt = list(range(3, 3 + 100))
    code = ("import sys; from schedulers.shared.block_hashes import stable_block_hashes as s; "
            "print(','.join(s(list(range(3, 103)), 32)))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parents[3]))
    assert other.stdout.strip().split(",") == stable_block_hashes(prompt, 32)


def test_full_blocks_only_as_the_prefix_index_cuts_them_and_chained():
    a = [5] * 64 + [7] * 40
    b = [5] * 64 + [8] * 40
    ha, hb = stable_block_hashes(a, 32), stable_block_hashes(b, 32)
    assert len(ha) == len(PrefixIndex(1, 32).block_hashes(a)) == 3
    assert ha[:2] == hb[:2] and ha[2] != hb[2]
    # the same block after a different prefix gets another name
    assert stable_block_hashes([1] * 32 + [9] * 32, 32)[1] != stable_block_hashes([2] * 32 + [9] * 32, 32)[1]
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in ha)
    assert stable_block_hashes([1, 2, 3], 32) == []


def test_big_and_negative_ids_are_named_and_a_bad_block_size_refused():
    assert len(stable_block_hashes([2**70, -1, 0, 5], 2)) == 2
    with pytest.raises(ValueError, match="block_size"):
        stable_block_hashes([1, 2], 0)
