"""Trace files that are not a text CSV of request lengths: a located one-line error naming the file,
from the simulator's arrivals (``evaluate``/``train``) and from ``rewardkit loadgen --trace`` alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rewardkit.cli import main as rewardkit_main
from rewardkit.errors import ConfigError
from schedulers.sim.env_config import load_env_config

ROOT = Path(__file__).resolve().parents[3]
HEADER = b"num_prefill_tokens,num_decode_tokens\n"

#: a trace's bytes, and what the error must say about them
DAMAGED = {
    "binary": (bytes(range(256)) * 20, "expected a UTF-8 CSV text file"),
    "utf16": ("num_prefill_tokens,num_decode_tokens\n1,2\n".encode("utf-16"), "expected a UTF-8 CSV text file"),
    "latin1_after_header": (HEADER + "10,20\n\xe9\xe9,5\n".encode("latin-1"), "UTF-8"),
    "huge_field": (HEADER + b'"' + b"7" * 200_000 + b'",2\n', None),
}


def env_with_trace(tmp_path: Path, trace: Path, requests: int = 1) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "envs" / "tiny.yaml").read_text())
    data.update(trace_file=str(trace), requests_per_episode=requests)
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_loadgen_names_a_trace_that_is_not_text(tmp_path, capsys, kind):
    """``loadgen --trace`` on binary or non-UTF-8 bytes printed the codec's message without the file
    (or, for an overlong field, a ``_csv.Error`` traceback)."""
    content, expected = DAMAGED[kind]
    trace = tmp_path / "trace.csv"
    trace.write_bytes(content)
    code = rewardkit_main(["loadgen", "--trace", str(trace), "--qps", "1", "--url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"error: {trace}:"), line
    if expected:
        assert expected in line


@pytest.mark.parametrize("kind", ["binary", "utf16", "latin1_after_header"])
def test_the_simulator_names_the_env_file_the_key_and_the_trace(tmp_path, kind):
    from schedulers.shared.arrivals import sample_arrivals

    trace = tmp_path / "trace.csv"
    trace.write_bytes(DAMAGED[kind][0])
    env = env_with_trace(tmp_path, trace)
    with pytest.raises(ConfigError) as err:
        sample_arrivals(load_env_config(env), 101)
    assert str(err.value).startswith(f"{env}: trace_file: {trace}: expected a UTF-8 CSV text file")


@pytest.mark.parametrize(("rows", "line"), [(b"0,0\n", 2), (b"3,4\n0,0\n", 3), (b"1,1\n1e300,1\n", 3)])
def test_requests_of_no_tokens_or_absurd_lengths_are_located(tmp_path, rows, line):
    """A row of 0 prompt and 0 output tokens crashed the length fitting with pandas' 'Cannot convert
    non-finite values' (no file, no line)."""
    from schedulers.shared.arrivals import sample_arrivals

    trace = tmp_path / "zeros.csv"
    trace.write_bytes(HEADER + rows)
    env = env_with_trace(tmp_path, trace)
    with pytest.raises(ConfigError, match=rf"{trace}: line {line}: expected whole token counts from 0 to 2\^53 .* "
                                          r"not both 0"):
        sample_arrivals(load_env_config(env), 101)


def test_evaluate_on_a_binary_trace_is_a_one_line_error(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_bytes(DAMAGED["binary"][0])
    env = env_with_trace(tmp_path, trace)
    code = rewardkit_main(["evaluate", "--env", str(env), "--seeds", "101", "--baselines", "round_robin",
                           "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"error: {env}: trace_file: {trace}: expected a UTF-8 CSV text file" in err
