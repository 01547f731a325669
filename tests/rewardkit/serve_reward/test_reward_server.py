"""``rewardkit serve-reward``, started for real as a subprocess on a free port.

The answers equal the in-process composer's; the step comes from the request when given; the
state (normalizer statistics, step, remote budgets) survives SIGTERM and a restart; the body bound
and the API key answer 413 and 401 with JSON errors; concurrent requests share composer calls and
remote terms run concurrently; OpenRLHF 0.11's own reward client reads the answers. The other
guards (503, 408, the key's rules) are in test_reward_server_guard.py, the shutdown paths in
test_reward_server_shutdown.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rewardkit import RewardComposer

httpx = pytest.importorskip("httpx", reason="pip install 'rewardkit[serve]'")
pytest.importorskip("starlette", reason="pip install 'rewardkit[serve]'")
pytest.importorskip("uvicorn", reason="pip install 'rewardkit[serve]'")

ROOT = Path(__file__).resolve().parents[3]
KEY_ENV = "RK_TEST_REWARD_KEY"

CONFIG = """\
version: 1
components:
  correct: {type: answer_match, params: {mode: numeric}, weight: 2.0}
  length:
    type: length_penalty
    params: {unit: words, max: 3}
    normalize: {type: running_zscore}
    weight: {schedule: piecewise, points: [[0, 0.5], [99, 0.5], [100, 1.0]]}
"""

PROMPTS = ["Q: 2+2? A:", "Q: 3+3? A:", "Q: 5+5? A:", "Q: 1+1? A:"]
ANSWERS = [" 4", " it is six, I think: 6", " 11", " two, so 2 is the answer to this"]
LABELS = ["4", "6", 10, "2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``rewardkit serve-reward`` in a subprocess; ``stop()`` sends SIGTERM and waits."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardkit", "serve-reward", str(config), "--port", str(self.port), *args],
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}: {self.proc.stdout.read()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("the server did not answer /health within 60 s")
            time.sleep(0.1)

    def post(self, body: object, **kwargs: object) -> httpx.Response:
        return httpx.post(self.url + "/get_reward", json=body, timeout=30, **kwargs)

    def stop(self) -> str:
        """SIGTERM, wait, and return what the server printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def server(config: Path) -> Iterator[Server]:
    srv = Server(config)
    yield srv
    srv.stop()


def body(n: int = 4, **extra: object) -> dict:
    return {"query": [p + a for p, a in zip(PROMPTS[:n], ANSWERS[:n], strict=True)], "prompts": PROMPTS[:n],
            "labels": LABELS[:n], **extra}


def in_process(composer: RewardComposer, n: int = 4, step: int | None = None) -> dict:
    """What the server should answer, from a composer of the same config in this process."""
    composer.reset()
    out = composer({"completion": ANSWERS[:n], "reference": [str(x) for x in LABELS[:n]]}, step=step,
                   terminated=np.ones(n, dtype=bool))
    terms = {name: np.asarray(out.terms[name].contribution).tolist() for name in ("correct", "length")}
    return {"rewards": np.asarray(out.total).tolist(), "terms": terms,
            "extra_logs": {f"rewardkit/{k}": float(np.mean(v)) for k, v in terms.items()}}


def test_answers_equal_the_in_process_composer_and_follow_the_requests_step(server: Server, config: Path) -> None:
    reference = RewardComposer.from_yaml(config)
    for extra in ({}, {}, {"step": 150}, {}):
        got = server.post(body(**extra))
        assert got.status_code == 200, got.text
        data = got.json()
        want = in_process(reference, step=extra.get("step"))
        assert data["rewards"] == pytest.approx(want["rewards"], abs=1e-12)
        assert data["scores"] == data["rewards"]
        assert data["terms"] == {k: pytest.approx(v, abs=1e-12) for k, v in want["terms"].items()}
        assert data["extra_logs"] == {k: pytest.approx(v, abs=1e-12) for k, v in want["extra_logs"].items()}
    assert data["step"] == 154  # after the request at step 150 (4 completions), the counter goes on from there
    assert reference.step == 158
    # the schedule followed the request's step: weight 1.0 from step 100, 0.5 before
    early, late = in_process(RewardComposer.from_yaml(config), step=0), in_process(RewardComposer.from_yaml(config), step=150)
    assert late["terms"]["length"] == pytest.approx([2 * v for v in early["terms"]["length"]])
    # "/" answers like "/get_reward"; an empty batch is an empty answer
    assert httpx.post(server.url + "/", json=body(1), timeout=30).json()["rewards"] == pytest.approx(
        in_process(reference, n=1)["rewards"])
    assert server.post({"query": []}).json()["rewards"] == []


def test_bad_requests_are_400_with_the_key_path(server: Server) -> None:
    cases = [({"query": "x"}, "query: expected a list of strings, got str"),
             ({"query": ["a", 3]}, r"query\[1\]: expected a string, got int"),
             ({"query": ["a"], "prompts": ["a", "b"]}, r"prompts: expected one per query \(1\), got 2"),
             ({"query": ["a"], "labels": [[1]]}, r"labels\[0\]: expected a string, a number or null, got list"),
             ({"query": ["a"], "step": -2}, "step: expected a non-negative integer"),
             ({"query": ["a"]}, "reads 'reference'")]
    for payload, message in cases:
        got = server.post(payload)
        assert got.status_code == 400, (payload, got.text)
        assert got.json()["error"]["code"] == 400
        assert re.search(message, got.json()["error"]["message"]), got.json()
    got = httpx.post(server.url + "/get_reward", content=b"{not json", timeout=30)
    assert got.status_code == 400 and "body: expected JSON" in got.json()["error"]["message"]
    got = httpx.post(server.url + "/get_reward", content=b'{"query": ["a 4"], "labels": [NaN]}', timeout=30)
    assert got.status_code == 400 and "NaN is not a JSON value" in got.json()["error"]["message"]
    assert httpx.get(server.url + "/get_reward").json()["error"]["code"] == 405
    assert httpx.get(server.url + "/nope").json()["error"]["message"].startswith("/nope: no such route")
    assert server.post(body()).status_code == 200  # the server goes on


def test_state_survives_sigterm_and_restart(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    reference = RewardComposer.from_yaml(config)
    first = Server(config, "--state", str(state))
    try:
        for _ in range(3):
            assert first.post(body()).status_code == 200
            in_process(reference)
    finally:
        printed = first.stop()
    assert first.proc.returncode in (0, -signal.SIGTERM), printed  # uvicorn re-raises the signal after its shutdown
    assert f"state saved to {state} (step 12)" in printed
    saved = json.loads(state.read_text())
    assert saved["composer"]["step"] == 12 and saved["counters"] == {"requests": 3, "completions": 12}
    assert saved["composer"]["normalizers"]["length"]["count"] == 12.0

    second = Server(config, "--state", str(state))
    try:
        health = httpx.get(second.url + "/health").json()
        assert health["restored"] is True and health["step"] == 12 and health["completions"] == 12
        got = second.post(body(2)).json()  # normalized with the statistics of the first server's 12 completions
        assert got["rewards"] == pytest.approx(in_process(reference, n=2)["rewards"], abs=1e-12)
        fresh = in_process(RewardComposer.from_yaml(config), n=2)  # what a server that forgot would answer
        assert got["terms"]["length"] != pytest.approx(fresh["terms"]["length"])
    finally:
        second.stop()
    assert json.loads(state.read_text())["composer"]["step"] == 14


def test_periodic_saves_survive_a_sigkill(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    srv = Server(config, "--state", str(state), "--save-every-s", "0.2")
    try:
        assert srv.post(body()).status_code == 200
        deadline = time.monotonic() + 20
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        srv.proc.kill()  # no SIGTERM: only the periodic save is there
        srv.proc.communicate()
    assert json.loads(state.read_text())["composer"]["step"] == 4


def test_a_state_file_of_another_config_is_refused(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    other = tmp_path / "other.yaml"
    other.write_text("version: 1\ncomponents:\n"
                     "  x: {type: length_penalty, params: {max: 1}, normalize: {type: running_zscore}}\n")
    first = Server(other, "--state", str(state))
    first.post({"query": ["a b c"]})
    first.stop()
    proc = subprocess.run([sys.executable, "-m", "rewardkit", "serve-reward", str(config), "--port", str(free_port()),
                           "--state", str(state)], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert str(state) in proc.stderr and "error:" in proc.stderr


def test_body_bound_413(config: Path) -> None:
    srv = Server(config, "--max-body-bytes", "2000")
    try:
        big = {"query": ["x" * 3000], "labels": ["1"]}
        got = srv.post(big)
        assert got.status_code == 413 and "at most 2000 bytes" in got.json()["error"]["message"]

        def chunks():  # no content-length: refused once the bytes read pass the bound
            for _ in range(10):
                yield b" " * 500

        got = httpx.post(srv.url + "/get_reward", content=chunks(), timeout=30)
        assert got.status_code == 413 and "got more" in got.json()["error"]["message"]
        assert srv.post(body()).status_code == 200
    finally:
        srv.stop()


def test_api_key_401(config: Path) -> None:
    srv = Server(config, "--api-key-env", KEY_ENV, env={KEY_ENV: "s3cret"})
    try:
        assert srv.post(body()).status_code == 401
        wrong = srv.post(body(), headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "Authorization: Bearer KEY" in wrong.json()["error"]["message"]
        assert srv.post(body(), headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert srv.post(body(), headers={"X-API-Key": "s3cret"}).status_code == 200
        assert httpx.get(srv.url + "/metrics").status_code == 401
        assert httpx.get(srv.url + "/health").status_code == 200  # load balancers probe without the key
    finally:
        srv.stop()


# ---- remote terms: concurrency and budgets ------------------------------------------------------
@pytest.fixture
def slow_scorer() -> Iterator[tuple[object, str]]:
    from schedulers.engines.stub import ServerThread
    from schedulers.engines.stub_scorer import StubScorer

    stub = StubScorer(delay_s=0.3)
    thread = ServerThread(stub.app(), free_port()).start()
    try:
        yield stub, thread.url + "/score"
    finally:
        thread.stop()


def remote_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "remote.yaml"
    path.write_text(f"""\
version: 1
components:
  rm:
    type: remote_score
    params: {{url: "{url}", batch_size: 1, max_concurrency: 8, max_requests: 10, on_failure: default, default: -1.0,
              cache_size: 0, retries: 0}}
  correct: {{type: answer_match, params: {{mode: numeric}}}}
""")
    return path


def test_remote_terms_run_concurrently_and_requests_share_calls(tmp_path: Path, slow_scorer: tuple) -> None:
    stub, url = slow_scorer
    srv = Server(remote_config(tmp_path, url))
    try:
        began = time.monotonic()
        got = srv.post(body()).json()
        elapsed = time.monotonic() - began
        # 4 items, one request each at 0.3 s: in flight together, not one after another (1.2 s)
        assert stub.peak_in_flight == 4 and elapsed < 1.2, (stub.peak_in_flight, elapsed)  # one after another: >= 1.2 s
        assert got["terms"]["rm"] == [float(len(a)) for a in ANSWERS]

        async def many() -> list:
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(*(client.post(srv.url + "/get_reward", json=body(1)) for _ in range(6)))

        answers = asyncio.run(many())
        assert all(a.status_code == 200 for a in answers)
        metrics = httpx.get(srv.url + "/metrics").text
        calls = float(next(line.split()[1] for line in metrics.splitlines()
                           if line.startswith("rewardkit_reward_composer_calls_total")))
        assert calls < 1 + 6  # some of the 6 concurrent requests shared a composer call
    finally:
        srv.stop()


def test_remote_budget_survives_restart(tmp_path: Path, slow_scorer: tuple) -> None:
    stub, url = slow_scorer
    stub.delay_s = 0.0
    config, state = remote_config(tmp_path, url), tmp_path / "state.json"
    first = Server(config, "--state", str(state))
    try:
        assert first.post(body()).json()["terms"]["rm"] == [float(len(a)) for a in ANSWERS]  # 4 of 10 requests
        first.post(body())  # 8 of 10
    finally:
        first.stop()
    assert json.loads(state.read_text())["budgets_spent"] == {"rm": 8}
    second = Server(config, "--state", str(state))
    try:
        rm = second.post(body()).json()["terms"]["rm"]
        assert sorted(rm).count(-1.0) == 2  # 2 requests left in the budget: the other 2 items get the default
    finally:
        second.stop()
    assert json.loads(state.read_text())["budgets_spent"] == {"rm": 10}


# ---- OpenRLHF's own client ------------------------------------------------------------------------
def test_openrlhf_reward_client(server: Server, config: Path) -> None:
    agent = pytest.importorskip("openrlhf.utils.agent", reason="pip install 'rewardkit[openrlhf]' && "
                                                               "pip install --no-deps openrlhf==0.11.2")
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=server.url + "/get_reward")
    queries = [p + a for p, a in zip(PROMPTS, ANSWERS, strict=True)]
    answers = asyncio.run(executor._fetch_rewards_via_http(queries, PROMPTS, LABELS))
    assert len(answers) == 1  # one server: the whole batch in one request
    want = in_process(RewardComposer.from_yaml(config))
    assert answers[0]["rewards"] == pytest.approx(want["rewards"], abs=1e-12)
    assert answers[0]["extra_logs"] == {k: pytest.approx(v, abs=1e-12) for k, v in want["extra_logs"].items()}


def test_openrlhf_single_turn_executor_end_to_end(server: Server, char_tokenizer) -> None:
    """OpenRLHF's rollout path for one sample: tokenize, generate (a stub engine), decode the query,
    post it to the reward server, and fill reward, scores and extra_logs as its trainer reads them."""
    agent = pytest.importorskip("openrlhf.utils.agent", reason="pip install 'rewardkit[openrlhf]' && "
                                                               "pip install --no-deps openrlhf==0.11.2")
    from types import SimpleNamespace

    tokenizer = char_tokenizer

    class Engine:
        async def generate(self, prompt_token_ids, params, multi_modal_data=None):
            ids = tokenizer(" 4", add_special_tokens=False)["input_ids"]
            return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=None)])

    executor = agent.SingleTurnAgentExecutor(remote_rm_url=[server.url + "/get_reward"])
    params = SimpleNamespace(max_tokens=16, logprobs=None)
    out = asyncio.run(executor.execute("Q: 2+2? A:", "4", params, 64, tokenizer, Engine()))
    assert out["reward"] == [2.0 + out["extra_logs"]["rewardkit/length"]]
    assert out["scores"] == out["reward"] and out["extra_logs"]["rewardkit/correct"] == 2.0


def test_without_the_serve_extra_the_command_names_the_install(config: Path) -> None:
    code = ("import sys\nsys.modules['starlette'] = None  # as if not installed\n"
            "from rewardkit.cli import main\n"
            f"raise SystemExit(main(['serve-reward', {str(config)!r}, '--port', '9']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'rewardkit[serve]'" in done.stderr.strip().splitlines()[-1]


def test_completions_are_cut_from_the_queries() -> None:
    """What follows the prompt; a query that does not start with its prompt is scored whole (and
    counted); --strip-suffix removes an end-of-turn marker OpenRLHF's decode keeps."""
    from rewardkit.serve_reward.protocol import parse_request

    req = parse_request(json.dumps({"query": ["<u>2+2<a> 4<|im_end|>", "other text"], "prompts": ["<u>2+2<a>", "<u>x"],
                                    "labels": ["4", None], "step": 3}).encode(), ["<|im_end|>"])
    assert req.completions == [" 4", "other text"] and req.mismatched == 1 and req.step == 3
    assert parse_request(b'{"query": ["abc"]}').completions == ["abc"]  # no prompts: the query is the completion


BUGGY = '''
from rewardkit import register
from rewardkit.components._text import TextReward


@register("fragile")
class Fragile(TextReward):
    """1.0, except that a completion saying "boom" raises (a component's bug)."""

    output_range = (0.0, 1.0)

    def score(self, text):
        if "boom" in text:
            raise RuntimeError("fragile: boom")
        return 1.0
'''


def test_a_components_bug_is_a_json_500_and_the_server_goes_on(tmp_path: Path) -> None:
    (tmp_path / "my_terms.py").write_text(BUGGY)
    config = tmp_path / "fragile.yaml"
    config.write_text("version: 1\ncomponents:\n  f: {type: fragile}\n")
    srv = Server(config, "--import", "my_terms", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
    try:
        got = srv.post({"query": ["fine", "boom"]})
        assert got.status_code == 500 and got.json()["error"]["message"] == "RuntimeError: fragile: boom"
        assert srv.post({"query": ["fine"]}).json()["rewards"] == [1.0]
    finally:
        printed = srv.stop()
    assert "Traceback" in printed and "fragile: boom" in printed  # logged for the operator
