"""End to end on the real simulator: `rewardkit train` then `rewardkit evaluate` on the tiny cluster."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from rewardkit.cli import main as rewardkit_main

ROOT = Path(__file__).resolve().parents[2]


def short_config(tmp_path: Path, total_timesteps: int) -> Path:
    """configs/ppo_vidur.yaml on the tiny cluster with a few hundred steps (about a minute)."""
    cfg = yaml.safe_load((ROOT / "configs" / "ppo_vidur.yaml").read_text())
    cfg["env"] = str(ROOT / "configs" / "envs" / "tiny.yaml")
    cfg["reward"] = str(ROOT / "configs" / "rewards" / "vidur_littles_law.yaml")
    cfg["ppo"].update(total_timesteps=total_timesteps, n_envs=1, n_steps=128, minibatch_size=64, n_epochs=2)
    cfg["entropy"]["coef"] = {"schedule": "linear", "start": 0.01, "end": 0.0, "steps": 384}
    cfg["bc"].update(demo_steps=160, epochs=2, minibatch_size=64)
    cfg["logging"].update(checkpoint_every=1, plots=True)
    path = tmp_path / "ppo_tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_resume_and_evaluate_through_the_cli(tmp_path: Path, vidur_predictor, capsys) -> None:
    config = short_config(tmp_path, total_timesteps=256)
    out = tmp_path / "run"
    assert rewardkit_main(["train", "--config", str(config), "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["update"]) for r in rows] == [1, 2]
    assert (out / "policy.pt").exists() and (out / "learning_curves.png").stat().st_size > 0
    assert any(k.startswith("reward/") or "time_in_system" in k for k in rows[0]), rows[0].keys()

    # Asking for more steps resumes from the last checkpoint instead of starting over.
    longer = short_config(tmp_path, total_timesteps=384)
    assert rewardkit_main(["train", "--config", str(longer), "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["update"]) for r in rows] == [1, 2, 3]
    err = capsys.readouterr().err
    assert "[resume]" in err and "[train] seeds: torch 0, training episodes from seed 1000" in err

    eval_out = tmp_path / "eval"
    code = rewardkit_main(["evaluate", "--checkpoint", str(out / "policy.pt"), "--env",
                           str(ROOT / "configs" / "envs" / "tiny.yaml"), "--seeds", "101",
                           "--baselines", "round_robin,least_tokens", "--out", str(eval_out)])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("round_robin", "least_tokens", "ppo", "TTFT p99"):
        assert name in printed
    assert list(eval_out.glob("*.png")), "the comparison plot was not written"


def test_evaluate_reports_a_bad_env_config(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "env.yaml"
    bad.write_text((ROOT / "configs" / "envs" / "tiny.yaml").read_text().replace("num_replicas: 2", "num_replicas: -2"))
    assert rewardkit_main(["evaluate", "--env", str(bad), "--seeds", "1", "--baselines", "round_robin"]) == 2
    err = capsys.readouterr().err
    assert "env.yaml" in err and "num_replicas" in err


@pytest.mark.parametrize("argv", [["train", "--config", "missing.yaml"]])
def test_train_reports_a_missing_config(argv: list[str], capsys) -> None:
    assert rewardkit_main(argv) == 2
    assert "missing.yaml" in capsys.readouterr().err
