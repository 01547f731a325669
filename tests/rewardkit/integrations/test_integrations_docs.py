"""Run every Python snippet of docs/integrations.md, in order, in one namespace (as a reader would)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("trl")

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"


def test_every_snippet_runs():
    snippets = [code for code in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
                if not code.startswith("# grpo_smollm2.py")]  # trains a model: tests/examples/test_docs_grpo_script.py
    assert len(snippets) == 7  # shared config, Gymnasium x2, SB3, CleanRL-style loop, TRL, veRL
    namespace: dict = {}
    for n, code in enumerate(snippets):
        exec(compile(code, f"{DOC.name} snippet {n + 1}", "exec"), namespace)  # noqa: S102 - our own docs
    assert namespace["rewards"].composer.step == 2  # the TRL snippet ran one batch of two completions
    assert namespace["model"].num_timesteps >= 256
