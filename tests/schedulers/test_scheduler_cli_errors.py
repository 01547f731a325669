"""``rewardkit evaluate`` and ``rewardkit train`` under bad options and files: every case a located
one-line error and exit 2, never a traceback, and nothing run before the options are checked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rewardkit.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs" / "envs" / "tiny.yaml")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "binary").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "garbage.pt").write_bytes(bytes(range(256)) * 2)
    return {p.name: p for p in tmp_path.iterdir()}


def run(capsys, argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors (exit 2, usage line)
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    return code, lines[-1] if lines else ""


EVALUATE_CASES = [
    # (extra options, what the last line must contain); {name} is a file of the fixture
    (["--out", "{file}"], "--out {file}: expected a folder for the results, got a file"),
    (["--out", "{file}/sub"], "--out {file}/sub: expected a folder path, got one under the file {file}"),
    (["--out", "/proc/rewardkit-no-such-folder"], "/proc/rewardkit-no-such-folder: "),
    (["--baselines", ","], "--baselines: expected at least one heuristic name (or a --checkpoint), got ','"),
    (["--baselines", "nope"], "--baselines: unknown router 'nope'"),
    (["--checkpoint", "{folder}"], "{folder}: expected a checkpoint file"),
    (["--checkpoint", "{garbage.pt}"], "{garbage.pt}: expected a checkpoint written by schedulers.train"),
    (["--warm-start", "{garbage.pt}"], "{garbage.pt}: expected a checkpoint written by schedulers.train"),
    (["--env", "{binary}"], "{binary}: expected a readable UTF-8 file"),
    (["--env", "{folder}"], "{folder}: expected a readable UTF-8 file"),
    (["--trace", "{binary}"], "trace_file: {binary}: expected a UTF-8 CSV text file"),
    (["--replicas", "100000000"], "num_replicas: expected an integer from 1 to 256, got 100000000"),
    (["--qps", "nan"], "qps: expected a number from 0.001 to 100000, got nan"),
    (["--requests", "0"], "requests_per_episode: expected an integer >= 1, got 0"),
    (["--seeds", "1-100000000"], "--seeds: expected at most 10000 seeds (the limit)"),
    (["--n-seeds", "100000000"], "--n-seeds: expected a count from 1 to 10000 (the limit), got 100000000"),
]


@pytest.mark.parametrize(("extra", "expected"), EVALUATE_CASES)
def test_evaluate_bad_options_are_one_located_line(tmp_path, capsys, files, extra, expected):
    """``--out`` naming a file was a FileExistsError traceback after the whole evaluation ran;
    ``--baselines ,`` an internal 'evaluate_policies needs at least one router'."""
    fill = {f"{{{name}}}": str(path) for name, path in files.items()}

    def filled(text: str) -> str:
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    argv = ["evaluate", "--env", TINY, "--baselines", "round_robin", "--out", str(tmp_path / "out")]
    seeds = [] if {"--seeds", "--n-seeds"} & set(extra) else ["--seeds", "101"]
    code, last = run(capsys, argv + seeds + [filled(a) for a in extra])
    assert code == 2 and last.startswith("error: ") and filled(expected) in last, last


@pytest.mark.parametrize("out", ["{file}", "{file}/sub", "/proc/rewardkit-no-such-folder"])
def test_train_out_that_cannot_be_a_folder_is_one_located_line(tmp_path, capsys, files, out):
    """``rewardkit train --out`` naming a file, or a folder that cannot be created, was a traceback."""
    raw = yaml.safe_load((ROOT / "configs" / "ppo_demo.yaml").read_text())
    raw["env"] = TINY
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(raw))
    out = out.replace("{file}", str(files["file"]))
    code, last = run(capsys, ["train", "--config", str(config), "--out", out])
    assert code == 2 and last.startswith("error: ") and out in last, last
    assert files["file"].read_text() == "x"  # the file in the way is left alone
