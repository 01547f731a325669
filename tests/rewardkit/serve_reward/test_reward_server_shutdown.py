"""``rewardkit serve-reward`` never loses its state on the way out, tested on a real process with real signals.

A remote call still running when uvicorn's grace period ends is cancelled and the state written
(it once deadlocked); every sequence of SIGINT and SIGTERM writes the state and exits 0 (Ctrl-C
twice then SIGTERM once exited with nothing written); a ``--state`` path that cannot be written is
refused at start rather than at shutdown; a failed periodic save is logged, counted and retried.
"""

from __future__ import annotations

import json
import os
import signal
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

from test_reward_server import CONFIG, ROOT, Server, body, free_port  # noqa: E402 - after the extras are known

SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}


@pytest.fixture
def scorer() -> Iterator[object]:
    """A remote scorer on a local port; ``mode = "hang"`` makes it take requests and never answer."""
    from schedulers.engines.stub import ServerThread
    from schedulers.engines.stub_scorer import StubScorer

    stub = StubScorer()
    thread = ServerThread(stub.app(), free_port()).start()
    stub.url = thread.url + "/score"
    try:
        yield stub
    finally:
        thread.stop()


def remote_config(tmp_path: Path, url: str) -> Path:
    """A config with a remote term (60 s per request, so a hung scorer outlasts any grace period here)."""
    path = tmp_path / "remote.yaml"
    path.write_text(f"""\
version: 1
components:
  rm:
    type: remote_score
    params: {{url: "{url}", batch_size: 4, timeout_s: 60, retries: 0, cache_size: 0}}
  correct: {{type: answer_match, params: {{mode: numeric}}}}
""")
    return path


def local_config(tmp_path: Path) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(CONFIG)
    return path


def post_in_background(srv: Server) -> tuple[threading.Thread, list[object]]:
    """POST a batch from a thread; the list gets the response or the exception."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(srv.post(body()))
        except httpx.HTTPError as exc:
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def exit_of(srv: Server, timeout_s: float = 15.0) -> tuple[int, str, float]:
    """The server's exit code, what it printed, and the seconds it took to exit (killed after ``timeout_s``)."""
    began = time.monotonic()
    try:
        out, _ = srv.proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        out, _ = srv.proc.communicate()
        pytest.fail(f"the server was still running {timeout_s:g} s after the signal:\n{out}")
    return srv.proc.returncode, out, time.monotonic() - began


def test_sigterm_while_a_remote_call_outlasts_the_grace_period_exits_and_writes_the_state(
        tmp_path: Path, scorer) -> None:
    state = tmp_path / "state.json"
    srv = Server(remote_config(tmp_path, scorer.url), "--state", str(state), "--shutdown-grace-s", "0.5")
    try:
        first = srv.post(body())
        assert first.status_code == 200, first.text
        scorer.mode = "hang"
        arrived = len(scorer.arrivals)
        client, answered = post_in_background(srv)
        wait_for(lambda: len(scorer.arrivals) > arrived)  # the second call is in flight, waiting on the scorer
        srv.proc.send_signal(signal.SIGTERM)
        code, printed, took = exit_of(srv)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.communicate()
    assert code == 0, printed
    assert took < 10, (took, printed)
    assert f"state saved to {state} (step 4)" in printed
    saved = json.loads(state.read_text())
    # the cancelled call changed nothing: the state is the first request's
    assert saved["composer"]["step"] == 4 and saved["counters"] == {"requests": 1, "completions": 4}
    client.join(timeout=10)
    got = answered[0]  # the request cut off at the deadline is answered, not dropped
    assert isinstance(got, httpx.Response) and got.status_code == 503, answered
    assert "shutting down" in got.json()["error"]["message"]
    assert "Traceback" not in printed, printed


@pytest.mark.parametrize("kind, sequence", [
    ("remote", ["TERM"]), ("remote", ["INT", "INT"]), ("remote", ["INT", "INT", "TERM"]), ("remote", ["TERM", "TERM"]),
    ("local", ["INT"]), ("local", ["INT", "INT", "TERM"]),
])
def test_every_signal_sequence_writes_the_state_and_exits_0(tmp_path: Path, scorer, kind: str,
                                                            sequence: list[str]) -> None:
    """One signal waits up to the grace period for a call in flight, then cancels it; a second signal
    skips the wait; a third changes nothing. Each writes the state of the calls that were answered."""
    state = tmp_path / "state.json"
    config = remote_config(tmp_path, scorer.url) if kind == "remote" else local_config(tmp_path)
    grace_s = 3.0
    srv = Server(config, "--state", str(state), "--shutdown-grace-s", str(grace_s))
    try:
        assert srv.post(body()).status_code == 200
        client, answered = None, []
        if kind == "remote":  # a call in flight that never ends by itself
            scorer.mode = "hang"
            arrived = len(scorer.arrivals)
            client, answered = post_in_background(srv)
            wait_for(lambda: len(scorer.arrivals) > arrived)
        for i, name in enumerate(sequence):
            if i:
                time.sleep(0.05)  # apart, or two of one signal could arrive as one; close, so all land mid-shutdown
            srv.proc.send_signal(SIGNALS[name])
        code, printed, took = exit_of(srv)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.communicate()
    assert code == 0, printed
    assert f"state saved to {state} (step 4)" in printed, printed
    assert "Traceback" not in printed, printed
    saved = json.loads(state.read_text())
    assert saved["composer"]["step"] == 4 and saved["counters"] == {"requests": 1, "completions": 4}
    if client is not None:  # the cancelled call's request is answered, not dropped
        client.join(timeout=10)
        assert [getattr(a, "status_code", a) for a in answered] == [503], answered
    if kind == "remote" and len(sequence) > 1:
        assert took < grace_s, (took, printed)  # the second signal did not wait out the grace period
    if kind == "remote" and len(sequence) == 1:
        assert took >= grace_s - 0.5, (took, printed)  # one signal let the call run for the grace period


def run_command(*args: str, env: dict[str, str] | None = None, timeout_s: float = 30) -> subprocess.CompletedProcess:
    """``rewardkit serve-reward ARGS`` to its end (it must refuse to start: a server that starts is killed and fails)."""
    try:
        return subprocess.run([sys.executable, "-m", "rewardkit", "serve-reward", *args, "--port", str(free_port())],
                              env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the server started (and ran {timeout_s:g} s) where it should have refused: {exc.stderr}")


def test_a_state_path_that_cannot_be_written_is_refused_at_start(tmp_path: Path) -> None:
    config = local_config(tmp_path)
    missing = tmp_path / "no" / "such" / "folder" / "state.json"
    done = run_command(str(config), "--state", str(missing), timeout_s=20)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --state {missing}: ") and "does not exist" in last, last
    assert "Traceback" not in done.stderr
    assert not missing.parent.exists()  # refused, not created

    folder = tmp_path / "a_folder"
    folder.mkdir()
    done = run_command(str(config), "--state", str(folder), timeout_s=20)
    assert done.returncode == 2 and f"error: --state {folder}: " in done.stderr and "is a folder" in done.stderr, \
        done.stderr


def metric(url: str, name: str) -> float:
    """The value of one Prometheus sample (0 when absent)."""
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_a_failed_periodic_save_is_logged_counted_and_retried(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    srv = Server(local_config(tmp_path), "--state", str(state), "--save-every-s", "0.1")
    try:
        assert srv.post(body()).status_code == 200
        wait_for(state.exists)
        # a folder where the file was: the rename onto it fails at every save until it goes
        state.unlink()
        state.mkdir()
        (state / "keep").write_text("x")
        assert srv.post(body()).status_code == 200
        wait_for(lambda: metric(srv.url, "rewardkit_reward_state_save_failures_total") >= 2)
        assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind
        (state / "keep").unlink()
        state.rmdir()
        assert srv.post(body()).status_code == 200
        wait_for(lambda: state.is_file() and json.loads(state.read_text())["composer"]["step"] == 12)
        assert metric(srv.url, "rewardkit_reward_state_saves_total") >= 2
    finally:
        printed = srv.stop()
    assert f"periodic save to {state} failed" in printed and "IsADirectoryError" in printed, printed
    assert f"periodic saves to {state} work again" in printed, printed


def test_coalescer_cancel_fails_the_call_in_flight_the_queue_and_later_requests() -> None:
    """What the server's shutdown relies on: ``cancel`` ends the call in flight and answers every
    request with the given error (none is left waiting forever), and the composer is let go."""
    import asyncio

    from rewardkit.integrations.coalescer import Coalescer

    class Hung:
        """A scorer whose call never ends by itself; records whether it was let go."""

        let_go = False
        composer = type("Composer", (), {"step": 0})()

        async def ascore(self, ctx, n, step):
            try:
                await asyncio.Event().wait()
            finally:
                Hung.let_go = True

    async def run() -> list[str]:
        coalescer = Coalescer(Hung(), max_batch=1)  # one per call: the second request waits in the queue
        first = asyncio.ensure_future(coalescer.score({"completion": ["a"]}, 1, None))
        second = asyncio.ensure_future(coalescer.score({"completion": ["b"]}, 1, None))
        await asyncio.sleep(0.05)
        assert coalescer.waiting == 1 and not first.done()
        await coalescer.cancel(RuntimeError("shutting down"))
        assert Hung.let_go
        later = asyncio.ensure_future(coalescer.score({"completion": ["c"]}, 1, None))
        results = await asyncio.wait_for(asyncio.gather(first, second, later, return_exceptions=True), 5)
        return [str(r) for r in results]

    assert asyncio.run(run()) == ["shutting down"] * 3
