"""Checkpoints under faults: corrupt, truncated, hostile or foreign files are located errors; resume
falls back to the newest good checkpoint and says which."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rewardkit.cli import main as rewardkit_main
from schedulers.bounds import MAX_HIDDEN_SIZE
from schedulers.rl.checkpoint_file import CheckpointError, read_checkpoint
from schedulers.rl.scorer_network import ReplicaScorerPolicy
from schedulers.rl.ppo_router import PPORouter

from test_end_to_end import short_config

ROOT = Path(__file__).resolve().parents[3]


def good_policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.pt"
    torch.save(ReplicaScorerPolicy(20).to_checkpoint(), path)
    return path


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "text"])
def test_a_damaged_policy_file_is_a_located_error(tmp_path, damage):
    path = good_policy_file(tmp_path)
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) // 2], "garbage": bytes(range(256)) * 40, "empty": b"",
                      "text": b"not a checkpoint\n"}[damage])
    with pytest.raises(CheckpointError, match=rf"{path}: expected a checkpoint written by schedulers.train, got an "
                                              r"unreadable file \(truncated or corrupt"):
        PPORouter.from_checkpoint(path)


def test_a_foreign_mapping_and_mismatched_weights_are_located_errors(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(CheckpointError, match=rf"{path}: expected a checkpoint with policy_kwargs, policy_state"):
        PPORouter.from_checkpoint(path)
    data = ReplicaScorerPolicy(20).to_checkpoint()
    data["policy_kwargs"]["hidden_sizes"] = [32, 32]  # the weights are 64 wide
    torch.save(data, path)
    with pytest.raises(CheckpointError, match=str(path)):
        PPORouter.from_checkpoint(path)


def test_a_hostile_checkpoint_is_refused_before_its_network_is_built(tmp_path, monkeypatch):
    """Declared 200,000-wide layers (28 s and 1.1 GB before this check) are refused at once."""
    path = tmp_path / "hostile.pt"
    torch.save({"policy_kwargs": {"n_features": 20, "hidden_sizes": [200_000, 200_000],
                                  "critic_hidden_sizes": [200_000]}, "policy_state": {}}, path)
    def no_layer_built(*args, **kwargs):
        raise AssertionError("a layer was built before the declared sizes were checked")

    with monkeypatch.context() as patch:
        patch.setattr(torch.nn.Linear, "__init__", no_layer_built)
        with pytest.raises(CheckpointError, match=rf"{path}: hidden_sizes: expected .* from 1 to {MAX_HIDDEN_SIZE}"):
            PPORouter.from_checkpoint(path)
    torch.save({"policy_kwargs": {"n_features": 20, "evil": 1}, "policy_state": {}}, path)
    with pytest.raises(CheckpointError, match="unknown key"):
        PPORouter.from_checkpoint(path)


def test_evaluate_with_a_damaged_checkpoint_is_a_one_line_error(tmp_path, capsys):
    path = good_policy_file(tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    code = rewardkit_main(["evaluate", "--checkpoint", str(path), "--env", str(ROOT / "configs" / "envs" / "tiny.yaml"),
                           "--seeds", "101", "--baselines", "round_robin", "--out", str(tmp_path / "eval")])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "Traceback" not in err


def test_a_folder_or_missing_file_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="expected a checkpoint file"):
        read_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        read_checkpoint(tmp_path / "absent.pt")


def test_resume_falls_back_to_the_newest_good_checkpoint(tmp_path, vidur_predictor, capsys):
    out = tmp_path / "run"
    assert rewardkit_main(["train", "--config", str(short_config(tmp_path, 256)), "--out", str(out)]) == 0
    checkpoints = sorted((out / "checkpoints").glob("update_*.pt"))
    assert [p.name for p in checkpoints][-2:] == ["update_000001.pt", "update_000002.pt"]
    newest = checkpoints[-1]
    newest.write_bytes(newest.read_bytes()[:1000])  # torn by a crash or a disk fault
    capsys.readouterr()
    assert rewardkit_main(["train", "--config", str(short_config(tmp_path, 384)), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"skipped an unreadable checkpoint: {newest}" in err and "resuming from update_000001.pt" in err
    assert "[resume] update_000001.pt: update 1" in err
    # every checkpoint unreadable: a located error and exit 2, nothing overwritten silently
    for p in (out / "checkpoints").glob("update_*.pt"):
        p.write_bytes(b"torn")
    assert rewardkit_main(["train", "--config", str(short_config(tmp_path, 512)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no readable checkpoint to resume from" in err and "--no-resume" in err and "Traceback" not in err


def test_resume_skips_checkpoints_that_load_but_cannot_be_resumed_from(tmp_path):
    """A file of another kind (a policy.pt copied over a checkpoint) or weights that do not fit their
    declared sizes loaded fine and then failed deep in the trainer's restore (KeyError/RuntimeError)."""
    from schedulers.train.checkpoints import TRAINING_KEYS, checkpoint_name, latest_good_checkpoint

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    policy = ReplicaScorerPolicy(20).to_checkpoint()
    state = {**{key: 0 for key in TRAINING_KEYS}, **policy, "config": {}}
    torch.save(state, folder / checkpoint_name(1))
    torch.save(policy, folder / checkpoint_name(2))  # no training state
    misfit = {**state, "policy_kwargs": {**policy["policy_kwargs"], "hidden_sizes": [32, 32]}}
    torch.save(misfit, folder / checkpoint_name(3))  # the weights are 64 wide
    messages: list[str] = []
    path, data = latest_good_checkpoint(tmp_path, log=messages.append)
    assert path.name == checkpoint_name(1) and set(TRAINING_KEYS) <= set(data)
    assert len(messages) == 2 and all(m.endswith(f"resuming from {checkpoint_name(1)}") for m in messages)
    assert str(folder / checkpoint_name(3)) in messages[0] and "size mismatch" in messages[0]
    assert str(folder / checkpoint_name(2)) in messages[1] and "missing config, optimizer" in messages[1]
