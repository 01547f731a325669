"""Array libraries in a context: one library per context, a mixed one is a located error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.backend import check_one_library, library_of
from rewardkit.errors import InvalidInputError

HYBRID = Path(__file__).resolve().parents[2] / "configs" / "rewards" / "vidur_hybrid.yaml"


def test_python_values_and_numpy_scalars_belong_to_no_library() -> None:
    for value in (1.0, 3, True, [1.0, 2.0], (1.0,), np.float32(1.0), None):
        assert library_of(value) is None
    assert library_of(np.ones(2)) == "numpy"
    assert check_one_library({"a": 1.0, "b": np.ones(3)}, ["a", "b"]) == "numpy"
    assert check_one_library({"a": 1.0}, ["a", "missing"]) is None


def test_importing_rewardkit_imports_no_torch_or_jax() -> None:
    code = "import sys, rewardkit, rewardkit.backend; print(any(m in sys.modules for m in ('torch', 'jax')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("order", ["numpy first", "torch first"])
def test_a_mixed_library_context_names_a_key_of_each_library(order: str) -> None:
    composer = RewardComposer.from_yaml(HYBRID)
    before = composer.state_dict()
    a, b = (np.full(4, 0.1), torch.full((4,), 7.0)) if order == "numpy first" else (torch.full((4,), 0.1), np.full(4, 7.0))
    with pytest.raises(InvalidInputError, match=r"mixes array libraries: key 'throughput' is a \w+ array but key "
                                                r"'latency' is a \w+ array"):
        composer({"throughput": a, "latency": b, "replica_loads": np.ones((4, 3))})
    assert composer.state_dict() == before


def test_a_torch_context_computes_in_torch_and_says_so_in_its_output_types() -> None:
    composer = RewardComposer.from_yaml(HYBRID)
    out = composer({"throughput": torch.rand(4), "latency": torch.rand(4), "replica_loads": torch.rand(4, 3)})
    assert isinstance(out.total, torch.Tensor) and out.total.dtype == torch.float32 and out.total.shape == (4,)
    assert library_of(torch.ones(2)) == "torch"
