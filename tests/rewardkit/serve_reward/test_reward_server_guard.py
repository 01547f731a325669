"""``rewardkit serve-reward``'s guards, on a real process and real sockets.

Stalled clients hold no ``--max-pending`` slot and get 408 once ``--read-timeout-s`` passes; the
API key variable, unset or empty, refuses the start instead of serving with no key; a key is read
without the whitespace at its ends and compared as UTF-8 bytes; ``/health`` probes are not reward
requests in ``/metrics``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx", reason="pip install 'rewardkit[serve]'")
pytest.importorskip("starlette", reason="pip install 'rewardkit[serve]'")
pytest.importorskip("uvicorn", reason="pip install 'rewardkit[serve]'")

from test_reward_server import CONFIG, KEY_ENV, ROOT, Server, body, free_port  # noqa: E402 - after the extras are known


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(CONFIG)
    return path


def stalled(port: int) -> socket.socket:
    """A client that sends its headers and part of its body, then nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"query\": ")
    return sock


def read_status(sock: socket.socket, timeout_s: float) -> str:
    """The status line the server answers on ``sock`` ('' when it closes or says nothing in time)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        pass
    return data.split(b"\r\n", 1)[0].decode("latin-1")


def metric(url: str, sample: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[1])
    return 0.0


def test_stalled_clients_hold_no_slot_and_get_408_in_time(config: Path) -> None:
    srv = Server(config, "--max-pending", "1", "--read-timeout-s", "1")
    clients = [stalled(srv.port) for _ in range(4)]
    try:
        time.sleep(0.3)  # the four are in the server's hands, each with its body unfinished
        began = time.monotonic()
        got = srv.post(body())
        assert got.status_code == 200, got.text  # the one slot is free: a slot is taken once the body is read
        assert time.monotonic() - began < 1.0
        for sock in clients:
            assert read_status(sock, timeout_s=5).startswith("HTTP/1.1 408"), "a stalled client got no 408"
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="408"}') == 4.0
        assert httpx.get(srv.url + "/health").json()["in_flight"] == 0
    finally:
        for sock in clients:
            sock.close()
        srv.stop()


@pytest.fixture
def slow_scorer() -> Iterator[str]:
    from schedulers.engines.stub import ServerThread
    from schedulers.engines.stub_scorer import StubScorer

    thread = ServerThread(StubScorer(delay_s=1.0).app(), free_port()).start()
    try:
        yield thread.url + "/score"
    finally:
        thread.stop()


def test_max_pending_bounds_the_requests_being_scored(tmp_path: Path, slow_scorer: str) -> None:
    config = tmp_path / "remote.yaml"
    config.write_text(f"version: 1\ncomponents:\n  rm: {{type: remote_score, params: {{url: \"{slow_scorer}\", "
                      "retries: 0, cache_size: 0}}\n")
    srv = Server(config, "--max-pending", "1")
    try:
        first: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: first.append(srv.post(body())), daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while httpx.get(srv.url + "/health").json()["in_flight"] < 1:  # the first is being scored (1 s)
            assert time.monotonic() < deadline
            time.sleep(0.02)
        got = srv.post(body())
        assert got.status_code == 503, got.text
        assert got.headers["retry-after"] == "1" and "--max-pending" in got.json()["error"]["message"]
        thread.join(timeout=10)
        assert first[0].status_code == 200
        assert srv.post(body()).status_code == 200  # the slot is free again
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="503"}') == 1.0
    finally:
        srv.stop()


def start(config: Path, *args: str, env: dict[str, str], unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``rewardkit serve-reward`` expected to refuse to start (one that serves is killed and fails the test)."""
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    try:
        return subprocess.run([sys.executable, "-m", "rewardkit", "serve-reward", str(config), "--port",
                               str(free_port()), *args], env={**environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT,
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the server started without a key where it should have refused: {exc.stderr}")


@pytest.mark.parametrize("value, expected", [(None, "is not set"), ("", "is empty"), ("  \n", "is empty"),
                                             ("ab\ncd", "control character")])
def test_a_key_variable_unset_empty_or_unsendable_refuses_to_start(config: Path, value: str | None,
                                                                   expected: str) -> None:
    env = {} if value is None else {KEY_ENV: value}
    done = start(config, "--api-key-env", KEY_ENV, env=env, unset=(KEY_ENV,))
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --api-key-env {KEY_ENV}: ") and expected in last, last


def test_the_default_key_variable_set_but_empty_refuses_to_start(config: Path) -> None:
    done = start(config, env={"REWARDKIT_REWARD_API_KEY": ""})
    assert done.returncode == 2 and "REWARDKIT_REWARD_API_KEY" in done.stderr and "is empty" in done.stderr, done.stderr


def test_without_a_key_variable_the_server_says_it_is_open(config: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REWARDKIT_REWARD_API_KEY"}
    srv = Server(config, env=env)
    try:
        assert srv.post(body()).status_code == 200
    finally:
        printed = srv.stop()
    assert "no API key" in printed, printed


def test_a_key_with_a_trailing_newline_authenticates(config: Path) -> None:
    srv = Server(config, "--api-key-env", KEY_ENV, env={KEY_ENV: "s3cret\n"})  # as `echo s3cret > file` leaves it
    try:
        assert srv.post(body(), headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert srv.post(body(), headers={"X-API-Key": "s3cret"}).status_code == 200
        assert srv.post(body(), headers={"X-API-Key": "s3cre"}).status_code == 401
        assert srv.post(body()).status_code == 401
    finally:
        srv.stop()


def test_a_non_ascii_key_authenticates_as_utf8_bytes(config: Path) -> None:
    key = "clé-ünï-密钥"
    srv = Server(config, "--api-key-env", KEY_ENV, env={KEY_ENV: key})
    try:
        assert srv.post(body(), headers={"Authorization": b"Bearer " + key.encode()}).status_code == 200
        assert srv.post(body(), headers={"X-API-Key": key.encode()}).status_code == 200
        for wrong in ("clé-ünï-密".encode(), "clé".encode("latin-1"), b"cl\xc3"):
            got = srv.post(body(), headers={"X-API-Key": wrong})
            assert got.status_code == 401, (wrong, got.text)
        assert srv.post(body()).status_code == 401
    finally:
        srv.stop()


def test_api_key_bytes_strips_the_ends_and_refuses_what_no_header_carries() -> None:
    from rewardkit.serve_reward.protocol import api_key_bytes

    assert api_key_bytes("s3cret\r\n") == b"s3cret"
    assert api_key_bytes("\tclé ") == "clé".encode()
    assert api_key_bytes("a b") == b"a b"  # inside, a space is part of the key
    for value, message in (("", "is empty"), (" \n ", "is empty"), ("a\x00b", "control character"),
                           ("a\nb", "control character")):
        with pytest.raises(ValueError, match=message):
            api_key_bytes(value)


def test_health_probes_are_not_counted_as_reward_requests(config: Path) -> None:
    srv = Server(config)  # Server's own start probes /health until it answers
    try:
        for _ in range(5):
            assert httpx.get(srv.url + "/health").status_code == 200
        assert httpx.get(srv.url + "/nope").status_code == 404
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="200"}') == 0.0
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="404"}') == 0.0
        assert srv.post(body()).status_code == 200
        assert srv.post({"query": "x"}).status_code == 400
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="200"}') == 1.0
        assert metric(srv.url, 'rewardkit_reward_requests_total{status="400"}') == 1.0
    finally:
        srv.stop()
