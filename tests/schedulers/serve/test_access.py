"""What of a backend URL reaches the gateway's logs (schedulers/serve/access.py): a password, or a token
given as the user part alone, is written as ``***``; the credentials still reach the backend."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from schedulers.engines.faulty import FaultyEngine
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread
from schedulers.serve.access import redact_url, split_credentials
from schedulers.serve.app import create_app
from schedulers.serve.gateway import GatewaySettings


@pytest.mark.parametrize(("url", "shown"), [
    ("http://sk-live-TOKEN@host:8000/v1", "http://***@host:8000/v1"),
    ("http://alice:hunter2@host:8000", "http://alice:***@host:8000"),
    ("http://:hunter2@host", "http://***@host"),
    ("http://alice:@host", "http://***@host"),
    ("http://host:8000", "http://host:8000"),
    ("http://[::1", "<unparseable URL>"),
])
def test_redact_url_hides_every_secret_in_the_user_part(url, shown):
    assert redact_url(url) == shown


def test_a_token_as_the_user_part_reaches_the_backend_but_not_the_decision_log(tmp_path):
    engine = FaultyEngine(free_port()).start()
    port = engine.url.rsplit(":", 1)[1]
    log = tmp_path / "d.jsonl"
    server = ServerThread(create_app(GatewaySettings([f"http://sk-live-TOKEN@127.0.0.1:{port}"], router="jsq",
                                                     decision_log=str(log))), free_port()).start()
    try:
        assert httpx.post(server.url + "/v1/completions", json={"prompt": [1], "max_tokens": 1}).status_code == 200
    finally:
        server.stop()
        engine.stop()
    text = log.read_text()
    assert "TOKEN" not in text and json.loads(text.splitlines()[0])["replicas"] == [f"http://***@127.0.0.1:{port}"]
    sent = engine.requests[0]["headers"]["authorization"]
    assert sent == "Basic " + base64.b64encode(b"sk-live-TOKEN:").decode()
    assert split_credentials(f"http://sk-live-TOKEN@127.0.0.1:{port}")[0] == f"http://127.0.0.1:{port}"
