"""``rewardkit loadgen``: workloads (lengths, shared prefixes, traces), the replay's timing, the CLI's errors."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from rewardkit.cli import main as rewardkit_main
from schedulers.loadgen.runner import format_summary, replay, summarize
from schedulers.loadgen.sources import lengths_from_trace
from schedulers.shared.arrivals import poisson_arrival_times
from schedulers.shared.engine_requests import request_body
from schedulers.shared.requests import Lengths, RequestSpec, SharedPrefix, WorkloadError, build_requests


def lengths(n: int = 20, prompt: int = 300, output: int = 100) -> Lengths:
    return Lengths(np.arange(n) * 0.01, np.full(n, prompt), np.full(n, output))


def test_lengths_are_scaled_then_shortened_in_proportion_to_fit_the_engine() -> None:
    base = Lengths(np.zeros(3), np.array([1000, 40, 3000]), np.array([200, 8, 1000]))
    fitted = base.fitted(scale=0.5, max_model_len=512)
    total = fitted.prompt_tokens + fitted.output_tokens
    assert np.all(total <= 512)
    np.testing.assert_array_equal(fitted.prompt_tokens[1:2], [20])  # short ones only scaled
    np.testing.assert_array_equal(fitted.output_tokens[1:2], [4])
    # a long one keeps its prompt:output proportion (3:1) within a token
    assert abs(fitted.prompt_tokens[2] / fitted.output_tokens[2] - 3.0) < 0.05
    with pytest.raises(WorkloadError, match="--length-scale"):
        base.fitted(scale=0)


def test_plain_prompts_have_the_workload_lengths_and_no_special_tokens() -> None:
    specs = build_requests(lengths(), seed=3, vocab_size=50)
    assert [s.prompt_tokens for s in specs] == [300] * 20
    ids = np.concatenate([s.prompt_ids for s in specs])
    assert ids.min() >= 3 and ids.max() < 50
    assert build_requests(lengths(), seed=3, vocab_size=50)[5].prompt_ids == specs[5].prompt_ids  # seeded


def test_shared_prefix_requests_start_with_their_groups_system_prompt() -> None:
    specs = build_requests(lengths(40, 50, 10), seed=1, shared=SharedPrefix(groups=3, prefix_tokens=64))
    systems: dict[int, tuple[int, ...]] = {}
    for s in specs:
        assert s.shared_tokens == 64 and s.prompt_tokens == 114
        assert systems.setdefault(s.group, s.prompt_ids[:64]) == s.prompt_ids[:64]
    assert len(set(systems.values())) == len(systems) >= 2


def test_sessions_repeat_earlier_turns_and_leave_out_the_oldest_before_outgrowing_the_model() -> None:
    """As chat clients do: a conversation past the model length keeps its latest turns, not none of them."""
    specs = build_requests(lengths(30, 40, 20), seed=2, shared=SharedPrefix(2, 32, sessions=3), max_model_len=256)
    by_session: dict[int, list[RequestSpec]] = {}
    for s in specs:
        assert s.prompt_tokens + s.output_tokens <= 256
        by_session.setdefault(s.session, []).append(s)
    assert sorted(by_session) == [0, 1, 2]
    shortened = 0
    for turns in by_session.values():
        for prev, cur in zip(turns[:-1], turns[1:], strict=True):
            own = prev.prompt_ids[prev.shared_tokens:]
            history = cur.prompt_ids[32:cur.shared_tokens]
            if cur.dropped_turns == 0:
                assert cur.prompt_ids[:prev.prompt_tokens] == prev.prompt_ids
                assert cur.shared_tokens == prev.prompt_tokens + prev.output_tokens
            else:
                shortened += 1  # the latest turn is kept: the previous request's own part, then its answer
                assert history[len(history) - prev.output_tokens - len(own):len(history) - prev.output_tokens] == own
                assert cur.shortened
    assert shortened >= 1 and shortened == sum(s.shortened for s in specs)


def test_shared_prefix_option_is_parsed_with_a_located_error() -> None:
    assert SharedPrefix.parse("4:128", 2) == SharedPrefix(4, 128, 2)
    with pytest.raises(WorkloadError, match="--shared-prefix: expected GROUPS:TOKENS"):
        SharedPrefix.parse("4x128")


def test_trace_lengths_and_arrivals_with_located_errors(tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n1.5,10,5\n2.0,20,6\n4.0,30,7\n")
    got = lengths_from_trace(str(trace), seed=0)
    np.testing.assert_allclose(got.arrival_s, [0.0, 0.5, 2.5])
    np.testing.assert_array_equal(got.prompt_tokens, [10, 20, 30])
    assert len(lengths_from_trace(str(trace), seed=0, requests=2)) == 2
    paced = lengths_from_trace(str(trace), seed=0, qps=2.0)  # --qps replaces the trace's times
    times = poisson_arrival_times(3, 2.0, 0)  # the simulator's loop, from 0
    np.testing.assert_allclose(paced.arrival_s, times - times[0])
    bad = tmp_path / "bad.csv"
    bad.write_text("num_prefill_tokens,num_decode_tokens\n10,5\n-3,5\n")
    with pytest.raises(WorkloadError, match=r"bad\.csv: line 3: expected whole token counts from 0 to 2\^53"):
        lengths_from_trace(str(bad), seed=0, qps=1.0)
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("prompt,output\n1,2\n")
    with pytest.raises(WorkloadError, match="expected a column 'num_prefill_tokens'"):
        lengths_from_trace(str(nocol), seed=0, qps=1.0)
    notimes = tmp_path / "notimes.csv"
    notimes.write_text("num_prefill_tokens,num_decode_tokens\n10,5\n")
    with pytest.raises(WorkloadError, match="give --qps"):
        lengths_from_trace(str(notimes), seed=0)


def test_env_workload_is_the_simulators_arrivals() -> None:
    pytest.importorskip("vidur")
    from schedulers.loadgen.sources import lengths_from_env
    from schedulers.shared.arrivals import sample_arrivals
    from schedulers.sim.env_config import load_env_config

    got = lengths_from_env("configs/envs/tiny.yaml", seed=101, requests=30)
    ref = sample_arrivals(load_env_config("configs/envs/tiny.yaml", {"requests_per_episode": 30}), 101)
    np.testing.assert_allclose(got.arrival_s, ref.arrived_at - ref.arrived_at[0])
    np.testing.assert_array_equal(got.prompt_tokens, ref.prefill_tokens)
    np.testing.assert_array_equal(got.output_tokens, ref.decode_tokens)


def test_request_bodies_for_both_apis() -> None:
    spec = RequestSpec(0, 0.0, (5, 6, 7), 4)
    body = request_body(spec, "m", "completions", "ids", stream=True, ignore_eos=True)
    assert body["prompt"] == [5, 6, 7] and body["max_tokens"] == 4 and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True}
    chat = request_body(spec, "m", "chat", "ids", stream=False, ignore_eos=False)
    assert chat["messages"][0]["content"] == spec.prompt_text() and "ignore_eos" not in chat


class StreamingEndpoint:
    """A real streaming completions server on localhost: first token after ``delay_first``, then one
    per ``gap``; every ``fail_every``-th request a 500."""

    def __init__(self, delay_first: float = 0.05, gap: float = 0.02, fail_every: int = 0) -> None:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, StreamingResponse
        from starlette.routing import Route

        from schedulers.engines.replicas import free_port
        from schedulers.engines.stub import ServerThread

        calls = {"n": 0}

        async def handler(request):
            body = json.loads(await request.body())
            calls["n"] += 1
            if fail_every and calls["n"] % fail_every == 0:
                return JSONResponse({"error": {"message": "boom"}}, status_code=500)
            n = body["max_tokens"]

            async def stream():
                await asyncio.sleep(delay_first)
                for i in range(n):
                    if i:
                        await asyncio.sleep(gap)
                    yield f"data: {json.dumps({'choices': [{'index': 0, 'text': 'x'}]})}\n\n".encode()
                usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": n}
                yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(stream(), headers={"x-rewardkit-replica": str(calls["n"] % 2)},
                                     media_type="text/event-stream")

        app = Starlette(routes=[Route("/v1/completions", handler, methods=["POST"])])
        self.server = ServerThread(app, free_port()).start()
        self.url = self.server.url

    def __enter__(self) -> "StreamingEndpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()


def test_replay_measures_ttft_itl_and_e2e_of_every_request() -> None:
    specs = [RequestSpec(i, 0.05 * i, (3, 4, 5, 6), 5) for i in range(6)]
    with StreamingEndpoint() as endpoint:
        records, wall = asyncio.run(replay(endpoint.url, specs, model="m"))
    assert all(r.ok for r in records), [r.error for r in records]
    for r in records:
        assert 0.045 <= r.ttft_s < 0.5
        assert len(r.itl_s) == 4 and all(0.015 <= x < 0.5 for x in r.itl_s)
        assert r.e2e_s >= r.ttft_s + sum(r.itl_s) - 1e-3
        assert r.output_tokens == 5 and r.usage_prompt_tokens == 4
    assert [r.sent_s >= r.arrival_s - 0.01 for r in records] == [True] * 6  # open loop: sent on schedule
    summary = summarize(records, wall)
    assert summary["completed"] == 6 and summary["failed"] == 0
    assert summary["per_replica"] == {"0": 3, "1": 3}
    assert 45 <= summary["ttft_ms"]["p50"] < 500 and summary["itl_ms"]["p99"] >= summary["itl_ms"]["p50"]
    assert "TTFT" in format_summary(summary)


def test_replay_records_failures_and_respects_the_duration_bound() -> None:
    specs = [RequestSpec(i, 0.02 * i, (3, 4), 2) for i in range(10)]
    with StreamingEndpoint(0.01, 0.01, fail_every=3) as endpoint:
        records, _ = asyncio.run(replay(endpoint.url, specs, model="m", duration_s=0.1))
    sent = [r for r in records if r.sent_s is not None]
    assert len(sent) == 6  # arrivals 0.00-0.10 s
    assert all(r.error == "not sent: past --duration" for r in records[6:])
    failed = [r for r in sent if not r.ok]
    assert len(failed) == 2 and all(r.status == 500 and "boom" in r.error for r in failed)
    assert summarize(records, 1.0)["failed"] == 6


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "localhost:8000"], "--url: expected http://HOST:PORT"),
        (["--url", "http://127.0.0.1:9", "--trace", "/no/such.csv"], "--trace /no/such.csv: no such file"),
        (["--url", "http://127.0.0.1:9", "--requests", "0", "--model", "m"], "--requests: expected an integer from 1 to"),
        (["--url", "http://127.0.0.1:9", "--seed", "-1", "--model", "m"], "--seed: expected an integer from 0 to 4294967295"),
        (["--url", "http://127.0.0.1:9", "--length-scale", "1e308", "--model", "m"],
         "--length-scale: expected a number from 0.0001 to 100, got 1e+308"),
        (["--url", "http://127.0.0.1:9", "--vocab-size", "100000000000000000000", "--model", "m"],
         "--vocab-size: expected an integer from 5 to 16777216"),
        (["--url", "http://127.0.0.1:9", "--timeout", "nan", "--model", "m"], "--timeout: expected a number"),
        (["--url", "http://127.0.0.1:9", "--shared-prefix", "100000:100000", "--model", "m"],
         "--shared-prefix TOKENS: expected an integer from 1 to 32768, got 100000"),
        (["--url", "http://127.0.0.1:9", "--shared-prefix", "100000:32768", "--model", "m"],
         "--shared-prefix: expected at most 10000000 system-prompt tokens in all"),
        (["--url", "http://127.0.0.1:9", "--out", "OUT_UNDER_A_FILE", "--model", "m"], "cannot write it"),
        (["--url", "http://127.0.0.1:9", "--out", "OUT_FOLDER", "--model", "m"], "expected a file, got a folder"),
        (["--url", "http://127.0.0.1:9", "--sessions", "2", "--model", "m", "--trace", "TRACE"],
         "--sessions: needs --shared-prefix"),
    ],
)
def test_cli_errors_are_one_line_with_exit_2(argv, message, capsys, tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n10,5\n")
    names = {"TRACE": str(trace), "OUT_UNDER_A_FILE": str(trace / "out.json"), "OUT_FOLDER": str(tmp_path)}
    argv = [names.get(a, a) for a in argv]
    if "--trace" in argv and "--qps" not in argv:
        argv += ["--qps", "1"]
    assert rewardkit_main(["loadgen", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
