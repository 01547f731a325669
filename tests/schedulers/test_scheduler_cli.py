"""``rewardkit train`` and ``rewardkit evaluate`` exit with EXIT_BAD_INPUT (2) and a located message on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardkit.cli import main
from schedulers.cli import EXIT_BAD_INPUT, evaluation_seeds

ROOT = Path(__file__).resolve().parents[2]


def test_evaluate_bad_env_config_exits_2(tmp_path: Path, capsys) -> None:
    env = tmp_path / "env.yaml"
    env.write_text((ROOT / "configs" / "envs" / "tiny.yaml").read_text().replace("qps: 6.25", "qps: -3"))
    assert main(["evaluate", "--env", str(env), "--seeds", "1", "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{env}: qps: expected a positive number, got -3" in err and "Traceback" not in err


def test_evaluate_bad_seeds_exits_2(capsys) -> None:
    assert main(["evaluate", "--seeds", "0"]) == EXIT_BAD_INPUT
    assert "--seeds: expected a positive count" in capsys.readouterr().err


def test_train_missing_config_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["train", str(tmp_path / "absent.yaml"), "--out", str(tmp_path / "run")]) == EXIT_BAD_INPUT
    assert "absent.yaml" in capsys.readouterr().err


def test_evaluation_seeds() -> None:
    assert evaluation_seeds("3") == [101, 102, 103]
    assert evaluation_seeds("7,9") == [7, 9]
    assert evaluation_seeds("301-304") == [301, 302, 303, 304]
    assert evaluation_seeds("101-102,7") == [101, 102, 7]
    for bad, message in [("0", "positive count"), ("5-3", "'5-3'"), ("1,x", "'x'"), ("1,1-2", "distinct")]:
        with pytest.raises(ValueError, match=message):
            evaluation_seeds(bad)
