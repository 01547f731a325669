"""``rewardkit gateway`` as a process: SIGTERM with requests outlasting ``--drain``,
half-sent requests and connection floods (item 4), and the warning for a public bind without a key (item 5)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time

import httpx
import pytest

from schedulers.engines.gateway_process import GatewayProcess
from schedulers.engines.replicas import free_port
from schedulers.engines.stub import ServerThread, StubEngine
from schedulers.live.decision_log import read_decision_log


@pytest.fixture
def slow_engines():
    engines = [StubEngine("a", per_token_s=0.2), StubEngine("b", per_token_s=0.2)]
    servers = [ServerThread(e.app(), free_port()).start() for e in engines]
    yield [s.url for s in servers]
    for s in servers:
        s.stop()


async def one(client: httpx.AsyncClient, url: str, stream: bool) -> tuple[int, str]:
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 100, "stream": stream}  # 20 s of tokens
    async with client.stream("POST", url + "/v1/completions", json=body) as resp:
        return resp.status_code, (await resp.aread()).decode()


def test_sigterm_with_requests_outlasting_the_drain_answers_and_logs_every_one(slow_engines, tmp_path):
    log = tmp_path / "d.jsonl"
    gateway = GatewayProcess(slow_engines, "jsq", log=tmp_path / "gateway.log",
                             extra=["--drain", "1", "--decision-log", str(log)]).start()

    async def load() -> list[tuple[int, str]]:
        async with httpx.AsyncClient(timeout=30) as client:
            tasks = [asyncio.create_task(one(client, gateway.url, stream=i % 2 == 0)) for i in range(12)]
            await asyncio.sleep(1.0)
            os.killpg(gateway.proc.pid, signal.SIGTERM)
            return await asyncio.gather(*tasks)

    started = time.monotonic()
    answers = asyncio.run(load())
    gateway.proc.wait(timeout=20)
    assert time.monotonic() - started < 10 and gateway.proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises it
    for i, (status, text) in enumerate(answers):
        if i % 2 == 0:  # streams: their 200 was sent; they end with an error event and [DONE]
            assert status == 200 and text.endswith("data: [DONE]\n\n") and "shutting down" in text
        else:
            assert status == 503 and "shutting down" in json.loads(text)["error"]["message"]
    decisions = read_decision_log(log).decisions
    assert len(decisions) == 12 and {d.status for d in decisions} == {"error"}
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()


def was_closed(sock: socket.socket) -> bool:
    """Whether the other end closed the connection (a FIN or a reset) before answering."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def test_half_sent_requests_are_closed_and_connections_are_capped(slow_engines, tmp_path):
    gateway = GatewayProcess(slow_engines, "jsq", log=tmp_path / "gateway.log",
                             extra=["--header-timeout", "0.5", "--max-connections", "8"]).start()
    try:
        socks = [socket.create_connection(("127.0.0.1", gateway.port), timeout=5) for _ in range(20)]
        for sock in socks:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n")  # headers never finished
        started = time.monotonic()
        closed = [was_closed(sock) for sock in socks]
        assert all(closed) and time.monotonic() - started < 5
        for sock in socks:
            sock.close()
        resp = httpx.post(gateway.url + "/v1/completions", json={"model": "m", "prompt": [1], "max_tokens": 1},
                          timeout=10)
        assert resp.status_code == 200
    finally:
        gateway.stop()
    assert "more than 8 connections" in (tmp_path / "gateway.log").read_text()


def test_a_public_bind_without_a_key_is_warned_about(slow_engines, tmp_path):
    gateway = GatewayProcess(slow_engines, "jsq", log=tmp_path / "gateway.log", extra=["--host", "0.0.0.0"]).start()
    gateway.stop()
    assert "without authentication; set --api-key" in (tmp_path / "gateway.log").read_text()
