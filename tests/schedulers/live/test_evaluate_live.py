"""``rewardkit evaluate`` on a live env whose engines do not serve: a clear message and a
non-zero exit, never a table of NaN and exit 0."""

from __future__ import annotations

from pathlib import Path

import yaml

from rewardkit.cli import main as rewardkit_main
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.paths import resolve_path

ROOT = Path(__file__).resolve().parents[3]


def live_env(tmp_path: Path, backends: list[str]) -> Path:
    cfg = yaml.safe_load((ROOT / "configs/envs/live_tiny.yaml").read_text())
    cfg["trace_file"] = str(resolve_path(cfg["trace_file"], ROOT / "configs/envs/live_tiny.yaml"))
    cfg["reward_config"] = str(ROOT / cfg["reward_config"])
    cfg["live"]["backends"] = backends
    cfg["live"]["declared_speeds"] = [1.0] * len(backends)
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_all_backends_unreachable_is_a_one_line_error(tmp_path, capsys):
    env = live_env(tmp_path, [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"])
    assert rewardkit_main(["evaluate", "--env", str(env), "--baselines", "jsq", "--seeds", "101",
                           "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "live.backends: none of the 2 backends answers" in err and err.count("\n") == 1


def test_backends_that_answer_no_request_make_a_failed_evaluation(tmp_path, capsys):
    server = ServerThread(StubEngine("down", mode="fail").app(), free_port()).start()
    try:
        env = live_env(tmp_path, [server.url])
        code = rewardkit_main(["evaluate", "--env", str(env), "--baselines", "jsq", "--seeds", "101", "--requests", "4",
                               "--qps", "50", "--out", str(tmp_path / "out")])
    finally:
        server.stop()
    assert code == 1 and "no request was answered" in capsys.readouterr().err
