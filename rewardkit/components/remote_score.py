"""``remote_score``: the score an HTTP scorer (a reward model, a classifier, any service) gives each completion."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Sequence

from ..params import describe, is_finite_number
from ..registry import register
from ..remote.batching import Unscored
from ..remote.http import MalformedAnswer
from ..remote.term_params import REMOTE_PARAMS, url_param
from ..remote.stats import CallStats
from ..remote.term import RemoteTerm


@register("remote_score")
class RemoteScore(RemoteTerm):
    """scores[i] from POST url {prompts, completions}: whatever range the scorer answers in.

    Sends ``{"prompts": [...], "completions": [...]}`` (prompts from the context key ``prompt``,
    empty strings when the context has none) in batches of ``batch_size`` and reads
    ``{"scores": [...]}``: one finite number per completion sent, in order. Batches go out
    concurrently (at most ``max_concurrency`` in flight), each request times out after
    ``timeout_s`` and transient failures are retried with exponential backoff; the same prompt
    and completion are scored once (``cache_size``); ``max_requests`` and ``max_call_s`` are
    budgets. An item that cannot be scored raises a ``RemoteScoreError`` naming the term and the
    URL, or gets ``default`` with ``on_failure: default``. Latency, requests, failures, cache
    hits, defaults used and spend show in the breakdown (``TermOutput.info``). See
    docs/remote-terms.md.
    """

    params = {"url": url_param("scorer endpoint: POST {prompts, completions}, answer {scores}"), **REMOTE_PARAMS}
    output_range = (-math.inf, math.inf)

    async def score_batch(self, keys: list[tuple[str, str]], stats: CallStats) -> Sequence[float | Unscored]:
        payload = {"prompts": [prompt for prompt, _ in keys], "completions": [completion for _, completion in keys]}
        return await self._client.post(payload, partial(read_scores, n=len(keys)), self._budget, stats)


def read_scores(body: Any, n: int) -> list[float]:
    """The ``scores`` of a scorer's answer: ``n`` finite numbers, else :class:`MalformedAnswer` saying what was wrong."""
    if not isinstance(body, dict) or "scores" not in body:
        raise MalformedAnswer(f"expected a JSON object with 'scores', got {describe(body)}")
    scores = body["scores"]
    if not isinstance(scores, list):
        raise MalformedAnswer(f"expected 'scores' to be a list of {n} numbers, got {describe(scores)}")
    if len(scores) != n:
        raise MalformedAnswer(f"expected {n} scores (one per completion sent), got {len(scores)}")
    for score in scores:
        if not is_finite_number(score):
            raise MalformedAnswer(f"expected finite numbers in 'scores', got {describe(score)}")
    return [float(score) for score in scores]
