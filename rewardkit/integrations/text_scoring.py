"""``TextScorer``: one composer scoring batches of text completions, each a one-step episode.

The shared core of the trainer adapters (TRL's reward functions, veRL's custom reward functions,
the HTTP reward server, ``rewardkit stress``): it builds the context the composer reads
(``completion``, ``prompt``, ``reference``, the samples' columns and keys an adapter derives
itself), calls the composer once per batch under a lock (trainers call from worker threads) and
hands back the output, or the total and each term's contribution as plain floats.

Columns: a column a text term reads stays the list it is (numbers are read as their text, integers
as their digits); numbers become a float64 array; anything else stays a list the composer checks.
A column the composer reads (even an optional one) that only some samples have is an error naming
the key and the first sample without it.
"""

from __future__ import annotations

import asyncio
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..composer import RewardComposer, RewardOutput
from ..errors import InvalidInputError
from ..inputs import TextColumn

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
    """Scores text batches with one composer; safe to call from several threads (one call at a time).

    ``column`` names the samples' own columns in errors (``"dataset column"`` for TRL)."""

    def __init__(self, composer: RewardComposer, *, column: str = "sample column") -> None:
        self.composer = composer
        self.column = column
        self.term_names = tuple(composer.term_names)
        self.reads = frozenset(composer.context_keys())
        self.required = frozenset(composer.required_context_keys())
        self.text_keys = composer.text_keys
        self.asynchronous = composer.asynchronous
        #: whether composer.reset() clears anything (stateful components, normalizers): else it is skipped
        self.stateful = composer.stateful
        self._sorted_reads = tuple(sorted(self.reads))
        self._flags: tuple[int, np.ndarray, np.ndarray] = (-1, np.ones(0, dtype=bool), np.zeros(0, dtype=bool))
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
                references: Sequence[Any] | None = None, rows: Sequence[Mapping[str, Any]] | None = None, *,
                columns: Mapping[str, Sequence[Any]] | None = None,
                derived: Mapping[str, Callable[[], Any]] | None = None) -> dict[str, Any]:
        """The batched context: the keys the composer reads, one value per completion.

        The samples' own columns come per sample (``rows``: veRL's ``extra_info``) or by name
        (``columns``: a dataset's columns, one value per completion each). ``derived`` maps keys the
        adapter computes itself to a function building the batch's value, called only when the
        composer reads the key and no column has that name (TRL's token counts)."""
        n = len(completions)
        for what, values in (("prompts", prompts), ("references", references), ("rows", rows)):
            if values is not None and len(values) != n:
                raise InvalidInputError(f"{what}: expected one per completion ({n}), got {len(values)}")
        columns = columns or {}
        ctx: dict[str, Any] = {}
        for key in self._sorted_reads:
            if key == "completion":
                ctx[key] = _text_column(completions, "completion")
            elif key == "prompt" and prompts is not None:
                ctx[key] = _text_column(prompts, "prompt")
            elif key == "reference" and references is not None:
                ctx[key] = [_reference(r) for r in references]
            elif key in columns:
                ctx[key] = self.column_value(key, columns[key], n)
            elif derived and key in derived:
                ctx[key] = derived[key]()
            elif rows is not None and n and all(key in row for row in rows):
                ctx[key] = self.column_value(key, [row[key] for row in rows], n)
            elif key in self.required or (rows and any(key in row for row in rows)):
                raise InvalidInputError(self._missing(key, rows, prompts, references, columns, derived))
        return ctx

    def column_value(self, key: str, values: Any, n: int) -> Any:
        """One column of the samples as the composer takes it (see the module docstring)."""
        if not isinstance(values, (list, tuple)) or len(values) != n:
            length = len(values) if hasattr(values, "__len__") else "?"
            raise InvalidInputError(f"{self.column} {key!r}: expected one value per completion ({n}), "
                                    f"got {type(values).__name__} of length {length}")
        return list(values) if key in self.text_keys else _numbers_or_list(values)

    def _missing(self, key: str, rows: Sequence[Mapping[str, Any]] | None, prompts: Any, references: Any,
                 columns: Mapping[str, Any], derived: Mapping[str, Any] | None) -> str:
        if rows and any(key in row for row in rows):
            first = next(i for i, row in enumerate(rows) if key not in row)
            return f"the reward reads {key!r}, which sample {first} lacks (the others have it)"
        given = (["prompt"] if prompts is not None else []) + ["completion"] + (
            ["reference"] if references is not None else [])
        available = given + list(derived or ()) + sorted(set(columns) | {k for row in rows or () for k in row})
        return (f"the reward reads {key!r}, which is neither {', '.join('the ' + g for g in given)} nor a "
                f"{self.column} (available: {', '.join(available)}); add the {self.column} or map the term's "
                "inputs to one of these")

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> RewardOutput:
        """The composer's output for ``n`` one-step episodes at ``step`` (None: the composer's own counter)."""
        terminated, truncated = self._episode_flags(n)
        with self._lock:
            if self.stateful:
                self.composer.reset()  # batch sizes change between calls; each completion is an episode
            return self.composer.evaluate_batch(ctx, step, terminated, truncated)

    async def aevaluate(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> RewardOutput:
        """:meth:`evaluate` on the running loop: remote terms wait concurrently (``composer.acall``).

        Without remote terms the call runs on the loop itself: cheap terms are CPU work under the
        GIL, and a worker thread would only add a GIL hand-over (up to 5 ms on a busy loop)."""
        if not self.asynchronous:
            return self.evaluate(ctx, n, step)
        terminated, truncated = self._episode_flags(n)
        loop = asyncio.get_running_loop()
        alock = self._alocks.get(loop) or self._alocks.setdefault(loop, asyncio.Lock())
        async with alock:
            with self._lock:
                if self.stateful:
                    self.composer.reset()
                return await self.composer.acall(ctx, step=step, terminated=terminated, truncated=truncated)

    def score(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> ScoredBatch:
        """:meth:`evaluate`, the total and each term's contribution as plain floats."""
        return self._scored(self.evaluate(ctx, n, step), n)

    async def ascore(self, ctx: Mapping[str, Any], n: int, step: int | None = None) -> ScoredBatch:
        """:meth:`aevaluate`, as plain floats."""
        return self._scored(await self.aevaluate(ctx, n, step), n)

    def locked(self) -> threading.Lock:
        """The lock every composer call holds: hold it to read the composer's state between calls."""
        return self._lock

    def _episode_flags(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``terminated`` (all True: each completion is a one-step episode) and ``truncated`` (all
        False) for ``n`` completions: read-only arrays kept while the batch size stays the same."""
        flags = self._flags
        if flags[0] != n:
            terminated, truncated = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
            terminated.flags.writeable = truncated.flags.writeable = False
            self._flags = flags = (n, terminated, truncated)
        return flags[1], flags[2]

    def _scored(self, out: RewardOutput, n: int) -> ScoredBatch:
        totals = as_floats(out.total, n)
        terms = {name: as_floats(out.terms[name].contribution, n) for name in self.term_names}
        return ScoredBatch(totals, terms, out)


def host(values: Any) -> Any:
    """An output value as something NumPy reads (torch tensors come back to the CPU)."""
    return values.detach().cpu().numpy() if hasattr(values, "detach") else values


def as_floats(values: Any, n: int) -> list[float]:
    """An output value (a number or one per sample, any array library) as ``n`` Python floats."""
    return np.broadcast_to(np.asarray(host(values), dtype=np.float64).reshape(-1), (n,)).tolist()


def _text_column(values: Sequence[Any], what: str) -> TextColumn:
    """Texts checked to be ``str`` (the error names the first that is not), marked so the composer
    does not check them again."""
    if values.__class__ is TextColumn:  # checked by its maker
        return values
    if every_item_is(values, str):
        return TextColumn(values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise InvalidInputError(f"{what} {i}: expected a string, got {type(value).__name__}")
    return TextColumn(values)


def every_item_is(values: Any, kind: type) -> bool:
    """Whether every item's type is exactly ``kind`` (one C pass and a count; none is all)."""
    kinds = [*map(type, values)]
    return not kinds or (kinds[0] is kind and kinds.count(kind) == len(kinds))


def _reference(value: Any) -> Any:
    """A reference answer: text as is; a number as its text (``72`` -> ``"72"``); anything else as
    given (a text term reading it raises its located error)."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return str(value.item() if isinstance(value, np.generic) else value)
    return value


def _numbers_or_list(values: Sequence[Any]) -> Any:
    """A column of real numbers as a float64 array; anything else as a list the composer checks
    (a bad value is its located error)."""
    if every_item_is(values, float) or every_item_is(values, int) or all(  # one C pass each: booleans are neither
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in values):
        return np.asarray(values, dtype=np.float64)
    return list(values)
