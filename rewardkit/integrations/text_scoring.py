"""``TextScorer``: one composer scoring batches of text completions, each a one-step episode.

The shared core of the trainer adapters that hand rewardkit plain lists (veRL's custom reward
functions, the HTTP reward server): it builds the context the composer reads (``completion``,
``prompt``, ``reference`` and per-sample columns), calls the composer once per batch under a lock
(trainers call from worker threads), and returns the total and each term's contribution as plain
floats.

Columns: numbers become a float64 array, anything else stays a list the composer checks (a text
term reading a number raises its located error). A column the composer reads (even an optional
one) that only some samples have is an error naming the key and the first sample without it.
"""

from __future__ import annotations

import asyncio
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..composer import RewardComposer, RewardOutput
from ..errors import InvalidInputError

#: context keys the adapters fill themselves; every other key a config reads comes from columns
BUILT_IN_KEYS = ("completion", "prompt", "reference")


@dataclass
class ScoredBatch:
    """A batch's rewards as plain Python: ``totals[i]`` and ``terms[name][i]`` (contributions)."""

    totals: list[float]
    terms: dict[str, list[float]]
    output: RewardOutput

    def row(self, i: int) -> dict[str, float]:
        """Sample ``i``'s contributions by term name."""
        return {name: values[i] for name, values in self.terms.items()}

    def term_means(self) -> dict[str, float]:
        """Each term's mean contribution over the batch (NaN for an empty batch)."""
        return {name: (sum(v) / len(v) if v else math.nan) for name, v in self.terms.items()}


def load_composer(config: Any) -> RewardComposer:
    """A composer from a YAML path, a config mapping or an existing composer (used as is)."""
    if isinstance(config, RewardComposer):
        return config
    if isinstance(config, Mapping):
        return RewardComposer.from_dict(config)
    return RewardComposer.from_yaml(config)


class TextScorer:
    """Scores text batches with one composer; safe to call from several threads (one call at a time)."""

    def __init__(self, composer: RewardComposer) -> None:
        self.composer = composer
        self.term_names = tuple(composer.term_names)
        self.reads = frozenset(composer.context_keys())
        self.required = frozenset(composer.required_context_keys())
        self.asynchronous = composer.asynchronous
        self._make_locks()

    def _make_locks(self) -> None:
        self._lock = threading.Lock()
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict[str, Any]:
        """The composer (its config and state) and what it reads; the locks belong to one process."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_alocks")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_locks()

    def context(self, completions: Sequence[Any], prompts: Sequence[Any] | None = None,
                references: Sequence[Any] | None = None,
                rows: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """The batched context: the keys the composer reads, one value per completion.

        ``rows`` holds each sample's own columns (veRL's ``extra_info``, a dataset row)."""
        n = len(completions)
        for what, values in (("prompts", prompts), ("references", references), ("rows", rows)):
            if values is not None and len(values) != n:
                raise InvalidInputError(f"{what}: expected one per completion ({n}), got {len(values)}")
        ctx: dict[str, Any] = {}
        for key in sorted(self.reads):
            if key == "completion":
                ctx[key] = [_text(c, "completion", i) for i, c in enumerate(completions)]
            elif key == "prompt" and prompts is not None:
                ctx[key] = [_text(p, "prompt", i) for i, p in enumerate(prompts)]
            elif key == "reference" and references is not None:
                ctx[key] = [_reference(r) for r in references]
            elif rows is not None and n and all(key in row for row in rows):
                ctx[key] = _column([row[key] for row in rows])
            elif key in self.required or (rows and any(key in row for row in rows)):
                raise InvalidInputError(self._missing(key, rows, prompts, references))
        return ctx

    def _missing(self, key: str, rows: Sequence[Mapping[str, Any]] | None, prompts: Any, references: Any) -> str:
        if rows and any(key in row for row in rows):
            first = next(i for i, row in enumerate(rows) if key not in row)
            return f"the reward reads {key!r}, which sample {first} lacks (the others have it)"
        available = ["completion"] + (["prompt"] if prompts is not None else []) + (
            ["reference"] if references is not None else []) + sorted({k for row in rows or () for k in row})
        return (f"the reward reads {key!r}, which is none of the keys given (available: {', '.join(available)}); "
                "add it to each sample's columns or map the term's inputs to one of these")

    # ---- evaluation -------------------------------------------------------------------------
    def score(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> ScoredBatch:
        """Evaluate ``n`` one-step episodes at ``step`` (None: the composer's own counter)."""
        with self._lock:
            self.composer.reset()  # batch sizes change between calls; each completion is an episode
            out = self.composer(ctx, step=step, terminated=np.ones(n, dtype=bool), truncated=np.zeros(n, dtype=bool))
        return self._scored(out, n)

    async def ascore(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> ScoredBatch:
        """:meth:`score` on the running loop: remote terms wait concurrently (``composer.acall``).

        Without remote terms the call runs on the loop itself: cheap terms are CPU work under the
        GIL, and a worker thread would only add a GIL hand-over (up to 5 ms on a busy loop)."""
        if not self.asynchronous:
            return self.score(ctx, n, step)
        loop = asyncio.get_running_loop()
        alock = self._alocks.get(loop) or self._alocks.setdefault(loop, asyncio.Lock())
        async with alock:
            with self._lock:
                self.composer.reset()
                out = await self.composer.acall(ctx, step=step, terminated=np.ones(n, dtype=bool),
                                                truncated=np.zeros(n, dtype=bool))
        return self._scored(out, n)

    def locked(self) -> threading.Lock:
        """The lock every composer call holds: hold it to read the composer's state between calls."""
        return self._lock

    def _scored(self, out: RewardOutput, n: int) -> ScoredBatch:
        totals = _floats(out.total, n)
        terms = {name: _floats(out.terms[name].contribution, n) for name in self.term_names}
        return ScoredBatch(totals, terms, out)


def _floats(values: Any, n: int) -> list[float]:
    arr = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    return np.broadcast_to(np.asarray(arr, dtype=np.float64).reshape(-1), (n,)).tolist()


def _text(value: Any, what: str, index: int) -> str:
    if isinstance(value, str):
        return value
    raise InvalidInputError(f"{what} {index}: expected a string, got {type(value).__name__}")


def _reference(value: Any) -> Any:
    """A reference answer: text as is; a number as its text (``72`` -> ``"72"``); anything else as
    given (a text term reading it raises its located error)."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return str(value.item() if isinstance(value, np.generic) else value)
    return value


def _column(values: list[Any]) -> Any:
    """Numbers become a float64 array; anything else a list."""
    if values and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                      for v in values):
        return np.asarray(values, dtype=np.float64)
    return list(values)
