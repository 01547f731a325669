"""``rewardkit/remote/http.py`` against a server that answers whatever a test tells it to: every
malformed answer (nested too deeply, fields of the wrong type, numbers out of range) is a failed
request the term's ``on_failure`` policy handles, answers beyond ``max_answer_bytes`` are cut off,
and credentials in the URL never reach a message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rewardkit import ConfigError, RewardComposer
from rewardkit.errors import RemoteScoreError
from rewardkit.remote.term_params import redacted
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread


@dataclass
class Scripted:
    """Answers every POST with ``body`` (bytes), streamed in chunks when ``chunked``."""

    body: bytes = b"{}"
    status: int = 200
    chunked: bool = False

    async def answer(self, request: Request) -> Response:
        await request.body()
        if self.chunked:
            body = self.body

            async def chunks() -> Any:
                for i in range(0, len(body), 65536):
                    yield body[i:i + 65536]

            return StreamingResponse(chunks(), status_code=self.status, media_type="application/json")
        return Response(self.body, status_code=self.status, media_type="application/json")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.answer, methods=["POST"])])


@pytest.fixture(scope="module")
def _scripted() -> Iterator[tuple[Scripted, str]]:
    stub = Scripted()
    server = ServerThread(stub.app(), free_port()).start()
    try:
        yield stub, server.url
    finally:
        server.stop()


@pytest.fixture
def scripted(_scripted: tuple[Scripted, str]) -> tuple[Scripted, str]:
    stub, url = _scripted
    stub.body, stub.status, stub.chunked = b"{}", 200, False
    return stub, url


def term(kind: str, url: str, **params: Any) -> RewardComposer:
    base: dict[str, Any] = {"url": url, "retries": 0, "timeout_s": 30, "on_failure": "default", "default": 0.25}
    if kind == "judge":
        base.update(model="m", rubric="Rate: {completion}", labels=["no", "yes"])
    return RewardComposer.from_dict({"version": 1, "components": {"t": {"type": kind, "params": {**base, **params}}}})


DEEP = 200_000


def chat(logprobs: Any) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"content": "yes"}, "logprobs": logprobs}]}).encode()


def completion(logprobs: Any) -> bytes:
    return json.dumps({"choices": [{"index": 0, "text": "yes", "logprobs": logprobs}]}).encode()


MALFORMED = [
    ("remote_score", "/score", b"[" * DEEP + b"]" * DEEP),
    ("remote_score", "/score", b'{"scores": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ("remote_score", "/score", b'{"scores": [1e999]}'),
    ("judge", "/v1/chat/completions", b'{"choices": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ("judge", "/v1/chat/completions", chat("zzz")),
    ("judge", "/v1/chat/completions", chat({"content": "zzz"})),
    ("judge", "/v1/chat/completions", chat({"content": [{"top_logprobs": [{"token": "yes", "logprob": 1e308}]}]})),
    ("judge", "/v1/chat/completions", chat({"content": [{"top_logprobs": [{"token": 7, "logprob": -0.1}]}]})),
    ("judge", "/v1/chat/completions", chat({"content": [{"top_logprobs": "zzz"}]})),
    ("judge", "/v1/completions", completion("zzz")),
    ("judge", "/v1/completions", completion({"top_logprobs": ["zzz"]})),
    ("judge", "/v1/completions", completion({"top_logprobs": [{"yes": 1e308}]})),
    ("judge", "/v1/completions", completion({"top_logprobs": [{"yes": "high"}]})),
]


@pytest.mark.parametrize("kind, path, body", MALFORMED, ids=range(len(MALFORMED)))
def test_every_malformed_answer_goes_through_on_failure(scripted, kind: str, path: str, body: bytes) -> None:
    stub, url = scripted
    stub.body = body
    out = term(kind, url + path)({"completion": ["an answer"]})
    assert out.terms["t"].raw.tolist() == [0.25]
    assert out.terms["t"].info["defaults_used"] == 1.0
    with pytest.raises(RemoteScoreError, match="malformed answer"):
        term(kind, url + path, on_failure="raise")({"completion": ["an answer"]})


def test_a_well_formed_judge_answer_still_scores(scripted) -> None:
    stub, url = scripted
    stub.body = chat({"content": [{"top_logprobs": [{"token": "yes", "logprob": 0.0},
                                                    {"token": "no", "logprob": float("-inf")}]}]}).replace(
        b"-Infinity", b"-1e400")
    out = term("judge", url + "/v1/chat/completions", on_failure="raise")({"completion": ["x"]})
    assert out.terms["t"].raw.tolist() == [1.0]


@pytest.mark.parametrize("chunked", [False, True])
def test_an_answer_beyond_max_answer_bytes_is_a_failed_request(scripted, chunked: bool) -> None:
    stub, url = scripted
    stub.chunked = chunked
    stub.body = json.dumps({"scores": [1.0], "padding": "x" * 3_000_000}).encode()
    with pytest.raises(RemoteScoreError, match="answer larger than max_answer_bytes=1048576"):
        term("remote_score", url + "/score", on_failure="raise", max_answer_bytes=1_048_576)({"completion": ["a"]})
    # within the limit the same answer is read
    out = term("remote_score", url + "/score", on_failure="raise")({"completion": ["a"]})
    assert out.terms["t"].raw.tolist() == [1.0]


@pytest.mark.parametrize("userinfo, shown", [("alice:s3cret-pass", "alice:***"), ("TOKEN-abc123", "***"),
                                             ("bob:", "bob:***")])
def test_credentials_in_the_url_never_reach_a_message(scripted, userinfo: str, shown: str) -> None:
    stub, url = scripted
    stub.status, stub.body = 500, b'{"error": "down"}'
    secret_url = url.replace("http://", f"http://{userinfo}@") + "/score"
    with pytest.raises(RemoteScoreError) as info:
        term("remote_score", secret_url, on_failure="raise")({"completion": ["a"]})
    message = str(info.value)
    assert f"http://{shown}@127.0.0.1" in message and "HTTP 500" in message
    assert userinfo.rstrip(":") not in message.replace(shown, "")
    # a judge URL refused at load is shown the same way
    with pytest.raises(ConfigError) as refused:
        term("judge", secret_url)
    assert f"{shown}@" in str(refused.value) and userinfo.rstrip(":") not in str(refused.value).replace(shown, "")


def test_redacted_leaves_urls_without_credentials_alone() -> None:
    assert redacted("https://api.example.com:8443/v1/completions?x=1") == "https://api.example.com:8443/v1/completions?x=1"
    assert redacted("http://u:p@h/x") == "http://u:***@h/x"


@pytest.mark.parametrize("key, value", [("timeout_s", 1e13), ("backoff_s", 1e13), ("max_call_s", 1e13)])
def test_time_settings_beyond_what_can_run_are_refused(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=rf"components\.t\.params\.{key}: expected a number from"):
        term("remote_score", "http://127.0.0.1:1/score", **{key: value})


def test_scores_are_read_from_numpy_friendly_answers(scripted) -> None:
    stub, url = scripted
    stub.body = b'{"scores": [0.5, -2]}'
    out = term("remote_score", url + "/score", on_failure="raise", batch_size=2)({"completion": ["a", "b"]})
    np.testing.assert_array_equal(out.terms["t"].raw, [0.5, -2.0])


@pytest.mark.parametrize("url", ["ftp://alice:s3cret-pass@host/x", "http://alice:s3cret-pass@host:99999/x"])
def test_a_url_refused_at_load_is_shown_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        term("remote_score", url)
    message = str(info.value)
    assert "components.t.params.url: expected an http:// or https:// URL with a host" in message
    assert "alice:***@host" in message and "s3cret" not in message
