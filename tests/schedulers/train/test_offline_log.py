"""``rewardkit train --from-log`` under bad logs: each bad input is a one-line
error naming the file, line and key, exit 2, nothing written; checkpoints with non-finite weights are
refused on save and on load; a large log is streamed, not read whole."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc

import numpy as np
import pytest
import torch

from rewardkit.cli import main
from schedulers.rl.checkpoint_file import CheckpointError
from schedulers.rl.scorer_network import NonFiniteWeightsError, ReplicaScorerPolicy
from schedulers.rl.ppo_router import PPORouter
from schedulers.routing.observation import feature_names
from schedulers.shared.observation_config import ObservationConfig
from schedulers.train.offline import load_logged

FEATURES = list(feature_names(ObservationConfig()))
REPLICAS = 2


def header(**change) -> dict:
    return {"kind": "header", "v": 1, "started": 0.0, "router": "t", "replicas": ["http://a", "http://b"],
            "observation": dataclasses.asdict(ObservationConfig()), "features": FEATURES, "reward": None, **change}


def decision(i: int = 0, **change) -> dict:
    rows = [[0.1 * (i % 7 + 1)] * len(FEATURES) for _ in range(REPLICAS)]
    return {"kind": "decision", "v": 1, "request_id": f"r{i}", "router": "t", "action": i % REPLICAS,
            "observation": rows, "prompt_tokens": 10, "output_tokens": 2, "ttft_s": 0.1, "e2e_s": 0.2,
            "status": "ok", "reward": -0.5 + 0.01 * i, "reward_terms": {}, "time": 0.0, **change}


def write(path, lines: list) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def fails(capsys, tmp_path, log, *needles, extra=()) -> None:
    out = tmp_path / "out"
    code = main(["train", "--from-log", str(log), "--mode", "reward", "--epochs", "1", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    line, = [x for x in err.splitlines() if x.startswith("error:")]
    for needle in needles:
        assert needle in line, line
    assert not (out / "policy.pt").exists()


NESTED = '{"kind": "decision", "v": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("bad, needles", [
    ("reward-nan", (":3: reward: expected a finite number", "got nan")),
    ("reward-inf", (":3: reward: expected a finite number", "got inf")),
    ("reward-1e308", (":3: reward: expected a finite number of magnitude at most 1e+150", "1e+308")),
    ("reward-str", (":3: reward: expected a finite number", "got 'abc'")),
    ("reward-list", (":3: reward: expected a finite number", "got [1.0]")),
    ("narrow-rows", (":3: observation[0]: expected 20 numbers (the header's features), got 3",)),
    ("ragged-rows", (":3: observation[1]: expected 20 numbers (the header's features), got 19",)),
    ("obs-nan", (":3: observation[0][0]: expected a finite number",)),
    (NESTED, (":3: expected a decision record, got JSON nested too deeply",)),
])
def test_bad_decision_lines_are_located_one_line_errors(tmp_path, capsys, bad, needles):
    good = decision(0)
    lines = {"reward-nan": dict(good, reward=float("nan")), "reward-inf": dict(good, reward=float("inf")),
             "reward-1e308": dict(good, reward=1e308),
             "reward-str": dict(good, reward="abc"), "reward-list": dict(good, reward=[1.0]),
             "narrow-rows": dict(good, observation=[[0.1] * 3] * REPLICAS),
             "ragged-rows": dict(good, observation=[[0.1] * len(FEATURES), [0.1] * (len(FEATURES) - 1)]),
             "obs-nan": dict(good, observation=[[float("nan")] * len(FEATURES)] * REPLICAS)}
    # Python's json writes NaN and Infinity, as a careless writer would
    bad_line = json.dumps(lines[bad]) if bad in lines else bad
    log = tmp_path / "log.jsonl"
    write(log, [header(), decision(1), bad_line, decision(2)])
    fails(capsys, tmp_path, log, "log.jsonl", *needles)


@pytest.mark.parametrize("change, needle", [
    ({"count_scale": "abc"}, ":1: observation.count_scale: expected"),
    ({"count_scale": 0}, ":1: observation.count_scale: expected"),
    ({"count_scale": -1.0}, ":1: observation.count_scale: expected"),
    ({"colour": 1}, ":1: observation.colour: unknown key"),
])
def test_header_observation_settings_a_policy_could_not_load_are_refused(tmp_path, capsys, change, needle):
    log = tmp_path / "log.jsonl"
    write(log, [header(observation={**dataclasses.asdict(ObservationConfig()), **change}), decision(1)])
    fails(capsys, tmp_path, log, needle)


def test_out_a_file_and_from_log_a_folder_are_one_line_errors(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    write(log, [header()] + [decision(i) for i in range(20)])
    (tmp_path / "file").write_text("x")
    fails(capsys, tmp_path, log, "--out", "got a file", extra=("--out", str(tmp_path / "file")))
    (tmp_path / "folder").mkdir()
    fails(capsys, tmp_path, tmp_path / "folder", "folder: expected a decision log file, got a folder")


def test_a_policy_with_non_finite_weights_is_refused_on_save_and_on_load(tmp_path):
    policy = ReplicaScorerPolicy(len(FEATURES), hidden_sizes=(8,))
    good = policy.to_checkpoint()
    state = {k: v.clone() for k, v in good["policy_state"].items()}
    with torch.no_grad():
        next(policy.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteWeightsError, match="policy_state.*expected finite weights"):
        policy.to_checkpoint()
    first = next(k for k, v in state.items() if v.is_floating_point() and v.ndim)
    state[first].view(-1)[0] = float("inf")
    path = tmp_path / "bad.pt"
    torch.save({**good, "policy_state": state, "observation": dataclasses.asdict(ObservationConfig())}, path)
    with pytest.raises(CheckpointError, match=f"bad.pt: policy_state.{first}: expected finite weights"):
        PPORouter.from_checkpoint(path)  # the gateway's load: it refuses to start instead of answering 500


def test_a_large_log_is_streamed_not_read_whole(tmp_path):
    log = tmp_path / "big.jsonl"
    with log.open("w") as fh:
        fh.write(json.dumps(header()) + "\n")
        for i in range(8000):
            fh.write(json.dumps(decision(i)) + "\n")
    size = log.stat().st_size
    tracemalloc.start()
    try:
        batch = load_logged(log, "reward")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batch.obs.shape == (8000, REPLICAS, len(FEATURES)) and batch.rewards.dtype == torch.float64
    assert np.isclose(float(batch.rewards[5]), -0.45)
    # the float32 numbers (a quarter of the text or less) plus one line: never the whole text
    assert peak < 0.5 * size, (peak, size)
