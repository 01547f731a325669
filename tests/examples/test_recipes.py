"""Run each script in examples/ as a user would and check what it prints."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardkit import RewardComposer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPTS = ("preference_with_constraints.py", "curriculum_weights.py", "normalize_scales.py", "potential_shaping.py",
           "sb3_mountaincar.py",  # needs the sb3 extra: run by tests/rewardkit/integrations/test_sb3.py
           "torch_reach.py")  # needs torch: run by test_torch_reach_example.py


def run_example(name: str) -> str:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    elapsed = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert elapsed < 30, f"{name} took {elapsed:.1f}s; examples should run in a few seconds"
    return result.stdout


def test_every_example_is_tested_and_its_yaml_is_valid():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(SCRIPTS)
    for name in SCRIPTS:
        config = EXAMPLES / name.replace(".py", ".yaml")
        assert RewardComposer.from_yaml(config).term_names


def test_preference_with_constraints():
    out = run_example("preference_with_constraints.py")
    rows = {}
    for line in out.splitlines()[1:]:
        m = re.match(r"^(\w+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)$", line)
        if m:
            rows[m.group(1)] = tuple(map(float, m.groups()[1:]))
    assert len(rows) == 5
    rewards = [r[2] for r in rows.values()]
    assert rewards == sorted(rewards, reverse=True)  # printed best first
    for pref, penalty, reward in rows.values():
        assert reward == pytest.approx(pref + penalty, abs=2e-3)
    assert rows["edgy_joke"][1] == pytest.approx(-20 * (0.61 - 0.2), abs=1e-3)  # toxicity hinge
    assert rows["verbose_expert"][1] == pytest.approx(-0.004 * (720 - 300), abs=1e-3)  # length hinge
    assert rows["broken_json"][1] == pytest.approx(-0.5, abs=1e-3)  # format flag
    assert rows["concise_correct"][1] == 0.0 and rows["short_vague"][1] == 0.0
    assert "highest preference: verbose_expert" in out
    assert "highest reward: concise_correct" in out
    assert "compliant answers keep the preference order: True" in out


def parse_table(lines: list[str], columns: list[str]) -> dict[int, dict[str, float]]:
    table = {}
    for line in lines:
        parts = line.split()
        if parts and parts[0].isdigit():
            table[int(parts[0])] = dict(zip(columns, map(float, parts[1:1 + len(columns)]), strict=True))
    return table


def test_curriculum_weights():
    out = run_example("curriculum_weights.py")
    weights_part, contrib_part = out.split("contributions on a fixed context")
    names = ["success", "progress", "energy", "novelty"]
    w = parse_table(weights_part.splitlines(), names)
    assert sorted(w) == [0, 1000, 2000, 4000, 6000, 8000, 12000]
    assert [w[s]["success"] for s in (0, 2000, 4000, 6000, 12000)] == [0.2, 0.2, 0.6, 1.0, 1.0]
    assert w[0]["progress"] == 1.0 and w[4000]["progress"] == pytest.approx(0.5) and w[8000]["progress"] == 0.0
    assert w[4000]["energy"] == 0.0 and w[6000]["energy"] == -0.2 and w[12000]["energy"] == -0.4
    assert w[2000]["novelty"] == 0.5 and w[4000]["novelty"] == 0.25 and w[12000]["novelty"] == pytest.approx(0.0312)
    c = parse_table(contrib_part.splitlines(), names + ["total"])
    assert c[0]["progress"] == pytest.approx(0.6) and c[8000]["energy"] == pytest.approx(-0.8)
    for row in c.values():
        assert row["total"] == pytest.approx(sum(row[n] for n in names), abs=2e-4)
    assert re.search(r"^\s+0 .* progress$", contrib_part, re.M)
    assert re.search(r"^\s+12000 .* success$", contrib_part, re.M)
    assert "composer.step after the run: 12001" in out


def test_normalize_scales():
    out = run_example("normalize_scales.py")
    m = re.search(r"spread of scales: raw ([\d.e+]+)x, running_zscore ([\d.e+]+)x, return_std ([\d.e+]+)x", out)
    assert m, out
    raw, zscore, retstd = map(float, m.groups())
    assert raw > 1e8
    assert zscore < 1.2
    assert retstd < 5
    zsection = out.split("running_zscore\n")[1].split("return_std")[0]
    stds = [float(s) for s in re.findall(r"std\s+([-\d.e+]+)", zsection)]
    assert len(stds) == 4 and all(s == pytest.approx(1.0, abs=0.1) for s in stds)
    assert re.search(r"queue_bytes .* share of variance 100.00%", out.split("running_zscore\n")[0])


def test_potential_shaping():
    out = run_example("potential_shaping.py")
    episodes = [line for line in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s+(terminated|truncated)", line)]
    assert len(episodes) == 6
    assert all(line.endswith("True") for line in episodes)
    assert any("truncated" in line for line in episodes) and any("terminated" in line for line in episodes)
    for line in episodes:
        _, _, _, shaped, telescoped, _ = line.split()
        assert float(shaped) == pytest.approx(float(telescoped), abs=1e-9)
    worst = float(re.search(r"max \|sum - telescoped\| over episodes: ([\d.e+-]+)", out).group(1))
    assert worst < 1e-9
    policies = re.findall(r"^p=([\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+\(([-\d.]+), ([-\d.]+)\)$", out, re.M)
    assert len(policies) == 2
    (p1, task1, shaped1, lo1, hi1), (p2, task2, shaped2, lo2, hi2) = policies
    assert float(lo1) == float(hi1) == float(lo2) == float(hi2) == 9.0  # the same shift, -phi(s0)
    assert float(task1) > float(task2) and float(shaped1) > float(shaped2)  # ranking preserved
