"""The decision log's format: written by the gateway, read back with located errors; a torn last line is skipped."""

from __future__ import annotations

import json

import pytest

from rewardkit.errors import ConfigError
from schedulers.live.decision_log import Decision, DecisionLogWriter, read_decision_log


def write_log(path, n: int = 3) -> None:
    writer = DecisionLogWriter(path, router="jsq", replicas=["http://a", "http://b"], observation={"token_scale": 1.0},
                               features=["f0", "f1"], reward=None)
    for i in range(n):
        writer.write(Decision(f"r{i}", "jsq", i % 2, [[0.1, 0.2], [0.3, 0.4]], 10, 4, 0.1, 0.3, reward=-0.5))
    writer.close()


def test_round_trip_and_a_torn_last_line(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    write_log(path)
    log = read_decision_log(path)
    assert log.header["replicas"] == ["http://a", "http://b"] and [d.action for d in log.decisions] == [0, 1, 0]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"kind": "decision", "v": 1, "request_id": "r9", "rou')  # a crash mid-write
    assert len(read_decision_log(path).decisions) == 3
    assert f"{path}:5: skipped a torn last line" in capsys.readouterr().err


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda r: {**r, "action": 5}, ":2: action: expected a replica index below 2, got 5"),
    (lambda r: {**r, "status": "maybe"}, ":2: status: expected one of ok, error, cancelled, retried"),
    (lambda r: {**r, "observation": [[0.1]]}, ":2: observation: expected 2 rows of numbers"),
    (lambda r: {**r, "v": 7}, ":2: v: expected 1, got 7"),
    (lambda r: {**r, "surprise": 1}, ":2: expected the decision keys"),
])
def test_bad_records_are_located(tmp_path, edit, expected):
    path = tmp_path / "d.jsonl"
    write_log(path, 2)
    lines = path.read_text().splitlines()
    lines[1] = json.dumps(edit(json.loads(lines[1])))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_decision_log(path)


def test_an_empty_or_binary_file_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ConfigError, match="with a header line"):
        read_decision_log(empty)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="got binary data"):
        read_decision_log(binary)


def test_engines_lines_keep_each_replica_s_last_reported_kv_capacity(tmp_path):
    from schedulers.live.decision_log import DecisionLogWriter, read_decision_log

    path = tmp_path / "d.jsonl"
    writer = DecisionLogWriter(path, router="jsq", replicas=["a", "b"], observation={}, features=[], reward=None)
    writer.write_engines([32768, None])
    writer.write_engines([None, 5440])
    writer.write_engines([16384, None])
    writer.close()
    assert read_decision_log(path).kv_tokens == [16384, 5440]


@pytest.mark.parametrize("value", [[1], [0, 5], ["5", 4], [True, 3], "32768"])
def test_a_bad_engines_line_is_a_located_error(tmp_path, value):
    from schedulers.live.decision_log import DecisionLogWriter, read_decision_log

    path = tmp_path / "d.jsonl"
    DecisionLogWriter(path, router="jsq", replicas=["a", "b"], observation={}, features=[], reward=None).close()
    with path.open("a") as fh:
        fh.write(json.dumps({"kind": "engines", "v": 1, "time": 0.0, "kv_tokens": value}) + "\n")
    with pytest.raises(ConfigError, match=r"d\.jsonl:2: kv_tokens: expected a list of 2 positive integers or nulls"):
        read_decision_log(path)
