"""``RemoteTerm``: the base class of reward components scored by an HTTP service.

It reads text inputs (``completion``, and ``prompt`` when the context has it), implements the
composer's asynchronous seam (``asynchronous = True``, ``compute_async``, ``last_call_info``) on
top of :func:`~rewardkit.remote.batching.score_items`, and applies the failure policy: an item
that could not be scored gets ``default`` (``on_failure: default``) or the call raises a
:class:`~rewardkit.errors.RemoteScoreError` naming the term, the URL and what went wrong. A
subclass says how to score one batch (:meth:`RemoteTerm.score_batch`).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from ..base import Array, BaseReward
from ..errors import ConfigError, InvalidInputError, RemoteScoreError
from ..params import describe
from .batching import Unscored, score_items
from .budget import RequestBudget
from .cache import ScoreCache
from .http import RemoteClient, import_httpx
from .stats import CallStats
from .term_params import TRANSPORT_PARAMS, redacted


class RemoteTerm(BaseReward):
    """A term whose value per item comes from a remote scorer (see the module doc).

    Subclasses declare ``params`` (``url`` plus :data:`~rewardkit.remote.term_params.REMOTE_PARAMS`)
    and implement :meth:`score_batch`.
    """

    asynchronous = True
    #: left out of the composer's state fingerprint: where the scorer lives and how it is reached
    transport_params = TRANSPORT_PARAMS
    inputs = {"completion": 0, "prompt": 0}
    optional_inputs = frozenset({"prompt"})
    text_inputs = frozenset({"completion", "prompt"})

    def _validate(self) -> None:
        try:
            import_httpx(self.type_name or type(self).__name__)
        except ImportError as exc:
            raise ConfigError(str(exc)) from None
        low, high = self.output_range
        if not low <= self.default <= high:
            raise ConfigError(f"expected a number in [{low:g}, {high:g}] (the term's range), got {self.default!r}",
                              path="params.default")
        if self.api_key_env is not None and self.api_key_env not in os.environ:
            raise ConfigError(f"expected the name of a set environment variable, got {self.api_key_env!r} (not set)",
                              path="params.api_key_env")
        self._client = RemoteClient(self.url, max_concurrency=self.max_concurrency, timeout_s=self.timeout_s,
                                    retries=self.retries, backoff_s=self.backoff_s, api_key_env=self.api_key_env,
                                    component=self.type_name or type(self).__name__,
                                    max_answer_bytes=self.max_answer_bytes)
        #: the URL as messages show it (credentials as ***)
        self.shown_url = redacted(self.url)
        self._cache = ScoreCache(self.cache_size)
        self._budget = RequestBudget(self.max_requests)
        self._last = CallStats()

    async def score_batch(self, keys: list[tuple[str, str]], stats: CallStats) -> Sequence[float | Unscored]:
        """Scores of a batch of ``(prompt, completion)`` pairs, in order (an :class:`Unscored` for an
        item answered without a usable score). Send requests with ``self._client.post(payload, read,
        self._budget, stats)``, which raises ``RequestFailed`` when every try failed."""
        raise NotImplementedError

    async def compute_async(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        """One score per item of ``x["completion"]`` (a list of str), float64; see the module doc."""
        completions = self._texts(x, "completion")
        prompts = self._texts(x, "prompt") if "prompt" in x else [""] * len(completions)
        if len(prompts) != len(completions):
            raise InvalidInputError(f"{self.name}: context key {self.input_keys['prompt']!r}: expected "
                                    f"{len(completions)} prompts (one per completion), got {len(prompts)}")
        stats = self._last = CallStats(spend_requests=self._budget.spent)
        keys: list[Hashable] = list(zip(prompts, completions, strict=True))
        start = time.perf_counter()
        try:
            outcome = await score_items(keys, lambda batch: self.score_batch(batch, stats), cache=self._cache,
                                        batch_size=self.batch_size, max_call_s=self.max_call_s, stats=stats)
        finally:
            stats.latency_s = time.perf_counter() - start
        missing = sum(value is None for value in outcome.values)
        if missing:
            if self.on_failure == "raise":
                reason = self._client.hide_secrets(str(outcome.reason))
                raise RemoteScoreError(f"{self.name}: {self.shown_url}: {missing} of {len(keys)} item(s) not scored: "
                                       f"{reason}")
            stats.defaults_used = missing
        return np.array([self.default if v is None else v for v in outcome.values], dtype=np.float64)

    def compute(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        """The same as :meth:`compute_async`, for plain code outside an event loop (the composer
        awaits :meth:`compute_async` instead). Runs a private event loop for the call."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._compute_then_close(x, terminated, truncated))
        raise RuntimeError(f"{self.name}: compute() runs its own event loop and cannot be called from a running "
                           "one; await compute_async() (or composer.acall()) instead")

    def scalar_fn(self) -> Callable[..., float]:
        """One item through :meth:`compute` (the composer never calls it: a config with an
        asynchronous term always takes the batched path)."""
        compute = self.compute

        def one_item(completion: str, prompt: str | None, terminated: bool, truncated: bool) -> float:
            x = {"completion": [completion]} if prompt is None else {"completion": [completion], "prompt": [prompt]}
            flags = np.zeros(1, dtype=bool)
            return float(compute(x, flags, flags)[0])

        return one_item

    async def _compute_then_close(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        try:
            return await self.compute_async(x, terminated, truncated)
        finally:
            await self.aclose()

    def last_call_info(self) -> dict[str, float]:
        """The last call's latency, requests, failures, cache hits, defaults used and spend (see ``CallStats``)."""
        return self._last.as_info()

    @property
    def budget(self) -> RequestBudget:
        """The term's request budget (``max_requests``, and what it has spent): shared by every call."""
        return self._budget

    @property
    def spent_requests(self) -> int:
        """Requests sent over the term's life (what ``max_requests`` limits); saved in the
        composer's ``state_dict`` (``spent_requests``), so a restored run keeps to its budget."""
        return self._budget.spent

    def load_spent_requests(self, spent: Any) -> None:
        """Restore :attr:`spent_requests` (a non-negative integer, else ``ValueError``)."""
        if isinstance(spent, bool) or not isinstance(spent, int) or spent < 0:
            raise ValueError(f"expected a non-negative integer (requests sent), got {describe(spent)}")
        self._budget.spent = spent

    async def aclose(self) -> None:
        """Close this loop's HTTP connections (a later call opens new ones)."""
        await self._client.aclose()

    def _texts(self, x: Mapping[str, Any], name: str) -> list[str]:
        """Input ``name`` as a list of str, or ``InvalidInputError`` naming its context key."""
        value = x[name]
        items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if items is None or not all(isinstance(item, str) for item in items):
            bad = value if items is None else next(item for item in items if not isinstance(item, str))
            raise InvalidInputError(f"{self.name}: context key {self.input_keys[name]!r}: expected a list of str (one "
                                    f"text per item), got {type(bad).__name__} {describe(bad)}")
        return [str(item) for item in items]

