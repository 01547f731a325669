"""benchmarks/bench_stress.py reaches its own verdict: every seeded loophole found and verified, no honest reward flagged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))



def test_the_benchmark_finds_every_seeded_loophole_and_flags_no_honest_reward(tmp_path, capsys):
    from rewardkit import registry

    before = dict(registry._REGISTRY)
    try:
        import bench_stress  # registers the examples' gold terms, removed again below

        import examples.grpo.terms
        import examples.monitor.terms
        import examples.stress.terms

        for module in (examples.grpo.terms, examples.monitor.terms, examples.stress.terms):
            for value in vars(module).values():
                if isinstance(value, type) and getattr(value, "type_name", None):
                    registry._REGISTRY[value.type_name] = value
        out = tmp_path / "stress.json"
        code = bench_stress.main(["--budget-s", "5", "--json", str(out)])
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(before)
    printed = capsys.readouterr().out
    assert code == 0, printed
    result = json.loads(out.read_text())
    seeded = [c for c in result["cases"] if c["kind"] == "seeded"]
    honest = [c for c in result["cases"] if c["kind"] == "honest"]
    assert len(seeded) >= 11 and len(honest) >= 6
    assert all(c["ok"] and c["verified"] for c in result["cases"])
    assert result["hacked_runs"] and all(r["named"] for r in result["hacked_runs"])
    # what each hacked policy wrote is paid by a term the report says to watch (rewardkit audit --stress)
    assert all(r["watched_paying"] for r in result["hacked_runs"]), [r for r in result["hacked_runs"]
                                                                     if not r["watched_paying"]]
    assert "seeded loopholes found: " in printed
