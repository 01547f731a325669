"""Stub remote scorers for the remote reward terms' tests and benchmark: controllable speed and faults.

``StubScorer`` answers ``POST /score`` (``{"prompts", "completions"}`` -> ``{"scores"}``, the
score of a completion being its length in characters) after ``delay_s``; ``mode`` makes it
fail: ``fail`` (HTTP 500), ``garbage`` (200 with a body that is not JSON), ``wrong_length`` (one
score too few), ``hang`` (no answer at all); ``fail_first`` makes only its first N requests
fail with 500. ``StubJudge`` answers ``/v1/chat/completions`` and ``/v1/completions`` the way
vLLM does, with first-token ``top_logprobs``: a completion containing ``good`` gets most of its
probability on ``9``, any other most on ``1`` (``logprobs: false`` in ``mode`` drops them, so
only the text answers). Both record each request's arrival time and the most requests in
flight at once. Serve them with ``schedulers.engines.stub.ServerThread``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


@dataclass
class _Recorder:
    """Arrival times, batch sizes and the peak number of requests in flight."""

    arrivals: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    #: requests still running from before the last reset() leave the new counts alone
    generation: int = 0

    def reset(self) -> None:
        self.arrivals.clear()
        self.batch_sizes.clear()
        self.in_flight = self.peak_in_flight = 0
        self.generation += 1

    def enter(self, batch: int) -> int:
        """Count a request in; returns the token to hand :meth:`leave`."""
        self.arrivals.append(time.monotonic())
        self.batch_sizes.append(batch)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return self.generation

    def leave(self, generation: int) -> None:
        if generation == self.generation:
            self.in_flight -= 1


@dataclass
class StubScorer(_Recorder):
    """A reward-model server whose speed and faults the caller controls (see the module doc)."""

    delay_s: float = 0.0
    mode: str = "ok"  # ok | fail | garbage | wrong_length | hang
    fail_first: int = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/score", self.score, methods=["POST"])])

    async def score(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        completions = payload["completions"]
        if self.mode == "hang":  # arrives, never answers (and never counts as in flight afterwards)
            self.arrivals.append(time.monotonic())
            await asyncio.sleep(3600)
        token = self.enter(len(completions))
        try:
            await asyncio.sleep(self.delay_s)
            if self.mode == "fail" or len(self.arrivals) <= self.fail_first:
                return JSONResponse({"error": "stub failure"}, status_code=500)
            if self.mode == "garbage":
                return PlainTextResponse("<html>502 Bad Gateway</html>")
            scores = [float(len(c)) for c in completions]
            return JSONResponse({"scores": scores[:-1] if self.mode == "wrong_length" else scores})
        finally:
            self.leave(token)


@dataclass
class StubJudge(_Recorder):
    """An OpenAI-compatible judge: ``good`` in the completion means a 9, anything else a 1 (see the module doc)."""

    delay_s: float = 0.0
    logprobs: bool = True

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                 Route("/v1/completions", self.complete, methods=["POST"])])

    @staticmethod
    def _verdict(question: str) -> tuple[str, list[tuple[str, float]]]:
        best, other = ("9", "1") if "good" in question else ("1", "9")
        return best, [(best, math.log(0.8)), (" " + other, math.log(0.15)), ("The", math.log(0.05))]

    async def chat(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        token = self.enter(1)
        try:
            await asyncio.sleep(self.delay_s)
            answer, top = self._verdict(payload["messages"][-1]["content"])
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": answer},
                                      "finish_reason": "stop", "logprobs": None}
            if self.logprobs and payload.get("logprobs"):
                alternatives = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
                choice["logprobs"] = {"content": [{"token": answer, "logprob": top[0][1], "bytes": list(answer.encode()),
                                                   "top_logprobs": alternatives}]}
            return JSONResponse({"id": "chat-stub", "object": "chat.completion", "choices": [choice]})
        finally:
            self.leave(token)

    async def complete(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        prompts = payload["prompt"] if isinstance(payload["prompt"], list) else [payload["prompt"]]
        token = self.enter(len(prompts))
        try:
            await asyncio.sleep(self.delay_s)
            choices = []
            for i, prompt in enumerate(prompts):
                answer, top = self._verdict(prompt)
                logprobs = None
                if self.logprobs and payload.get("logprobs"):
                    logprobs = {"tokens": [answer], "token_logprobs": [top[0][1]], "top_logprobs": [dict(top)]}
                choices.append({"index": i, "text": f" {answer}", "logprobs": logprobs, "finish_reason": "stop"})
            return JSONResponse({"id": "cmpl-stub", "object": "text_completion", "choices": choices[::-1]})
        finally:
            self.leave(token)
