"""``rewardkit train`` and ``rewardkit evaluate`` exit with EXIT_BAD_INPUT (2) and a located message on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardkit.cli import main
from schedulers.cli import EXIT_BAD_INPUT, describe_seeds, evaluation_seeds, first_evaluation_seeds

ROOT = Path(__file__).resolve().parents[2]


def test_evaluate_bad_env_config_exits_2(tmp_path: Path, capsys) -> None:
    env = tmp_path / "env.yaml"
    env.write_text((ROOT / "configs" / "envs" / "tiny.yaml").read_text().replace("qps: 6.25", "qps: -3"))
    assert main(["evaluate", "--env", str(env), "--seeds", "1", "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{env}: qps: expected a number from 0.001 to 100000, got -3" in err and "Traceback" not in err


def test_evaluate_bad_seeds_exits_2(capsys) -> None:
    assert main(["evaluate", "--n-seeds", "0"]) == EXIT_BAD_INPUT
    assert "--n-seeds: expected a count from 1 to" in capsys.readouterr().err
    assert main(["evaluate", "--seeds", "-3"]) == EXIT_BAD_INPUT
    assert "--seeds: expected comma-separated seeds" in capsys.readouterr().err


def test_seeds_and_a_count_are_one_or_the_other(capsys) -> None:
    assert main(["evaluate", "--seeds", "42", "--n-seeds", "3"]) == EXIT_BAD_INPUT
    assert "not allowed with argument" in capsys.readouterr().err


def test_train_missing_config_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["train", str(tmp_path / "absent.yaml"), "--out", str(tmp_path / "run")]) == EXIT_BAD_INPUT
    assert "absent.yaml" in capsys.readouterr().err


def test_evaluation_seeds() -> None:
    """One number is one seed (``--seeds 42`` runs seed 42, not 42 episodes); a count is --n-seeds."""
    assert evaluation_seeds("42") == [42]
    assert evaluation_seeds("7,9") == [7, 9]
    assert evaluation_seeds("301-304") == [301, 302, 303, 304]
    assert evaluation_seeds("101-102,7") == [101, 102, 7]
    assert first_evaluation_seeds(3) == [101, 102, 103]
    assert describe_seeds([101, 102, 103, 7]) == "101-103, 7 (4 seeds)"
    for bad, message in [("5-3", "'5-3'"), ("1,x", "'x'"), ("1,1-2", "distinct"), ("", "''"), ("-1", "'-1'"),
                         (str(2**40), "at most 4294967295")]:
        with pytest.raises(ValueError, match=message):
            evaluation_seeds(bad)
    for bad in (0, -1, 10**8, True):
        with pytest.raises(ValueError, match="--n-seeds"):
            first_evaluation_seeds(bad)


def test_evaluate_prints_the_seeds_it_uses(tmp_path: Path, capsys) -> None:
    env = ROOT / "configs" / "envs" / "tiny.yaml"
    assert main(["evaluate", "--env", str(env), "--seeds", "101,103", "--baselines", "round_robin",
                 "--out", str(tmp_path / "out")]) == 0
    assert "evaluation seeds: 101, 103 (2 seeds)" in capsys.readouterr().out


def test_evaluate_runs_the_industrys_baselines_as_they_ship(tmp_path: Path, capsys) -> None:
    """``--baselines`` takes llm-d's, SGLang's and Dynamo's current rules by name, with parameters, and
    refuses a bad parameter naming it."""
    import json

    env = ROOT / "configs" / "envs" / "tiny.yaml"
    out = tmp_path / "out"
    names = ["round_robin", "llm_d_optimized", "least_load", "dynamo_kv:router_temperature=0.5"]
    assert main(["evaluate", "--env", str(env), "--seeds", "101", "--baselines", ",".join(names),
                 "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["routers"] == names and set(names) <= set(results["heuristics"])
    rows = {row["router"]: row for row in results["episodes"]}
    assert all(rows[n]["ttft_p99"] > 0 for n in names)
    capsys.readouterr()
    assert main(["evaluate", "--env", str(env), "--seeds", "101", "--baselines", "least_load:kv_pressure_weight=-1",
                 "--out", str(tmp_path / "bad")]) == EXIT_BAD_INPUT
    assert ("--baselines: router 'least_load:kv_pressure_weight=-1': kv_pressure_weight: expected a number >= 0"
            in capsys.readouterr().err)


BLOCKER = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == {blocked!r}:
            raise ImportError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Missing())
from rewardkit.cli import main
raise SystemExit(main({argv!r}))
"""


@pytest.mark.parametrize(("command", "blocked"), [(["train", "configs/ppo_demo.yaml"], "torch"),
                                                  (["evaluate", "--n-seeds", "1"], "pandas")])
def test_a_missing_router_dependency_names_the_extra(command, blocked, tmp_path) -> None:
    """A dependency of the router extra made unimportable (an install without it): one line, exit 2."""
    import subprocess
    import sys

    code = BLOCKER.format(blocked=blocked, argv=command + ["--out", str(tmp_path / "out")])
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == EXIT_BAD_INPUT, run.stderr[-2000:]
    assert f"needs {blocked}" in run.stderr and "pip install 'rewardkit[router]'" in run.stderr
    assert "Traceback" not in run.stderr


def test_train_from_log_replays_the_log_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rewardkit train --from-log LOG`` is the operator's loop (log, replay, train): PPO on the replayed
    workload unless ``--mode clone`` or ``--mode reward`` asks for offline learning from the decisions."""
    import schedulers.cli as cli
    import schedulers.train.offline as offline

    seen: list[str] = []
    monkeypatch.setattr(cli, "replay_train_command", lambda args, out: seen.append(f"replay {args.mode}") or 0)
    monkeypatch.setattr(offline, "train_from_log", lambda logs, out, mode, **kw: seen.append(f"offline {mode}") or "p.pt")
    log = tmp_path / "decisions.jsonl"
    log.write_text("")
    assert main(["train", "--from-log", str(log), "--out", str(tmp_path / "a")]) == 0
    assert main(["train", "--from-log", str(log), "--mode", "clone", "--out", str(tmp_path / "b")]) == 0
    assert seen == ["replay replay", "offline clone"]
