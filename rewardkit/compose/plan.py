"""The compiled plan of one config: the generated functions, defined with their source registered
in ``linecache`` so tracebacks show generated lines, and rebuilt by :meth:`CompiledPlan.compile`
(the composer calls it when a weight changes)."""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from ..config import RewardSpec
from ..inputs import InputReader
from ..shaper import RewardShaper
from ..state_store import StateStore
from .layout import Layout
from .scalar import single_env_function
from .source import define, forget_sources
from .vector import batched_function

_code_ids = itertools.count(1)


@dataclass(frozen=True)
class GeneratedSources:
    """The source of each generated function (``absent``: empty when no context key is optional)."""

    single_env: str
    absent: str
    batched: str


class CompiledPlan:
    """A config's generated functions (the contract is in :mod:`rewardkit.compose`)."""

    def __init__(self, spec: RewardSpec, reader: InputReader, store: StateStore, shaper: RewardShaper, *,
                 fallback: Callable[..., Any], source: str | None = None, allow_nonfinite: bool = False) -> None:
        self.layout = Layout.of(spec, reader, store, shaper, fallback=fallback, allow_nonfinite=allow_nonfinite)
        self.source = source
        self._code_id = next(_code_ids)
        weakref.finalize(self, forget_sources, self._filenames())
        self.compile()

    @property
    def order(self) -> tuple:
        """Every node, parents before children (the breakdown's order)."""
        return self.layout.order

    @property
    def names(self) -> Any:
        return self.layout.names

    @property
    def asynchronous(self) -> tuple:
        return self.layout.asynchronous

    def compile(self) -> None:
        """(Re)build ``single_env``, ``single_env_absent`` (with optional keys; else ``None``) and ``batched``.

        With optional context keys, ``single_env`` reads every key as present (the common case, one
        dict lookup each) and hands a context lacking one to ``single_env_absent``, which reads them
        with ``ctx.get`` and is called under the lock ``single_env`` already holds."""
        scalar_file, batched_file, absent_file = self._filenames()
        absent_source, absent = "", None
        if self.layout.has_optional_keys:
            absent_source, absent = self._single_env(absent_file, assume_present=False, locked=False, absent=None)
        scalar_source, single_env = self._single_env(scalar_file, assume_present=absent is not None, locked=True,
                                                     absent=absent)
        batched_source, env = batched_function(self.layout)
        self.single_env, self.single_env_absent = single_env, absent
        self.batched = define(batched_source, env, "reward_batched", batched_file)
        self.sources = GeneratedSources(scalar_source, absent_source, batched_source)

    def build_single_env(self, filename: str, *, locked: bool = True) -> Callable[..., Any]:
        """Another single-environment function (``locked=False``: without taking the store's lock,
        for a caller that holds it; benchmarks compare the two)."""
        return self._single_env(filename, assume_present=False, locked=locked, absent=None)[1]

    def _single_env(self, filename: str, *, assume_present: bool, locked: bool,
                    absent: Callable[..., Any] | None) -> tuple[str, Callable[..., Any]]:
        source, env = single_env_function(self.layout, assume_present=assume_present, locked=locked, absent=absent,
                                          collect_info=self.collect_info)
        return source, define(source, env, "reward_single_env", filename)

    def generated_code(self) -> str:
        """The Python source of the functions (single environment, the same when an optional key
        is absent, if any, then batched)."""
        parts = [self.sources.single_env, self.sources.absent, self.sources.batched]
        return "\n\n".join(part for part in parts if part)

    def collect_info(self) -> dict[str, dict[str, float]] | None:
        """``last_call_info()`` of the terms that report one, ``None`` when none does."""
        if not self.layout.info_nodes:
            return None
        return {n.name: dict(n.component.last_call_info()) for n in self.layout.info_nodes}

    def _filenames(self) -> tuple[str, str, str]:
        label = self.source or "config"
        return (f"<rewardkit {label} #{self._code_id} single-env>", f"<rewardkit {label} #{self._code_id} batched>",
                f"<rewardkit {label} #{self._code_id} single-env, optional key absent>")
