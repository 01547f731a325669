"""Who may use the gateway and what it tells backends and logs, and every bad flag a
one-line error naming the flag and its range (item 8)."""

from __future__ import annotations

import json

import httpx
import pytest

from schedulers.engines.faulty import FaultyEngine
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread
from schedulers.serve.app import create_app
from schedulers.serve.gateway import GatewaySettings

ROOT_CONFIGS = __import__("pathlib").Path(__file__).resolve().parents[3] / "configs"


@pytest.fixture
def engine():
    e = FaultyEngine(free_port()).start()
    yield e
    e.stop()


def serve(settings: GatewaySettings) -> ServerThread:
    return ServerThread(create_app(settings), free_port()).start()


def test_with_an_api_key_clients_need_it_and_health_stays_open(engine):
    server = serve(GatewaySettings([engine.url], router="jsq", api_key="s3cret-key"))
    try:
        body = {"model": "m", "prompt": [1, 2], "max_tokens": 2}
        denied = httpx.post(server.url + "/v1/completions", json=body)
        assert denied.status_code == 401 and denied.json()["error"]["type"] == "authentication_error"
        assert httpx.post(server.url + "/v1/completions", json=body,
                          headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(server.url + "/metrics").status_code == 401
        assert httpx.post(server.url + "/v1/completions", json=body,
                          headers={"authorization": "Bearer s3cret-key"}).status_code == 200
        assert httpx.get(server.url + "/health").status_code == 200
        assert "authorization" not in engine.requests[0]["headers"]  # the client's key is not forwarded
    finally:
        server.stop()


def test_backends_get_the_backend_key_and_headers_and_the_log_gets_no_password(engine, tmp_path):
    from schedulers.serve.access import backend_headers

    port = engine.url.rsplit(":", 1)[1]
    keyed = serve(GatewaySettings([engine.url], router="jsq", extra_headers=backend_headers("engine-key", ["X-Team: a"])))
    log = tmp_path / "d.jsonl"
    with_password = serve(GatewaySettings([f"http://alice:hunter2@127.0.0.1:{port}"], router="jsq",
                                          decision_log=str(log)))
    try:
        for server in (keyed, with_password):
            assert httpx.post(server.url + "/v1/completions", json={"prompt": [1], "max_tokens": 1}).status_code == 200
    finally:
        keyed.stop()
        with_password.stop()
    sent = engine.requests[0]["headers"]
    assert sent["authorization"] == "Bearer engine-key" and sent["x-team"] == "a"
    text = log.read_text()
    assert "hunter2" not in text and json.loads(text.splitlines()[0])["replicas"] == [f"http://alice:***@127.0.0.1:{port}"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--speeds", "nan"], "--speeds: expected speeds from 0.01 to 100, got nan"),
    (["--speeds", "inf"], "--speeds: expected speeds from 0.01 to 100, got inf"),
    (["--speeds", "-1"], "--speeds: expected speeds from 0.01 to 100, got -1"),
    (["--speeds", "0"], "--speeds: expected speeds from 0.01 to 100, got 0"),
    (["--speeds", "fast"], "--speeds: expected numbers separated by commas"),
    (["--timeout", "nan"], "--timeout: expected seconds from 0.01 to 86400, got nan"),
    (["--timeout", "inf"], "--timeout: expected seconds from 0.01 to 86400, got inf"),
    (["--first-byte-timeout", "0"], "--first-byte-timeout: expected seconds from 0.01"),
    (["--connect-timeout", "-1"], "--connect-timeout: expected seconds from 0.01"),
    (["--max-body-bytes", "-5"], "--max-body-bytes: expected an integer from 1 to 1073741824, got -5"),
    (["--max-body-bytes", "0"], "--max-body-bytes: expected an integer from 1 to 1073741824, got 0"),
    (["--health-interval", "1e-9"], "--health-interval: expected seconds from 0.01 to 86400"),
    (["--scrape-interval", "1e-9"], "--scrape-interval: expected 0 or seconds from 0.01 to 86400"),
    (["--drain", "nan"], "--drain: expected seconds from 0 to 86400, got nan"),
    (["--header-timeout", "0"], "--header-timeout: expected seconds from 0.1"),
    (["--max-connections", "0"], "--max-connections: expected an integer from 1 to 1000000"),
    (["--port", "99999"], "--port: expected an integer from 1 to 65535"),
    (["--backend-header", "no colon"], "--backend-header: expected 'Name: value'"),
    (["--api-key", " "], "--api-key: expected a non-empty key"),
    (["--decision-log", "."], "--decision-log .: expected a file, got a folder"),
    (["--checkpoint", "x.pt"], "--router least_prefill: router 'least_prefill' is a heuristic: expected no checkpoint"),
    (["--router", "ppo", "--checkpoint", "missing.pt"], "--checkpoint missing.pt"),
    (["--reward", str(ROOT_CONFIGS / "rewards/vidur_ttft.yaml")], "expected a reward of per-request keys only"),
])
def test_bad_gateway_flags_are_one_line_errors_naming_the_flag(capsys, flags, message):
    from rewardkit.cli import main

    assert main(["gateway", "--backend", "http://127.0.0.1:1", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/v1", "http://127.0.0.1:1?x=1", "http://127.0.0.1:99999",
                                 "http://[::1", "ftp://127.0.0.1:1", "http://127.0.0.1:1#frag"])
def test_backend_urls_that_are_not_a_bare_host_and_port_are_refused(capsys, url):
    from rewardkit.cli import main

    assert main(["gateway", "--backend", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --backend: expected") and err.count("\n") == 1


def test_bad_checkpoint_files_and_a_decision_log_under_a_file_are_one_line_errors(tmp_path, capsys):
    import torch

    from rewardkit.cli import main
    from schedulers.rl.scorer_network import ReplicaScorerPolicy
    from schedulers.routing.observation import FEATURE_NAMES

    good = ReplicaScorerPolicy(len(FEATURE_NAMES)).to_checkpoint()
    nan = {**good, "policy_state": {k: torch.full_like(v, float("nan")) for k, v in good["policy_state"].items()}}
    files = {"empty.pt": b"", "text.pt": b"not a checkpoint"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    torch.save({"a": 1}, tmp_path / "dict.pt")
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    torch.save(nan, tmp_path / "nan.pt")
    (tmp_path / "folder.pt").mkdir()
    for name in ("empty.pt", "text.pt", "dict.pt", "tensor.pt", "nan.pt", "folder.pt"):
        assert main(["gateway", "--backend", "http://127.0.0.1:1", "--router", "ppo",
                     "--checkpoint", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --") and name in err or "idle cluster" in err, err
        assert err.count("\n") == 1
    assert main(["gateway", "--backend", "http://127.0.0.1:1", "--decision-log", str(tmp_path / "text.pt" / "d.jsonl")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
