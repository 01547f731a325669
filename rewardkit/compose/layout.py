"""What code generation reads of one config, worked out once: the nodes in evaluation order, which
terms are asynchronous, stateful, masked or report call info, the context keys in the order the
batched function takes them, and the objects the generated code calls (reader, store, shaper)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..base import BaseReward
from ..config import GroupNode, RewardSpec, TermNode, walk
from ..inputs import InputReader, InputSlot
from ..outputs import TermNames
from ..shaper import RewardShaper
from ..state_store import StateStore
from .names import Scope


def built_in(component: BaseReward) -> bool:
    """Components shipped with rewardkit are tested to return one finite float per environment."""
    return type(component).__module__.startswith("rewardkit.components.")


@dataclass(frozen=True)
class Layout:
    """The static facts of one config that every emitter may need (read-only)."""

    spec: RewardSpec
    reader: InputReader
    store: StateStore
    shaper: RewardShaper
    fallback: Callable[..., Any]
    allow_nonfinite: bool
    #: every node, parents before children (the breakdown's order)
    order: tuple[TermNode | GroupNode, ...]
    leaves: tuple[TermNode, ...]
    #: terms with ``applies_to``: their masks follow the flat values, in this order
    applying: tuple[TermNode, ...]
    #: terms whose component is asynchronous (awaited together; every call is batched then)
    asynchronous: tuple[TermNode, ...]
    #: terms whose component reports ``last_call_info()`` (copied into ``TermOutput.info``)
    info_nodes: tuple[TermNode, ...]
    names: TermNames

    @classmethod
    def of(cls, spec: RewardSpec, reader: InputReader, store: StateStore, shaper: RewardShaper, *,
           fallback: Callable[..., Any], allow_nonfinite: bool) -> "Layout":
        order = tuple(walk(spec.nodes))
        leaves = tuple(n for n in order if isinstance(n, TermNode))
        applying = tuple(n for n in leaves if n.applies_to)
        return cls(spec=spec, reader=reader, store=store, shaper=shaper, fallback=fallback,
                   allow_nonfinite=allow_nonfinite, order=order, leaves=leaves, applying=applying,
                   asynchronous=tuple(n for n in leaves if n.component.asynchronous),
                   info_nodes=tuple(n for n in leaves
                                    if type(n.component).last_call_info is not BaseReward.last_call_info),
                   names=TermNames((node.name for node in order), applies=(n.name for n in applying)))

    @property
    def slots(self) -> list[InputSlot]:
        """The context keys, in the order the batched function takes them."""
        return self.reader.slots

    @property
    def has_optional_keys(self) -> bool:
        """Whether a context may lack a key (then a second single-environment function reads them with ``get``)."""
        return any(slot.optional for slot in self.reader.slots) and not self.asynchronous

    def stateless(self, *, synchronous_only: bool = False) -> list[TermNode]:
        """Terms without state (without the asynchronous ones when ``synchronous_only``), in order."""
        return [n for n in self.leaves if not n.component.stateful
                and not (synchronous_only and n.component.asynchronous)]

    def scope(self, fixed: Any = ()) -> Scope:
        """The names of a new function over this config (``fixed``: its own globals)."""
        return Scope((node.name for node in self.order), (n.name for n in self.applying), self.reader.readers, fixed)

