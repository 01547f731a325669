"""The length components' fast paths (``length_penalty``, ``length_target``, ``overlong_penalty``):
the same numbers as their definition (:class:`rewardkit.components._length.LengthReward` and each
component's ``of_lengths``), computed faster.

- :func:`compute_fast`: texts counted by C-level maps and packed as int64 in one call; no
  saturation where no result can leave the float range (a bound per component, :data:`LARGEST`);
  ``length_target``'s arithmetic in one NumPy array (:data:`ARITHMETIC`);
- :func:`scalar_fn`: with ``unit: tokens``, ``of_length`` on the number itself (the text units keep
  the base's function, ``score`` on the text).

:func:`attach` sets them on each length component; the component tests prove each equal to the definition.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Mapping

import numpy as np

from ...backend import call_dtype, float_max, quiet, saturate
from ...base import Array
from .._length import LONGEST_TEXT, TOKENS_KEY, LengthReward
from .._text import TextReward


def compute_fast(self: LengthReward, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
    """The definition's ``compute``: texts counted in C, unsaturated where nothing can overflow."""
    of_lengths = self._of_lengths_fast or self.of_lengths
    if self.unit == "tokens":
        lengths = x[TOKENS_KEY]
    else:  # the lengths of the texts, then the same array maths as tokens
        texts = x["completion"]  # counted by C-level maps, packed as int64 in one call, read as an array
        counts = map(len, map(str.split, texts)) if self.unit == "words" else map(len, texts)
        packed = struct.pack(f"{len(texts)}q", *counts)
        lengths = np.frombuffer(packed, dtype=np.int64).astype(call_dtype(np.float64))
        # a Python length is at most 2**63: when no result can then leave the float range
        # (twice the bound, for the rounding of float32), saturating would change nothing
        if 2.0 * self._largest_magnitude(LONGEST_TEXT) <= float_max(lengths):
            with quiet():
                return of_lengths(lengths)
    with quiet():
        return saturate(of_lengths(lengths))


def penalty_bound(self: Any, longest: float) -> float:
    """``length_penalty``: ``abs(of_length(n)) <= per_unit * longest`` for ``n <= longest``."""
    return self.per_unit * longest


def target_bound(self: Any, longest: float) -> float:
    """``length_target``: ``abs(of_length(n)) <= per_unit * (longest + target)`` for ``n <= longest``."""
    return self.per_unit * (longest + self.target)


def overlong_bound(self: Any, longest: float) -> float:
    """``overlong_penalty``: every value lies in [-1, 0]."""
    return 1.0


#: type name -> a bound on ``abs(of_length(n))`` for every length ``n <= longest``
LARGEST: dict[str, Callable[[Any, float], float]] = {
    "length_penalty": penalty_bound,
    "length_target": target_bound,
    "overlong_penalty": overlong_bound,
}


def target_lengths(self: Any, lengths: Any) -> Any:
    """``length_target``'s ``of_lengths`` in one new NumPy array (``-(a * p)`` is ``a * -p``), else the definition."""
    if lengths.__class__ is np.ndarray:
        away = lengths - self.target
        np.abs(away, away)  # out given by position: the ufunc's quicker call
        return np.multiply(away, -self.per_unit, away)
    return self.of_lengths(lengths)


#: type name -> a faster ``of_lengths`` giving the same numbers (the others use their own)
ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {"length_target": target_lengths}


def scalar_fn(self: LengthReward) -> Callable[..., float]:
    """With ``unit: tokens``, ``of_length`` on the number for the scalar path; text: ``score`` on it."""
    if self.unit != "tokens":
        return TextReward.scalar_fn(self)
    of_length = self.of_length

    def one_env(tokens: float, terminated: bool, truncated: bool) -> float:
        return of_length(tokens)

    return one_env


def attach(cls: type[LengthReward]) -> None:
    """Give a length component its fast paths (the composer prefers them; the definition stays ``compute``)."""
    cls.compute_fast = compute_fast  # type: ignore[attr-defined]
    cls.scalar_fn = scalar_fn  # type: ignore[method-assign]
    cls._largest_magnitude = LARGEST[cls.type_name]  # type: ignore[attr-defined]
    cls._of_lengths_fast = ARITHMETIC.get(cls.type_name)  # type: ignore[attr-defined]
