"""The code in docs/writing-components.md runs: every Python block, in order, in a fresh process
(its components register names of their own), with the assertions the page makes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "writing-components.md"


def test_every_code_block_of_the_page_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 5  # minimal, scalar_fn, inlined, stateful class, stateful use
    program = "\n\n".join(blocks) + "\nprint('doc ok')\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("doc ok")


def test_the_page_names_the_benchmark_and_its_measured_table_is_in_the_results():
    text = DOC.read_text(encoding="utf-8")
    assert "benchmarks/bench_component_paths.py" in text and "results/composition-speed.md" in text
    results = (ROOT / "docs" / "results" / "composition-speed.md").read_text(encoding="utf-8")
    assert "| error term alone | compute only |" in results and "| compute + scalar_source (inlined) |" in results
