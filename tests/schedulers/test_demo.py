"""``make demo`` on a tiny budget: both trainings, the evaluation on fresh seeds, tables and plots."""

from __future__ import annotations

from pathlib import Path

import yaml

from schedulers import demo

from test_end_to_end import short_config


def tiny_base(tmp_path: Path) -> Path:
    """The demo's base settings on the tiny cluster with one short update per run."""
    cfg = yaml.safe_load(short_config(tmp_path, 128).read_text())
    cfg["ppo"].update(n_envs=1, n_steps=80, minibatch_size=40, n_epochs=1)  # one tiny-cluster episode
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_demo_trains_both_rewards_and_evaluates_on_fresh_seeds(tmp_path, vidur_predictor, capsys):
    out = tmp_path / "demo"
    argv = ["--out", str(out), "--updates", "1", "--seeds", "341,342", "--curve-seeds", "351", "--curve-every", "1",
            "--base-config", str(tiny_base(tmp_path))]
    assert demo.main(argv) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "(behaviour cloning)" in captured.err and "stage" in captured.err  # the cloning phase has its own bar
    assert "least_prefill cloned once" in printed or "cloned once" in printed
    assert "evaluation seeds: 341-342 (2 seeds), fresh" in printed
    for router in ("round_robin", "least_prefill", "adaptive", "warm_start", "ppo_hybrid", "ppo_request"):
        assert router in printed
    assert "/ warm_start" in printed and "/ adaptive" in printed
    for plot in ("ttft_p99.png", "learning_curve.png"):
        assert (out / plot).stat().st_size > 0 and str(out / plot) in printed
    for run in ("ppo_hybrid", "ppo_request"):
        curve = (out / run / "curve.csv").read_text().splitlines()
        assert curve[0] == "update,ttft_p99" and [line.split(",")[0] for line in curve[1:]] == ["0", "1"]
        assert yaml.safe_load((out / run / "config.yaml").read_text())["ppo"]["gamma"] == demo.RUNS[run]["gamma"]
    # one clone, both runs started from it: the same weights, the same first curve point
    import torch

    clone = torch.load(out / "clone" / "bc_policy.pt", weights_only=True)["policy_state"]
    for run in ("ppo_hybrid", "ppo_request"):
        start = torch.load(out / run / "bc_policy.pt", weights_only=True)
        assert start["cloned_in"] == str(out / "clone" / "bc_policy.pt")
        assert all(torch.equal(clone[k], v) for k, v in start["policy_state"].items())
    first = {run: (out / run / "curve.csv").read_text().splitlines()[1] for run in ("ppo_hybrid", "ppo_request")}
    assert first["ppo_hybrid"] == first["ppo_request"], first
    # run again: everything resumes (no curve point is recomputed or duplicated)
    assert demo.main(argv) == 0
    assert len((out / "ppo_request" / "curve.csv").read_text().splitlines()) == 3


def test_demo_refuses_selection_seeds(capsys):
    assert demo.main(["--seeds", "101-103"]) == 2
    assert "expected seeds no selection used" in capsys.readouterr().err
