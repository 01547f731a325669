"""A small OpenAI-compatible engine for tests and the gateway benchmark: controllable speed and faults.

``StubEngine`` answers ``/v1/completions`` and ``/v1/chat/completions`` (plain or streamed, one
server-sent event per token after ``ttft_s``, then one every ``per_token_s``), ``/v1/models``,
``/health`` and ``/metrics`` (vLLM's metric names). ``mode`` makes it fail (500s and failing
health checks) or hang (no answer at all). It counts what it served and what clients abandoned.
``ServerThread`` runs any ASGI app with uvicorn on a background thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class StubEngine:
    """An engine whose speed and health the caller controls (see the module doc)."""

    name: str = "stub"
    ttft_s: float = 0.0
    per_token_s: float = 0.0
    mode: str = "ok"                  # ok | fail | hang
    #: load the stub reports on /metrics besides its own requests (other clients'), and its KV use
    extra_waiting: int = 0
    kv_usage: float = 0.0
    #: KV-cache blocks of 16 tokens the stub says it holds (``vllm:cache_config_info``)
    kv_blocks: int = 2048
    #: the model length: /v1/models says it (as vLLM does) and longer requests get vLLM's 400; None: no limit
    max_model_len: int | None = None
    served: int = 0
    cancelled: int = 0
    running: int = 0
    prompts: list[Any] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/health", self.health), Route("/metrics", self.metrics),
                                 Route("/v1/models", self.models),
                                 Route("/v1/completions", self.complete, methods=["POST"]),
                                 Route("/v1/chat/completions", self.complete, methods=["POST"])])

    async def _gate(self) -> Response | None:
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "fail":
            return JSONResponse({"error": {"message": "stub failure", "type": "server_error", "code": 500}},
                                status_code=500)
        return None

    async def health(self, request: Request) -> Response:
        return (await self._gate()) or PlainTextResponse("ok")

    async def models(self, request: Request) -> Response:
        model = {"id": "stub-model", "object": "model", "owned_by": self.name}
        if self.max_model_len is not None:
            model["max_model_len"] = self.max_model_len
        return JSONResponse({"object": "list", "data": [model]})

    async def metrics(self, request: Request) -> Response:
        text = (f"vllm:num_requests_running{{model_name=\"stub\"}} {self.running}\n"
                f"vllm:num_requests_waiting{{model_name=\"stub\"}} {self.extra_waiting}\n"
                f"vllm:kv_cache_usage_perc{{model_name=\"stub\"}} {self.kv_usage}\n"
                f"vllm:cache_config_info{{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"{self.kv_blocks}\"}} 1.0\n")
        return PlainTextResponse(text)

    async def complete(self, request: Request) -> Response:
        failed = await self._gate()
        if failed is not None:
            return failed
        payload = json.loads(await request.body())
        self.prompts.append(payload.get("prompt", payload.get("messages")))
        tokens = int(payload.get("max_tokens", 8))
        prompt = payload.get("prompt")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else max(1, len(str(prompt or "")) // 4)
        if self.max_model_len is not None and prompt_tokens + tokens > self.max_model_len:
            return JSONResponse({"error": {"message": f"This model's maximum context length is {self.max_model_len} "
                                           f"tokens. However, you requested {prompt_tokens + tokens} tokens",
                                           "type": "BadRequestError", "code": 400}}, status_code=400)
        if payload.get("stream"):
            usage = bool((payload.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(self._stream(tokens, prompt_tokens if usage else None), media_type="text/event-stream")
        self.running += 1
        try:
            await asyncio.sleep(self.ttft_s + self.per_token_s * max(tokens - 1, 0))
        finally:
            self.running -= 1
        self.served += 1
        return JSONResponse({"id": f"cmpl-{self.served}", "object": "text_completion", "model": "stub-model",
                             "choices": [{"index": 0, "text": "x" * tokens, "finish_reason": "length"}],
                             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                                       "total_tokens": prompt_tokens + tokens}, "served_by": self.name})

    async def _stream(self, tokens: int, usage_prompt: int | None = None) -> AsyncIterator[bytes]:
        self.running += 1
        finished = False
        try:
            await asyncio.sleep(self.ttft_s)
            for i in range(tokens):
                if i:
                    await asyncio.sleep(self.per_token_s)
                chunk = {"id": "cmpl-s", "object": "text_completion", "choices": [{"index": 0, "text": "x"}],
                         "served_by": self.name}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            final = {"id": "cmpl-s", "object": "text_completion", "choices": [{"index": 0, "text": "",
                                                                            "finish_reason": "length"}]}
            yield f"data: {json.dumps(final)}\n\n".encode()
            if usage_prompt is not None:  # as vLLM does with stream_options.include_usage
                usage = {"prompt_tokens": usage_prompt, "completion_tokens": tokens, "total_tokens": usage_prompt + tokens}
                yield f"data: {json.dumps({'id': 'cmpl-s', 'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"
            finished = True
            self.served += 1
        finally:
            self.running -= 1
            if not finished:
                self.cancelled += 1


class ServerThread:
    """Serve an ASGI app with uvicorn on 127.0.0.1:``port`` in a daemon thread (start/stop).

    ``lifespan``: uvicorn's setting; ``"off"`` for an app with no startup or shutdown of its own, whose
    lifespan task a forced stop would otherwise cancel with a traceback."""

    def __init__(self, app: Any, port: int, lifespan: str = "auto") -> None:
        self.app, self.port, self.lifespan = app, port, lifespan
        self.url = f"http://127.0.0.1:{port}"
        self.server: Any = None
        self.thread: threading.Thread | None = None

    def start(self, timeout_s: float = 20.0) -> "ServerThread":
        import uvicorn

        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error", access_log=False,
                                timeout_graceful_shutdown=5, lifespan=self.lifespan)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.server.force_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
