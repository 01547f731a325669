"""The result of one reward evaluation: ``RewardOutput`` (total and per-term breakdown) and ``TermOutput``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .backend import array_namespace, device_of


class TermNames(tuple):
    """The names of a config's terms in evaluation order; ``applies`` names the terms with
    ``applies_to``, whose masks follow the four values per term in the flat output values."""

    applies: tuple[str, ...]

    def __new__(cls, names: Any, applies: Any = ()) -> "TermNames":
        self = super().__new__(cls, names)
        self.applies = tuple(applies)
        return self

    def __reduce__(self) -> Any:
        return (TermNames, (tuple(self), self.applies))


class TermOutput:
    """One term's ``raw``, ``normalized``, ``weight`` and ``contribution`` (floats or arrays),
    ``info``: extra numbers the component reported about the call (``last_call_info()``: a remote
    term's latency, requests, failures...; empty for ordinary terms), and ``applies``: for a term
    with ``applies_to``, where it gave a value (a bool, or a boolean array over the batch; its
    raw, normalized and contribution are 0 elsewhere), ``None`` for the other terms."""

    __slots__ = ("raw", "normalized", "weight", "contribution", "info", "applies")

    def __init__(self, raw: Any, normalized: Any, weight: Any, contribution: Any,
                 info: dict[str, float] | None = None, applies: Any = None) -> None:
        self.raw, self.normalized, self.weight, self.contribution = raw, normalized, weight, contribution
        self.info = {} if info is None else info
        self.applies = applies

    def __repr__(self) -> str:
        info = f", info={self.info!r}" if self.info else ""
        applies = f", applies={self.applies!r}" if self.applies is not None else ""
        return (f"TermOutput(raw={self.raw!r}, normalized={self.normalized!r}, "
                f"weight={self.weight!r}, contribution={self.contribution!r}{info}{applies})")


class RewardOutput:
    """The total reward and, built on first access, the per-term breakdown.

    In batched calls every breakdown value has the environment axis; weights (one number per
    step) are broadcast to it when the breakdown is read, not on the hot path.
    """

    __slots__ = ("total", "_values", "_names", "_terms", "_n_envs", "_info")

    def __init__(self, total: Any, values: tuple | list, names: tuple[str, ...], n_envs: int | None = None,
                 info: dict[str, dict[str, float]] | None = None) -> None:
        self.total = total
        self._values = values
        self._names = names
        self._terms: dict[str, TermOutput] | None = None
        self._n_envs = n_envs
        self._info = info

    # The compiled scalar path creates outputs without __init__ and leaves _terms, _n_envs and
    # _info unset (a scalar call); they are read through getattr with a default.
    def _weight(self, i: int) -> Any:
        w = self._values[4 * i + 2]
        n_envs = getattr(self, "_n_envs", None)
        if n_envs is not None and isinstance(w, (int, float)):
            total = self.total
            if isinstance(total, np.ndarray):
                return np.full(n_envs, w, dtype=total.dtype)
            xp = array_namespace(total)  # the total's library, device and dtype
            return xp.full((n_envs,), w, dtype=total.dtype, device=device_of(total))
        return w

    @property
    def terms(self) -> dict[str, TermOutput]:
        """Term name (``group/child`` for nested terms) -> :class:`TermOutput`."""
        terms = getattr(self, "_terms", None)
        if terms is None:
            v = self._values
            info = getattr(self, "_info", None) or {}
            applies = self._applies()
            terms = self._terms = {name: TermOutput(v[4 * i], v[4 * i + 1], self._weight(i), v[4 * i + 3],
                                                    info.get(name), applies.get(name))
                                   for i, name in enumerate(self._names)}
        return terms

    def normalized_of(self, name: str) -> tuple[Any, Any]:
        """Term ``name``'s ``normalized`` value and ``applies`` mask (``None`` without ``applies_to``),
        as :attr:`terms` gives them, read without building the whole breakdown (a per-term reward
        function's one read per call)."""
        terms = getattr(self, "_terms", None)
        if terms is not None:
            term = terms[name]
            return term.normalized, term.applies
        names = self._names
        if name not in names:
            raise KeyError(name)
        applying = getattr(names, "applies", ())
        mask = self._applies_mask(applying.index(name)) if name in applying else None
        return self._values[4 * names.index(name) + 1], mask

    def _applies_mask(self, k: int) -> Any:
        """The ``k``-th ``applies_to`` mask (they follow the terms' four values each); a scalar as a bool."""
        m = self._values[4 * len(self._names) + k]
        return bool(m) if isinstance(m, (bool, int, float, np.bool_)) else m

    def _applies(self) -> dict[str, Any]:
        """The ``applies_to`` masks by term name."""
        names = getattr(self._names, "applies", ())
        return {name: self._applies_mask(k) for k, name in enumerate(names)}

    def as_dict(self) -> dict[str, Any]:
        """Flat mapping ``{"<term>/raw": ..., "<term>/contribution": ..., "total": ...}`` for logs."""
        out: dict[str, Any] = {}
        v = self._values
        for i, name in enumerate(self._names):
            out[f"{name}/raw"] = v[4 * i]
            out[f"{name}/normalized"] = v[4 * i + 1]
            out[f"{name}/weight"] = self._weight(i)
            out[f"{name}/contribution"] = v[4 * i + 3]
        for name, mask in self._applies().items():
            out[f"{name}/applies"] = mask
        out["total"] = self.total
        return out

    def __repr__(self) -> str:
        return f"RewardOutput(total={self.total!r}, terms={list(self._names)})"


class CompiledRewardOutput(RewardOutput):
    """A :class:`RewardOutput` built by the compiled single-environment path: created with no
    ``__init__`` call (object's own, in C) and its three slots set after, as that path runs per step."""

    __slots__ = ()
    __init__ = object.__init__  # type: ignore[assignment]
