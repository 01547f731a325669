"""TRL integration: a composer as GRPO ``reward_funcs``.

``TRLRewardFunctions(composer, features)`` gives ``funcs`` to pass as ``GRPOTrainer(reward_funcs=...)``
and ``reward_weights()`` to pass as ``GRPOConfig(reward_weights=...)``:

- ``per_term=True`` (the default): one function per top-level term, named after it, so TRL logs
  each (``rewards/<term>/mean``). Each returns the term's normalized value and its weight goes in
  ``reward_weights``, so TRL's weighted sum is the composer's total. Weight schedules move with
  the composer's step; call ``bind(trainer)`` and the trainer's weights follow them each batch.
- ``per_term=False``: one function, ``rewardkit_total``, returning the composed total (weight 1).
  Each term's mean contribution is logged through TRL's ``log_metric`` as ``rewardkit/<term>``.

``features(prompt, completion, **columns) -> {signal: float}`` builds one completion's context
from its prompt, its completion and that row's dataset columns (TRL passes every column except
``prompt``; ``completion_ids`` is among them). Its per-sample results are stacked into one
batched context and the composer is evaluated once per batch, whatever its size (the batch's
output is reused by its other functions only while the batch's contents are unchanged: a list
edited in place is scored again). Its values are checked as the composer checks inputs: a
string such as ``"12"`` or a boolean is an ``InvalidInputError``, not 12.0 or 1.0. Each
completion is a one-step episode (``terminated=True``), so stateful components start afresh
every batch. The composer's step counts completions scored, which drives weight schedules.
Importing this module imports torch and trl (an optional extra: ``pip install rewardkit[trl]``).
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any, Callable, Mapping

import numpy as np

from ..composer import RewardComposer, RewardOutput
from ..errors import InvalidInputError
from ..params import describe

FeatureFn = Callable[..., Mapping[str, Any]]
# keyword arguments GRPOTrainer adds to the dataset columns; they are not per-sample values
TRAINER_KWARGS = frozenset({"prompts", "completions", "trainer_state", "log_extra", "log_metric", "environments"})
TOTAL_NAME = "rewardkit_total"


class TRLRewardFunctions:
    """TRL reward functions computed by one composer, evaluated once per batch."""

    def __init__(self, composer: RewardComposer, features: FeatureFn, *, per_term: bool = True) -> None:
        if not callable(features):
            raise TypeError(f"features must be callable, got {features!r}")
        self.composer = composer
        self.features = features
        self.per_term = per_term
        self.term_names = tuple(n for n in composer.term_names if "/" not in n)
        if per_term and composer.spec.total_transforms:
            raise ValueError("the config transforms the total, so the weighted sum of its terms is not the reward; "
                             "use TRLRewardFunctions(..., per_term=False)")
        self._trainer: Any = None
        self._batch: tuple[Any, Any] | None = None  # (prompts, completions) of the cached output
        self._out: RewardOutput | None = None
        self._fingerprint: bytes | None = None  # the cached batch's contents, so an in-place edit is seen
        self.funcs: list[Callable[..., list[float]]] = (
            [self._term_function(name) for name in self.term_names] if per_term else [self._total_function()])

    # ---- what GRPOConfig / GRPOTrainer take --------------------------------------------------
    def reward_weights(self) -> list[float]:
        """One weight per function: the terms' weights at the composer's step (1.0 for the total)."""
        if not self.per_term:
            return [1.0]
        if self._out is not None:
            return [float(np.asarray(self._out.terms[n].weight).reshape(-1)[0]) for n in self.term_names]
        return [self.composer.shaper.weight(n, self.composer.step) for n in self.term_names]

    def bind(self, trainer: Any) -> None:
        """Keep ``trainer.reward_weights`` equal to the composer's weights at every batch."""
        if self.per_term and len(trainer.reward_weights) != len(self.funcs):
            raise ValueError(f"the trainer has {len(trainer.reward_weights)} reward weights for "
                             f"{len(self.funcs)} rewardkit functions; pass reward_funcs=rewards.funcs")
        self._trainer = trainer

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> RewardOutput:
        """The composer's output for one batch (computed once, shared by the batch's functions)."""
        columns = {k: v for k, v in kwargs.items() if k not in TRAINER_KWARGS}
        fingerprint = _fingerprint(prompts, completions, columns)
        if (self._batch is not None and self._batch[0] is prompts and self._batch[1] is completions
                and fingerprint is not None and fingerprint == self._fingerprint):
            return self._out  # type: ignore[return-value]
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"got {len(prompts)} prompts for {n} completions")
        for key, values in columns.items():
            if not isinstance(values, (list, tuple)) or len(values) != n:
                raise ValueError(f"dataset column {key!r}: expected one value per completion ({n}), "
                                 f"got {type(values).__name__} of length {len(values) if hasattr(values, '__len__') else '?'}")
        ctx = self._batched_context(prompts, completions, columns)
        done = np.ones(n, dtype=bool)
        self.composer.reset()  # the batch size may change between calls; each completion is an episode
        out = self.composer(ctx, terminated=done, truncated=np.zeros(n, dtype=bool))
        self._batch, self._out, self._fingerprint = (prompts, completions), out, fingerprint
        if self._trainer is not None and self.per_term:
            self._trainer.reward_weights.copy_(_tensor(self.reward_weights(), self._trainer.reward_weights))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for name in self.term_names:
                log_metric(f"rewardkit/{name}/weight", float(np.mean(out.terms[name].weight)))
                log_metric(f"rewardkit/{name}/contribution", float(np.mean(out.terms[name].contribution)))
        return out

    def _batched_context(self, prompts: list[Any], completions: list[Any], columns: dict[str, list]) -> dict:
        rows = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            row = self.features(prompt, completion, **{k: v[i] for k, v in columns.items()})
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

    def _term_function(self, name: str) -> Callable[..., list[float]]:
        def term_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
            return np.asarray(self.evaluate(prompts, completions, **kwargs).terms[name].normalized,
                              dtype=np.float64).tolist()

        term_reward.__name__ = term_reward.__qualname__ = name  # TRL names its logs after __name__
        return term_reward

    def _total_function(self) -> Callable[..., list[float]]:
        def rewardkit_total(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
            return np.asarray(self.evaluate(prompts, completions, **kwargs).total, dtype=np.float64).tolist()

        rewardkit_total.__name__ = TOTAL_NAME
        return rewardkit_total


def _fingerprint(prompts: Any, completions: Any, columns: dict[str, Any]) -> bytes | None:
    """A digest of a batch's contents (None when they cannot be pickled: then nothing is cached)."""
    try:
        return hashlib.blake2b(pickle.dumps((prompts, completions, sorted(columns.items())), protocol=4),
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
