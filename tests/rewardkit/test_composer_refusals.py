"""Refusals at the composer's edges: paths that are not paths, bad component outputs."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

import rewardkit
from rewardkit import RewardComposer

HYBRID = pathlib.Path(__file__).resolve().parents[2] / "configs" / "rewards" / "vidur_hybrid.yaml"


@pytest.mark.parametrize("path", [0, 1, True, 3.5, b"configs/x.yaml", None])
def test_from_yaml_refuses_a_path_that_is_not_a_path(path) -> None:
    """``open(0)`` would read standard input: an int must never reach it."""
    with pytest.raises(TypeError, match="expected a file path"):
        RewardComposer.from_yaml(path)


def test_from_yaml_still_takes_str_and_pathlib() -> None:
    assert RewardComposer.from_yaml(HYBRID).term_names == RewardComposer.from_yaml(str(HYBRID)).term_names


class _NaNOut(rewardkit.BaseReward):
    """Returns NaN whatever it reads."""

    inputs = {"x": 0}

    def compute(self, x, terminated, truncated):
        return np.full(np.shape(x["x"]), math.nan)


class _WrongShape(rewardkit.BaseReward):
    """Returns three values whatever the number of environments."""

    inputs = {"x": 0}

    def compute(self, x, terminated, truncated):
        return np.zeros(3)


class _NaNScalar(_NaNOut):
    """NaN from its own scalar function too."""

    def scalar_fn(self):
        return lambda x, terminated, truncated: math.nan


@pytest.fixture
def user_types():
    from rewardkit.registry import _REGISTRY  # noqa: PLC0415 (test-only access to clean up)
    names = {"test_nan_out": _NaNOut, "test_wrong_shape": _WrongShape, "test_nan_scalar": _NaNScalar}
    for name, cls in names.items():
        rewardkit.register(name)(cls)
    yield names
    for name in names:
        _REGISTRY.pop(name, None)


def _composer(kind: str, **kwargs) -> RewardComposer:
    config = {"version": 1, "components": {
        "ok": {"type": "info_value", "params": {"key": "x"}, "normalize": {"type": "running_zscore"}},
        "grp": {"type": "group", "components": {"bad": {"type": kind}}}}}
    return RewardComposer.from_dict(config, **kwargs)


@pytest.mark.parametrize("kind, message", [("test_nan_out", "non-finite|returned nan"),
                                           ("test_nan_scalar", "non-finite|returned nan"),
                                           ("test_wrong_shape", r"shape \(3,\)")])
@pytest.mark.parametrize("x", [1.0, np.ones(4)], ids=["one env", "4 envs"])
def test_a_bad_component_output_is_a_located_error_and_changes_nothing(user_types, kind, message, x) -> None:
    composer = _composer(kind)
    before = composer.state_dict()
    with pytest.raises(rewardkit.base.ComponentOutputError, match=f"grp/bad: .*({message})"):
        composer({"x": x})
    assert composer.state_dict() == before


def test_allow_nonfinite_lets_a_nan_output_through(user_types) -> None:
    out = _composer("test_nan_out", allow_nonfinite=True)({"x": 1.0})
    assert math.isnan(out.terms["grp/bad"].raw)
