"""Fixtures of the monitor's tests: a reward config with a gold term, and TRL trainer_state.json files."""

from __future__ import annotations

from pathlib import Path

import pytest
from monitor_support import REWARD, hacked_history, honest_history, write_state


@pytest.fixture
def reward_config(tmp_path: Path) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(REWARD, encoding="utf-8")
    return path


@pytest.fixture
def hacked_state(tmp_path: Path) -> Path:
    pytest.importorskip("transformers", reason="pip install 'rewardkit[trl]'")
    (tmp_path / "hacked").mkdir()
    return write_state(tmp_path / "hacked" / "trainer_state.json", hacked_history())


@pytest.fixture
def honest_state(tmp_path: Path) -> Path:
    pytest.importorskip("transformers", reason="pip install 'rewardkit[trl]'")
    (tmp_path / "honest").mkdir()
    return write_state(tmp_path / "honest" / "trainer_state.json", honest_history())
