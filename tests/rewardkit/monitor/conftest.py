"""Fixtures of the monitor's tests: a reward config with a gold term, and TRL trainer_state.json files."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_support import REWARD, hacked_history, honest_history, write_state

from rewardkit import registry

#: components that ``examples/monitor/terms.py`` registers when imported
EXAMPLE_COMPONENTS = ("strict_equation", "reply_length", "stub_judge", "sum_closeness")
#: the test modules that read them (by name in YAML, or through ``--import examples.monitor.terms``)
USES_EXAMPLE_COMPONENTS = ("test_example_terms", "test_real_runs", "test_watched")


def _unregister_example_components() -> None:
    for name in EXAMPLE_COMPONENTS:
        registry._REGISTRY.pop(name, None)


@pytest.fixture(autouse=True, scope="module")
def _example_components_registered(request: pytest.FixtureRequest) -> Iterator[None]:
    """The example's components are registered only while the modules that read them run."""
    if request.module.__name__ not in USES_EXAMPLE_COMPONENTS:
        yield
        return
    import examples.monitor.terms as terms

    _unregister_example_components()
    importlib.reload(terms)  # runs its @register decorators again
    yield
    _unregister_example_components()


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
