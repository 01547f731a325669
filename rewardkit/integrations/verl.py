"""veRL integration: a reward config as veRL's custom reward function.

``make_compute_score(config)`` returns ``compute_score(data_source, solution_str, ground_truth,
extra_info=None, **kwargs)``, the signature veRL's reward managers call one sample at a time
(``reward.custom_reward_function.path`` / ``name`` in veRL's config). It returns the total, or
with ``return_dict=True`` a dict with ``score`` (the total) and each term's contribution under the
term's name, which veRL logs as metrics. ``make_batch_compute_score(config)`` returns the form
veRL's ``BatchRewardManager`` calls: ``compute_score(data_sources, solution_strs, ground_truths,
extra_infos, **kwargs)`` returning one value (or dict) per sample, from one composer call.
``make_async_compute_score(config)`` is the per-sample form as a coroutine function, for veRL
0.9's reward loop (its default path), which awaits it for every sample of a chunk at once: the
samples that wait while a composer call runs share the next call, so the loop scores in batches
too, and remote terms run on its event loop.

**The context.** ``completion`` is the decoded response, ``reference`` the ground truth (a number
becomes its text), and every key of ``extra_info`` plus ``data_source`` is a column (so a
``prompt`` or ``question`` stored in ``extra_info`` by the dataset's preprocessing is readable).

**The step.** Schedules read ``extra_info["global_step"]`` (or ``"global_steps"``, the name veRL
uses in its batches' ``meta_info``) when the sample carries it. veRL 0.9 does not put the step
there: its reward managers pass the dataset row's ``extra_info`` plus ``num_turns`` and
``rollout_reward_scores``. Without it, the step is ``completions scored // completions_per_step``
when that is given (``train_batch_size * rollout.n / reward.num_workers`` makes it veRL's own step
count: each reward worker scores an equal share of a batch), else the composer's own counter, which
advances by one per completion scored.

Each function holds one composer, called under a lock (veRL's reward loop calls a synchronous
function from a thread pool). ``compute_score.composer`` is that composer (``state_dict()`` to
checkpoint it). veRL runs one copy of the function per reward worker: normalizer statistics and
counters are per worker. The per-sample and batched functions pickle (a Ray worker or a spawned
process gets a copy rebuilt from the config and the composer's state at pickling time); the batched
form returns ``[]`` for an empty batch. Importing this module needs neither torch nor veRL.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Callable, Mapping, Sequence

from ..errors import InvalidInputError
from .coalescer import Coalescer
from .text_scoring import ScoredBatch, TextScorer, load_composer

STEP_KEYS = ("global_step", "global_steps")

ComputeScore = Callable[..., Any]


class _Clock:
    """The step a batch is evaluated at: the samples' own, else completions scored // completions_per_step,
    else None (the composer's counter)."""

    def __init__(self, completions_per_step: int | None) -> None:
        if completions_per_step is not None and (isinstance(completions_per_step, bool)
                                                 or not isinstance(completions_per_step, int) or completions_per_step < 1):
            raise ValueError(f"completions_per_step: expected an integer >= 1 or None, got {completions_per_step!r}")
        self.completions_per_step = completions_per_step
        self.scored = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def step(self, extra_infos: Sequence[Mapping[str, Any]]) -> int | None:
        """The step for these samples (call :meth:`scored_ok` once they are scored)."""
        given = {_step_of(info, i) for i, info in enumerate(extra_infos)} - {None}
        before = self.scored
        if len(given) > 1:
            raise InvalidInputError(f"extra_info: the samples of one batch carry different training steps {sorted(given)}; "
                                    "a batch is evaluated at one step")
        if given:
            return given.pop()
        if self.completions_per_step is not None:
            return before // self.completions_per_step
        return None

    def scored_ok(self, n: int) -> None:
        """Count ``n`` completions scored (a call that raised counts nothing)."""
        with self._lock:
            self.scored += n


def _step_of(extra_info: Mapping[str, Any], index: int) -> int | None:
    for key in STEP_KEYS:
        if key in extra_info and extra_info[key] is not None:
            value = extra_info[key]
            if hasattr(value, "item"):
                value = value.item()
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"extra_info[{key!r}] of sample {index}: expected a non-negative integer "
                                        f"training step, got {value!r}")
            return value
    return None


def _setup(config: Any, return_dict: bool, completions_per_step: int | None) -> tuple[TextScorer, _Clock]:
    scorer = TextScorer(load_composer(config))
    if return_dict and "score" in scorer.term_names:
        raise ValueError("a term is named 'score', which veRL reads as the total in return_dict=True mode; rename the term")
    return scorer, _Clock(completions_per_step)


def _rows(data_sources: Sequence[Any], extra_infos: Sequence[Any] | None, n: int) -> list[dict[str, Any]]:
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if len(infos) != n:
        raise InvalidInputError(f"extra_infos: expected one per solution ({n}), got {len(infos)}")
    rows = []
    for i, (source, info) in enumerate(zip(data_sources, infos, strict=True)):
        if info is not None and not isinstance(info, Mapping):
            raise InvalidInputError(f"extra_info of sample {i}: expected a mapping or None, got {type(info).__name__}")
        rows.append({**(info or {}), "data_source": source})
    return rows


def _result(scored: ScoredBatch, i: int, return_dict: bool) -> float | dict[str, float]:
    if return_dict:
        return {"score": scored.totals[i], **scored.row(i)}
    return scored.totals[i]


class _ComputeScore:
    """veRL's per-sample custom reward function; an object rather than a closure so that it pickles
    (veRL's reward workers and Ray actors receive it by pickle): the copy rebuilds the composer from
    its config and state."""

    def __init__(self, config: Any, return_dict: bool, completions_per_step: int | None) -> None:
        self.scorer, self.clock = _setup(config, return_dict, completions_per_step)
        self.return_dict = return_dict
        self.composer = self.scorer.composer
        self.__name__ = self.__qualname__ = "compute_score"

    def __call__(self, data_source: Any, solution_str: str, ground_truth: Any,
                 extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> float | dict[str, float]:
        rows = _rows([data_source], [extra_info], 1)
        ctx = self.scorer.context([solution_str], references=[ground_truth], rows=rows)
        scored = self.scorer.score(ctx, 1, self.clock.step(rows))
        self.clock.scored_ok(1)
        return _result(scored, 0, self.return_dict)


class _BatchComputeScore(_ComputeScore):
    """veRL's batched custom reward function (``BatchRewardManager``): one composer call per batch."""

    def __call__(self, data_sources: Sequence[Any], solution_strs: Sequence[str],  # type: ignore[override]
                 ground_truths: Sequence[Any], extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
                 **kwargs: Any) -> list[float] | list[dict[str, float]]:
        n = len(solution_strs)
        if len(data_sources) != n or len(ground_truths) != n:
            raise InvalidInputError(f"got {n} solutions, {len(data_sources)} data sources and "
                                    f"{len(ground_truths)} ground truths; expected one of each per sample")
        rows = _rows(data_sources, extra_infos, n)
        if n == 0:  # an empty batch scores nothing (the composer is not called, the clock does not move)
            return []
        ctx = self.scorer.context(list(solution_strs), references=list(ground_truths), rows=rows)
        scored = self.scorer.score(ctx, n, self.clock.step(rows))
        self.clock.scored_ok(n)
        return [_result(scored, i, self.return_dict) for i in range(n)]


def make_compute_score(config: str | Any, return_dict: bool = False, *,
                       completions_per_step: int | None = None) -> ComputeScore:
    """veRL's per-sample custom reward function for a reward config (a YAML path, a mapping or a
    :class:`~rewardkit.RewardComposer`); it pickles."""
    return _ComputeScore(config, return_dict, completions_per_step)


def make_batch_compute_score(config: str | Any, return_dict: bool = False, *,
                             completions_per_step: int | None = None) -> ComputeScore:
    """veRL's batched custom reward function (``BatchRewardManager``): one composer call per batch;
    an empty batch gives an empty list; it pickles."""
    return _BatchComputeScore(config, return_dict, completions_per_step)


def make_async_compute_score(config: str | Any, return_dict: bool = False, *, completions_per_step: int | None = None,
                             max_batch: int = 4096) -> ComputeScore:
    """veRL's per-sample custom reward as a coroutine function: concurrent samples on one event
    loop share composer calls (at most ``max_batch`` completions per call)."""
    scorer, clock = _setup(config, return_dict, completions_per_step)
    coalescers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Coalescer] = weakref.WeakKeyDictionary()

    async def compute_score(data_source: Any, solution_str: str, ground_truth: Any,
                            extra_info: Mapping[str, Any] | None = None, **kwargs: Any) -> float | dict[str, float]:
        rows = _rows([data_source], [extra_info], 1)
        ctx = scorer.context([solution_str], references=[ground_truth], rows=rows)
        loop = asyncio.get_running_loop()
        coalescer = coalescers.get(loop) or coalescers.setdefault(loop, Coalescer(scorer, max_batch))
        scored = await coalescer.score(ctx, 1, clock.step(rows))
        clock.scored_ok(1)
        return _result(scored.batch, scored.start, return_dict)

    compute_score.composer = scorer.composer  # type: ignore[attr-defined]
    return compute_score


__all__ = ["make_compute_score", "make_batch_compute_score", "make_async_compute_score"]
