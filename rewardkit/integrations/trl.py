"""TRL integration: a composer as GRPO ``reward_funcs``.

``TRLRewardFunctions(composer)`` gives ``funcs`` to pass as ``GRPOTrainer(reward_funcs=...)`` and
``reward_weights()`` to pass as ``GRPOConfig(reward_weights=...)``; ``bind(trainer)`` after.

**The context.** Without a ``features`` function each completion's context holds ``prompt`` (the
prompt's text: a plain prompt as is, a chat prompt's last user message), ``completion`` (the
generated text: a plain completion as is; of a chat completion, its first assistant message by
default, as TRL's own reward examples read ``completion[0]["content"]``: ``assistant_message="last"``
or ``"all"``, joined by newlines, choose otherwise; a message whose ``content`` is missing or
``None``, a tool-call turn, reads as ``""``; a chat completion with no assistant message at all is
an error naming it), ``completion_tokens`` (the number of the
completion's token ids, TRL's ``completion_ids``: what ``unit: tokens`` counts),
``completion_ids`` (those ids as text, ``"12 7 7"``, so word-level terms such as
``repetition_rate`` count tokens) and the row's dataset columns (numbers become a float array,
text stays a list of strings; a text term reads numbers as text). Only the keys the composer reads
are built. ``features(prompt, completion, **columns) -> {signal: number}``
replaces that with numbers computed by hand (checked as the composer checks inputs: ``"12"`` or
``True`` is an ``InvalidInputError``).

**Weights live in the reward config, applied once, by TRL.** ``per_term=True`` (the default) gives
one function per top-level term, named after it (TRL logs ``rewards/<term>/mean``), returning the
term's *unweighted* normalized value; the term's weight goes in TRL's ``reward_weights``, so TRL's
weighted sum is the composer's total. This is what keeps TRL's
``multi_objective_aggregation="normalize_then_sum"`` right: TRL standardizes each function within
its group, then weights, so a weight folded into the function would be standardized away. Pass
``reward_weights=rewards.reward_weights()`` and never weights of your own (``bind`` refuses
weights that differ from the config's). ``per_term=False`` gives one function, ``rewardkit_total``
(weight 1), for configs that transform the total.

**Schedules follow the trainer's step.** Each batch is evaluated at ``trainer_state.global_step``
(``clock="trainer"``, the default; ``clock="completions"`` uses the composer's own counter, which
advances by the completions scored). ``bind(trainer)`` copies the weights at that step into
``trainer.reward_weights`` before TRL sums; a scheduled weight in a trainer that was never bound is
an error, not a silently stale weight.

**Remote terms run as TRL async reward functions.** When the composer has an asynchronous term
(``remote_score``, ``judge``), every function is ``async`` and the batch is evaluated once with
``await composer.acall(...)`` on TRL's event loop: remote terms wait concurrently, the cheap ones
compute meanwhile, and the batch's functions share that one evaluation.

**Logs.** Per batch, through TRL's ``log_metric``: ``rewardkit/<term>/raw``, ``/weight``,
``/contribution`` (batch means) and a remote term's diagnostics (``/latency_s``, ``/cache_hits``,
...); through ``log_extra``, each completion's contributions in TRL's completions table.

**A term that does not apply** (``applies_to`` in the config) gives ``None`` for those samples from
its function, which TRL leaves out of that function's share of the reward; the total function
(``per_term=False``) sums the terms that apply. **An empty batch** (no completions) gives each
function an empty list without calling the composer (nothing is counted).

**Pickling.** ``funcs`` pickle (TRL's async trainer sends them to a spawned process): the copy
rebuilds the composer from its config and its state there. The copy has no trainer to move the
weights, so a per-term copy refuses scheduled weights (``per_term=False`` applies them itself).

**The shared core.** Contexts, the one evaluation per batch and the episode flags are
:class:`~rewardkit.integrations.text_scoring.TextScorer`'s, as for veRL and the reward server; what
this module keeps is TRL's own: chat messages made text, token ids, weights and ``bind``, the
batch's result shared by its functions, logs, and ``None`` for a term that does not apply.

The composer runs once per batch whatever its size; the result is shared by the batch's functions
only while the batch's contents are unchanged (a list edited in place is scored again). Each
completion is a one-step episode (``terminated=True``). Importing this module needs neither torch
nor TRL (``pip install rewardkit[trl]`` to train).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import pickle
from typing import Any, Callable, Mapping

import numpy as np

from ..composer import RewardComposer, RewardOutput
from ..errors import InvalidInputError
from ..inputs import TextColumn, TokenIdColumn
from ..params import describe
from .text_scoring import TextScorer, every_item_is, host

FeatureFn = Callable[..., Mapping[str, Any]]
# keyword arguments GRPOTrainer adds to the dataset columns; they are not per-sample values
TRAINER_KWARGS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric",
                            "environments"})
TOTAL_NAME = "rewardkit_total"
CLOCKS = ("trainer", "completions")
#: which assistant message of a chat completion is its text
ASSISTANT_MESSAGES = ("first", "last", "all")
#: context keys built from TRL's completion_ids: the count, and the ids as space-separated text
TOKENS_KEY, IDS_KEY = "completion_tokens", "completion_ids"


class TRLRewardFunctions:
    """TRL reward functions computed by one composer, evaluated once per batch.

    ``assistant_message`` says which message of a chat completion is the ``completion`` text:
    ``"first"`` (the default, as TRL's reward examples read ``completion[0]["content"]``),
    ``"last"`` (the final answer after tool calls) or ``"all"`` (the assistant messages joined by
    newlines).
    """

    def __init__(self, composer: RewardComposer, features: FeatureFn | None = None, *, per_term: bool = True,
                 clock: str = "trainer", assistant_message: str = "first") -> None:
        if features is not None and not callable(features):
            raise TypeError(f"features must be callable or None, got {features!r}")
        if clock not in CLOCKS:
            raise ValueError(f"clock: expected one of {', '.join(CLOCKS)}, got {clock!r}")
        if assistant_message not in ASSISTANT_MESSAGES:
            raise ValueError(f"assistant_message: expected one of {', '.join(map(repr, ASSISTANT_MESSAGES))}, "
                             f"got {assistant_message!r}")
        self.assistant_message = assistant_message
        self.composer = composer
        self.features = features
        self.per_term = per_term
        self.clock = clock
        self.term_names = tuple(n for n in composer.term_names if "/" not in n)
        if per_term and composer.transforms_total:
            raise ValueError("the config transforms the total, so the weighted sum of its terms is not the reward; "
                             "use TRLRewardFunctions(..., per_term=False)")
        self.asynchronous = composer.asynchronous
        #: the shared core: contexts, one evaluation per batch under a lock, episode flags
        self.scorer = TextScorer(composer, column="dataset column")
        self._trainer: Any = None
        #: whether this is a copy unpickled in another process (no trainer here to move the weights)
        self._copy = False
        self._reset_batch_cache()
        self.funcs: list[Callable[..., Any]] = (
            [self._function(name) for name in self.term_names] if per_term else [self._function(None)])

    # ---- what GRPOConfig / GRPOTrainer take --------------------------------------------------
    def reward_weights(self, step: int | None = None) -> list[float]:
        """One weight per function: the terms' weights at ``step`` (default: the last batch's step,
        or the composer's step before any batch); 1.0 for the total."""
        if not self.per_term:
            return [1.0]
        if step is None and self._out is not None:
            return [float(np.asarray(self._out.terms[n].weight).reshape(-1)[0]) for n in self.term_names]
        step = self.composer.step if step is None else step
        return [self.composer.shaper.weight(n, step) for n in self.term_names]

    def bind(self, trainer: Any) -> None:
        """Keep ``trainer.reward_weights`` equal to the config's weights at every batch.

        Refuses a trainer whose weights are not this config's (weights given twice, or functions
        that are not ``rewards.funcs``)."""
        if self.per_term:
            if len(trainer.reward_weights) != len(self.funcs):
                raise ValueError(f"the trainer has {len(trainer.reward_weights)} reward weights for "
                                 f"{len(self.funcs)} rewardkit functions; pass reward_funcs=rewards.funcs")
            expected = self.reward_weights(self._step(getattr(trainer, "state", None)))
            given = [float(w) for w in trainer.reward_weights]
            if not np.allclose(given, expected, rtol=1e-6, atol=1e-7):
                raise ValueError(f"GRPOConfig.reward_weights {given} are not the reward config's weights {expected}: "
                                 "the weights live in the config and TRL applies them once; pass "
                                 "reward_weights=rewards.reward_weights()")
        self._trainer = trainer

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> RewardOutput:
        """The composer's output for one batch (computed once, shared by the batch's functions)."""
        key = self._batch_key(prompts, completions, kwargs)
        if self._key is not None and self._out is not None and _same_batch(self._key, key):
            return self._out
        ctx, step, n = self._prepare(prompts, completions, kwargs)
        return self._finish(key, self.scorer.evaluate(ctx, n, step), kwargs)

    async def aevaluate(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> RewardOutput:
        """:meth:`evaluate` on the running event loop: the first function of a batch starts one
        ``composer.acall`` and the batch's other functions await the same evaluation."""
        key = self._batch_key(prompts, completions, kwargs)
        if self._key is not None and _same_batch(self._key, key):
            if self._pending is not None:
                return await asyncio.shield(self._pending)
            if self._out is not None:
                return self._out
        self._key, self._out = key, None
        self._pending = asyncio.ensure_future(self._acompute(prompts, completions, kwargs))
        try:
            return await asyncio.shield(self._pending)
        finally:
            if self._pending is not None and self._pending.done():
                self._pending = None

    async def _acompute(self, prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]) -> RewardOutput:
        try:
            ctx, step, n = self._prepare(prompts, completions, kwargs)
            out = await self.scorer.aevaluate(ctx, n, step)
        except BaseException:
            self._key = None
            raise
        return self._finish(self._key, out, kwargs)

    def _batch_key(self, prompts: Any, completions: Any, kwargs: Mapping[str, Any]) -> tuple[Any, Any, bytes | None]:
        if len(self.funcs) == 1:  # nothing to share a batch's result with: no fingerprint, never cached
            return prompts, completions, None
        columns = {k: v for k, v in kwargs.items() if k not in TRAINER_KWARGS}
        return prompts, completions, _fingerprint(prompts, completions, columns, self._step(kwargs.get("trainer_state")))

    def _step(self, trainer_state: Any) -> int | None:
        """The step a batch is evaluated at: the trainer's (clock="trainer") or the composer's own."""
        if self.clock == "trainer" and trainer_state is not None:
            return int(trainer_state.global_step)
        return None

    def _prepare(self, prompts: list[Any], completions: list[Any], kwargs: Mapping[str, Any]) -> tuple[dict, int | None, int]:
        """The batched context, the step to evaluate at and the batch size; checks the weights are bound."""
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"got {len(prompts)} prompts for {n} completions")
        columns = {k: v for k, v in kwargs.items() if k not in TRAINER_KWARGS}
        trainer_state = kwargs.get("trainer_state")
        if trainer_state is not None and self._trainer is None and self.per_term:
            scheduled = [name for name in self.term_names if not self.composer.shaper.is_constant(name)]
            if scheduled and self._copy:
                raise ValueError(f"the weights of {', '.join(scheduled)} follow a schedule, and this copy of the reward "
                                 "functions runs in another process than the trainer that applies them: use "
                                 "TRLRewardFunctions(..., per_term=False), whose one function applies the weights itself")
            if scheduled:
                raise ValueError(f"the weights of {', '.join(scheduled)} follow a schedule, and TRL applies the weights: "
                                 "call rewards.bind(trainer) after building the GRPOTrainer")
        if self.features is not None:
            for key, values in columns.items():  # every column goes to the features function, read or not
                self.scorer.column_value(key, values, n)
            ctx = self._features_context(prompts, completions, columns)
        else:
            ctx = self._text_context(prompts, completions, columns, kwargs.get(IDS_KEY))
        return ctx, self._step(trainer_state), n

    def _finish(self, key: Any, out: RewardOutput, kwargs: Mapping[str, Any]) -> RewardOutput:
        """Cache the batch's output, move the bound trainer's weights, log the breakdown."""
        self._key, self._out = key, out
        if self._trainer is not None and self.per_term:
            self._trainer.reward_weights.copy_(_tensor(self.reward_weights(), self._trainer.reward_weights))
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if log_metric is None and log_extra is None:
            return out
        terms = out.terms
        if log_metric is not None:
            for name in self.term_names:
                term = terms[name]
                log_metric(f"rewardkit/{name}/raw", float(np.mean(host(term.raw))))
                log_metric(f"rewardkit/{name}/weight", float(np.mean(host(term.weight))))
                log_metric(f"rewardkit/{name}/contribution", float(np.mean(host(term.contribution))))
                for info_key, value in (getattr(term, "info", None) or {}).items():
                    log_metric(f"rewardkit/{name}/{info_key}", float(value))
        if log_extra is not None:
            for name in self.term_names:
                log_extra(f"rewardkit/{name}", np.asarray(host(terms[name].contribution), dtype=np.float64).tolist())
        return out

    # ---- contexts ---------------------------------------------------------------------------
    def _text_context(self, prompts: list[Any], completions: list[Any], columns: dict[str, list],
                      kwargs_ids: Any = None) -> dict[str, Any]:
        """The context without ``features``: chat messages made text (what is TRL's own here), then
        the shared core's context: prompt and completion text, the token keys, the dataset columns."""
        reads = self.scorer.reads
        # text made here is checked once, marked as such (TextColumn), so the core does not check it again
        if "completion" in reads:
            completions = TextColumn(completions if every_item_is(completions, str) else
                                     [_completion_text_at(c, self.assistant_message, i) for i, c in enumerate(completions)])
        if "prompt" in reads:
            prompts = TextColumn(prompts if every_item_is(prompts, str) else [prompt_text(p) for p in prompts])
        n, ids = len(completions), []

        def token_lists() -> list[Any]:  # checked once for both keys
            if not ids:
                ids.append(token_ids(kwargs_ids, n=n))
            return ids[0]

        def counts() -> np.ndarray:  # counted as integers, then made floats (exact: under 2**53)
            return np.fromiter(map(len, token_lists()), dtype=np.int64, count=n).astype(np.float64)

        # the ids are read as "12 7 7" texts, or as the ids where that is the same
        return self.scorer.context(completions, prompts=prompts, columns=columns,
                                   derived={TOKENS_KEY: counts, IDS_KEY: lambda: TokenIdColumn(token_lists())})

    def _features_context(self, prompts: list[Any], completions: list[Any], columns: dict[str, list]) -> dict:
        rows = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            row = self.features(prompt, completion, **{k: v[i] for k, v in columns.items()})  # type: ignore[misc]
            if not isinstance(row, Mapping):
                raise TypeError(f"features must return a mapping of signal names to numbers, got "
                                f"{type(row).__name__} for completion {i}")
            for key, value in row.items():
                _check_number(value, key, i)
            rows.append(row)
        keys = list(rows[0]) if rows else []
        ctx = {}
        for key in keys:
            try:
                ctx[key] = np.asarray([row[key] for row in rows], dtype=np.float64)
            except KeyError:
                missing = next(i for i, row in enumerate(rows) if key not in row)
                raise ValueError(f"features returned {key!r} for completion 0 but not for completion {missing}") from None
        return ctx

    # ---- the functions TRL calls --------------------------------------------------------------
    def _function(self, name: str | None) -> Callable[..., Any]:
        """TRL's reward function for term ``name`` (None: the total); ``async`` when the composer
        has asynchronous terms. A callable object rather than a closure, so it pickles (TRL's async
        trainer sends ``reward_funcs`` to another process); TRL reads its ``__name__`` and the
        ``async`` of its ``__call__``."""
        return (_AsyncTermReward if self.asynchronous else _TermReward)(self, name)

    @staticmethod
    def _pick(name: str | None, out: RewardOutput) -> list[float | None]:
        """One function's values: the total, or one term's normalized values (None where it does not apply)."""
        if name is None:
            return np.asarray(host(out.total), dtype=np.float64).tolist()
        normalized, applies = out.normalized_of(name)  # not the whole breakdown: one term's values
        values = np.asarray(host(normalized), dtype=np.float64).tolist()
        if applies is None:
            return values
        applies = np.asarray(host(applies), dtype=bool).reshape(-1).tolist()
        return [v if a else None for v, a in zip(values, applies, strict=True)]

    # ---- pickling: TRL's async trainer scores in a spawned process -----------------------------
    def __getstate__(self) -> dict[str, Any]:
        """The composer (its config and state) and the options; the per-batch cache, the pending
        evaluation and the bound trainer stay in this process."""
        return {k: v for k, v in self.__dict__.items() if k not in _LOCAL_ATTRIBUTES}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_batch_cache()
        self._trainer, self._copy = None, True
        self.funcs = [self._function(n) for n in self.term_names] if self.per_term else [self._function(None)]

    def _reset_batch_cache(self) -> None:
        self._key: tuple[Any, Any, bytes | None] | None = None  # (prompts, completions, fingerprint) of the cache
        self._out: RewardOutput | None = None
        self._pending: asyncio.Future | None = None  # the async evaluation of the batch in self._key


class _TermReward:
    """One of TRL's reward functions: a term's values (or the total) from the batch's one evaluation."""

    def __init__(self, rewards: TRLRewardFunctions, name: str | None) -> None:
        self.rewards, self.name = rewards, name
        self.__name__ = self.__qualname__ = name or TOTAL_NAME  # TRL names its logs after __name__

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        if _empty(prompts, completions):
            return []
        return self.rewards._pick(self.name, self.rewards.evaluate(prompts, completions, **kwargs))

    def __repr__(self) -> str:
        return f"<rewardkit reward function {self.__name__}>"


class _AsyncTermReward(_TermReward):
    """:class:`_TermReward` for a composer with asynchronous terms: awaited on TRL's event loop."""

    async def __call__(self, prompts: list[Any], completions: list[Any],  # type: ignore[override]
                       **kwargs: Any) -> list[float | None]:
        if _empty(prompts, completions):
            return []
        return self.rewards._pick(self.name, await self.rewards.aevaluate(prompts, completions, **kwargs))


#: attributes that belong to one process: rebuilt after unpickling
_LOCAL_ATTRIBUTES = frozenset({"_trainer", "_key", "_out", "_pending", "funcs"})


# ---- text of prompts and completions --------------------------------------------------------
def prompt_text(prompt: Any) -> str:
    """A prompt's text: a string as is; a chat prompt (a list of messages): its last user message."""
    if isinstance(prompt, str):
        return prompt
    messages = _messages(prompt, "prompt")
    users = [m for m in messages if m.get("role") == "user"]
    return _content(users[-1] if users else messages[-1])


def completion_text(completion: Any, assistant_message: str = "first") -> str:
    """A completion's text: a string as is; of a chat completion, its ``"first"`` assistant message,
    its ``"last"``, or ``"all"`` of them joined by newlines.

    A chat completion with no assistant message is an ``InvalidInputError``: read as ``""`` it would
    earn what an empty reply earns (a length term's best), silently."""
    if isinstance(completion, str):
        return completion
    messages = _messages(completion, "completion")
    texts = [_content(m) for m in messages if m.get("role", "assistant") == "assistant"]
    if not texts:
        roles = ", ".join(sorted({str(m.get("role")) for m in messages}))
        raise InvalidInputError(f"completion: a chat completion with no assistant message (roles: {roles}); "
                                "expected at least one message with role 'assistant'")
    if assistant_message == "first":
        return texts[0]
    if assistant_message == "last":
        return texts[-1]
    return "\n".join(texts)


def _completion_text_at(completion: Any, assistant_message: str, index: int) -> str:
    """:func:`completion_text` with the completion's index in the error."""
    try:
        return completion_text(completion, assistant_message)
    except InvalidInputError as exc:
        raise InvalidInputError(f"completions[{index}]: {str(exc).removeprefix('completion: ')}") from None


def token_ids(ids: Any, n: int) -> list[Any]:
    """TRL's ``completion_ids`` checked: one sequence of token ids per completion."""
    if ids is None:
        raise ValueError(f"the reward counts tokens ({TOKENS_KEY!r} or {IDS_KEY!r}) but the trainer passed no "
                         "completion_ids (GRPOTrainer passes them; called by hand, pass completion_ids=[[ids...], ...])")
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__") or len(ids) != n:
        raise ValueError(f"completion_ids: expected one sequence of token ids per completion ({n}), got "
                         f"{type(ids).__name__} {describe(ids)}")
    if every_item_is(ids, list):  # what GRPOTrainer passes
        return ids
    out = []
    for i, seq in enumerate(ids):
        if hasattr(seq, "tolist"):
            seq = seq.tolist()
        if isinstance(seq, (str, bytes)) or not isinstance(seq, (list, tuple)):
            raise InvalidInputError(f"completion_ids[{i}]: expected a sequence of token ids, got "
                                    f"{type(seq).__name__} {describe(seq)}")
        out.append(seq)
    return out


def _messages(value: Any, what: str) -> list[Mapping[str, Any]]:
    if isinstance(value, (list, tuple)) and all(isinstance(m, Mapping) for m in value) and value:
        return list(value)
    raise InvalidInputError(f"{what}: expected a string or a list of chat messages ({{'role': ..., 'content': ...}}), "
                            f"got {type(value).__name__} {describe(value)}")


def _content(message: Mapping[str, Any]) -> str:
    """A message's text; multimodal content (a list of parts) keeps its text parts."""
    content = message.get("content")
    if content is None:  # no content key, or an explicit None (a tool-call turn): no text
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    raise InvalidInputError(f"chat message content: expected a string or a list of parts, got {type(content).__name__}")


# ---- asynchronous terms ---------------------------------------------------------------------
def is_async_reward(func: Any) -> bool:
    """Whether calling a reward function returns a coroutine: a coroutine function, a partial of
    one, or an object whose ``__call__`` is one (as TRL's own check reads ours)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


def has_async_terms(composer: RewardComposer) -> bool:
    """Whether some term of the composer waits on I/O (``composer.asynchronous``)."""
    return composer.asynchronous


# ---- helpers ----------------------------------------------------------------------------------
def _empty(prompts: Any, completions: Any) -> bool:
    """Whether TRL handed over an empty batch (its functions then return an empty list)."""
    return hasattr(completions, "__len__") and len(completions) == 0 and hasattr(prompts, "__len__") \
        and len(prompts) == 0


def _same_batch(a: tuple[Any, Any, bytes | None], b: tuple[Any, Any, bytes | None]) -> bool:
    """The same batch: the same list objects with the same contents (None: unpicklable, never cached)."""
    return a[0] is b[0] and a[1] is b[1] and a[2] is not None and a[2] == b[2]


def _fingerprint(prompts: Any, completions: Any, columns: dict[str, Any], step: int | None) -> bytes | None:
    """A digest of a batch's contents (None when they cannot be pickled: then nothing is cached)."""
    try:
        return hashlib.blake2b(pickle.dumps((prompts, completions, sorted(columns.items()), step), protocol=4),
                               digest_size=16).digest()
    except Exception:  # noqa: BLE001 - unpicklable dataset columns: compute every call
        return None


def _check_number(value: Any, key: str, index: int) -> None:
    """A features value must be a real number or an array of them, as the composer takes: no
    strings (``"12"``), booleans (``True``), None or complex numbers."""
    def bad(expected: str) -> InvalidInputError:
        return InvalidInputError(f"features returned {key!r} = {describe(value)} ({type(value).__name__}) for "
                                 f"completion {index}: expected {expected}")

    if isinstance(value, (bool, np.bool_)):
        raise bad("a number (booleans are not numbers here: use 1.0 or 0.0)")
    if isinstance(value, (int, float, np.integer, np.floating)):
        return
    if value is None or isinstance(value, (str, bytes, bytearray, Mapping)):
        raise bad("a number or an array of numbers")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise bad("a number or a rectangular array of numbers") from None
    if arr.dtype.kind not in "fiu":
        raise bad(f"real numbers, not values of dtype {arr.dtype}")


def _tensor(values: list[float], like: Any) -> Any:
    import torch  # TRL depends on torch; imported here so the module reads without it

    return torch.tensor(values, dtype=like.dtype, device=like.device)

