"""Shared base of the text components: a score per completion, the same function on both paths.

A text component reads one ``str`` per environment (``text_inputs``): the composer hands
``compute`` a list of ``str`` per input and the one-environment function a ``str``. Subclasses
implement :meth:`TextReward.score` on plain strings; ``compute`` maps it over the batch, so the
batched and the scalar path run the very same code.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..backend import call_dtype, quiet, saturate
from ..base import Array, BaseReward


class TextReward(BaseReward):
    """A component scoring text: ``score(*texts) -> float`` per environment (inputs in declaration order)."""

    inputs = {"completion": 0}
    text_inputs = frozenset({"completion"})

    def score(self, *texts: str) -> float:
        """The raw value for one environment's texts (one ``str`` per input, in ``inputs`` order)."""
        raise NotImplementedError

    def compute(self, x: Mapping[str, Any], terminated: Array, truncated: Array) -> Array:
        columns = [x[name] for name in self.inputs]
        n = len(columns[0])
        values = np.fromiter(map(self.score, *columns), dtype=np.float64, count=n)
        dtype = call_dtype(np.float64)  # float32 contexts stay float32 (the dtype policy); text alone: float64
        if dtype != np.float64:  # beyond float32's range saturates at its largest finite value, never +-inf
            with quiet():
                values = saturate(values.astype(dtype))
        return values

    def scalar_fn(self) -> Callable[..., float]:
        """The one-environment function: ``score`` on the environment's ``str`` inputs."""
        score = self.score
        if len(self.inputs) == 1:
            def one_text(text: str, terminated: bool, truncated: bool) -> float:
                return score(text)

            return one_text

        def several_texts(*args: Any) -> float:
            return score(*args[:-2])

        return several_texts
