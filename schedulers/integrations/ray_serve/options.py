"""``RouterOptions``: a deployment's ``request_router_kwargs`` for :class:`~.router.PolicyRequestRouter`, checked once.

A frozen dataclass validated on construction, as a routing policy's ``Params`` are: a value of the
wrong kind is a ValueError naming the key and what was expected
(``request_router_kwargs.kv_capacity_blocks: expected a finite number > 0, got nan``). Keys that
are not fields here go to :func:`~schedulers.routing.policy.make_policy` (a policy's parameters,
``deterministic`` or ``temperature`` of ``ppo``), which names its own errors.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional


def _fail(key: str, expected: str, value: Any) -> None:
    raise ValueError(f"request_router_kwargs.{key}: expected {expected}, got {value!r}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class RouterOptions:
    """What ``PolicyRequestRouter`` reads from ``request_router_kwargs`` (docs/ray-serve.md has the table)."""

    #: a router name of ``make_policy``, thresholds after the name (``cache_aware:balance_abs_threshold=8``).
    policy: str = "least_prefill"
    #: a learned policy's file (``ppo``).
    checkpoint: Optional[str] = None
    #: seeds the policy's tie-breaking and random draws.
    seed: int = 0
    #: replica stats older than this (s) are not used.
    stale_s: float = 2.0
    #: tokens per prefix block, as the engines'.
    block_size: int = 32
    #: a replica's KV blocks until it reports its own capacity.
    kv_capacity_blocks: float = 1024.0
    #: torch threads of a learned policy.
    threads: int = 1
    #: also time each decision's stages (``router_stats()``'s ``stage_ms``): a profile, off by default.
    time_stages: bool = False
    #: how many recent decisions' and requests' times ``router_stats()`` keeps and reports.
    keep_decision_times: int = 10_000
    #: the other keys, for ``make_policy``.
    policy_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str) or not self.policy:
            _fail("policy", "a router name", self.policy)
        if self.checkpoint is not None and not (isinstance(self.checkpoint, (str, os.PathLike)) and str(self.checkpoint)):
            _fail("checkpoint", "the path of a learned policy's file", self.checkpoint)
        if not _integer(self.seed):
            _fail("seed", "an integer", self.seed)
        for key in ("stale_s", "kv_capacity_blocks"):
            value = getattr(self, key)
            if not (_number(value) and math.isfinite(value) and value > 0):
                _fail(key, "a finite number > 0", value)
        for key in ("block_size", "threads", "keep_decision_times"):
            value = getattr(self, key)
            if not (_integer(value) and value >= 1):
                _fail(key, "an integer >= 1", value)
        if not isinstance(self.time_stages, bool):
            _fail("time_stages", "true or false", self.time_stages)

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> "RouterOptions":
        """The options of ``request_router_kwargs``: its keys that are fields, the rest as ``policy_options``."""
        names = {f.name for f in dataclasses.fields(cls)} - {"policy_options"}
        known = {k: v for k, v in kwargs.items() if k in names}
        return cls(**known, policy_options={k: v for k, v in kwargs.items() if k not in names})
