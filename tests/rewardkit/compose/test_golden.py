"""Totals and breakdowns bit-identical to the recorded scripted runs (``golden_cases.py``): every
reward config in the repository and every built-in component, one environment at a time and in
batches, state carried across calls. A change to code generation must not change what any reward pays."""

from __future__ import annotations

import json

import pytest

from golden_cases import GOLDEN, load, run

CASES = json.loads(GOLDEN.read_text())


def test_the_recording_covers_every_config_and_component() -> None:
    from rewardkit import get_component_class, registered

    from golden_cases import config_files

    assert len(CASES) >= 80
    synchronous = {n for n in registered() if not get_component_class(n).asynchronous
                   and get_component_class(n).__module__.startswith("rewardkit.components")}  # built-in ones
    assert synchronous <= {case.split(":")[1] for case in CASES if case.startswith("component:")}
    assert len([c for c in CASES if not c.startswith("component:")]) == len(config_files())


@pytest.mark.parametrize("case", sorted(CASES))
def test_scripted_run_is_bit_identical(case: str) -> None:
    recorded = CASES[case]
    assert run(load(case, recorded["config"]), recorded["calls"]) == recorded["results"]
