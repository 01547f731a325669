"""The machinery of remote reward terms: components whose value comes from an HTTP service.

``remote_score`` (any scorer: a reward model, a classifier) and ``judge`` (an OpenAI-compatible
language model asked a rubric question) are built from these parts, one idea a module:

- :mod:`.http`: the HTTP client (httpx, imported lazily): at most N requests in flight, a
  timeout per request, retries with exponential backoff on transient failures;
- :mod:`.cache`: scores by content, so the same prompt and completion are scored once;
- :mod:`.budget`: requests a term may spend over its life;
- :mod:`.batching`: one call's items split into batches, sent concurrently within a wall-time
  budget, with cache hits and duplicates left out;
- :mod:`.stats`: what one call did (latency, requests, failures, cache hits, defaults used,
  spend), shown in the composer's breakdown as ``TermOutput.info``;
- :mod:`.params`: the parameters every remote term shares;
- :mod:`.term`: :class:`RemoteTerm`, the base class of both components (failure policy, text
  inputs, the asynchronous seam);
- :mod:`.judge_answers`: reading a score from an OpenAI-compatible answer (logprobs or text).

Installing httpx is the ``remote`` extra (``pip install 'rewardkit[remote]'``); ``import
rewardkit`` works without it, and building a remote term without it is a located ``ConfigError``
naming the extra.
"""

from __future__ import annotations

from .budget import RequestBudget
from .cache import ScoreCache
from .stats import CallStats
from .term import RemoteTerm

__all__ = ["CallStats", "RemoteTerm", "RequestBudget", "ScoreCache"]
