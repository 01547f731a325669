"""``rewardkit loadgen`` (schedulers/loadgen/cli.py) against a gateway that wants an API key: the key comes
from ``--api-key`` or the variable the gateway reads, ``REWARDKIT_GATEWAY_API_KEY``, and goes with every
request (the model listing too); it is never written to ``--out``."""

from __future__ import annotations

import json

import pytest

from rewardkit.cli import main
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.serve.app import create_app
from schedulers.serve.gateway import GatewaySettings

KEY = "loadgen-test-key"


@pytest.fixture
def keyed_gateway():
    engine = ServerThread(StubEngine("a").app(), free_port()).start()
    gateway = ServerThread(create_app(GatewaySettings([engine.url], router="jsq", api_key=KEY)), free_port()).start()
    yield gateway.url
    gateway.stop()
    engine.stop()


def run(url: str, out, *extra: str, exit_code: int = 0) -> dict:
    argv = ["loadgen", "--url", url, "--requests", "4", "--qps", "50", "--no-progress", "--length-scale", "0.05",
            "--out", str(out), *extra]
    assert main(argv) == exit_code
    return json.loads(out.read_text())


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_every_request_carries_the_gateways_key(keyed_gateway, tmp_path, monkeypatch, how):
    monkeypatch.delenv("REWARDKIT_GATEWAY_API_KEY", raising=False)
    if how == "environment":
        monkeypatch.setenv("REWARDKIT_GATEWAY_API_KEY", KEY)
    data = run(keyed_gateway, tmp_path / "out.json", *(["--api-key", KEY] if how == "flag" else []))
    assert [r["status"] for r in data["requests"]] == [200] * 4
    assert KEY not in (tmp_path / "out.json").read_text()


def test_without_the_key_the_gateway_refuses_and_the_model_listing_says_so(keyed_gateway, monkeypatch, capsys,
                                                                           tmp_path):
    monkeypatch.delenv("REWARDKIT_GATEWAY_API_KEY", raising=False)
    assert main(["loadgen", "--url", keyed_gateway, "--requests", "2", "--no-progress",
                 "--out", str(tmp_path / "o.json")]) == 2
    assert "/v1/models" in capsys.readouterr().err
    data = run(keyed_gateway, tmp_path / "out.json", "--model", "m", exit_code=1)  # every request failed
    assert [r["status"] for r in data["requests"]] == [401] * 4
