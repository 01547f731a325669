"""``ReplicaSnapshot``: the per-replica load a router sees at one routing decision (NumPy arrays)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np


def as_floats(values: Any) -> list[float]:
    """A snapshot field as a list of Python floats: on a handful of replicas plain Python is cheaper
    than NumPy's calls, by ten times on the cold CPU a router decides on between requests. A list
    (:meth:`ReplicaSnapshot.floats` gives them) is taken as it is."""
    if isinstance(values, list):
        return values
    return np.asarray(values, dtype=np.float64).tolist()


@dataclass(frozen=True)
class ReplicaSnapshot:
    """Per-replica load at one instant; every field is an array of length ``num_replicas``."""

    #: requests routed to the replica and not yet admitted (no KV-cache blocks yet).
    waiting: np.ndarray
    #: admitted, unfinished requests (holding KV-cache blocks).
    running: np.ndarray
    #: allocated KV-cache blocks.
    kv_blocks: np.ndarray
    #: KV-cache blocks the replica has in total.
    kv_capacity: np.ndarray
    #: prompt tokens not yet processed, over queued and running requests.
    prefill_tokens: np.ndarray
    #: output tokens generated so far by unfinished requests.
    decoded_tokens: np.ndarray
    #: prompt tokens of the waiting (not yet admitted) requests.
    waiting_prefill_tokens: np.ndarray
    #: requests the replica completed within the recent window.
    recent_completions: np.ndarray
    #: 1 while the replica executes a batch, else 0.
    busy: np.ndarray
    #: static relative speed of the replica's hardware as the env YAML declares it (1 = reference).
    declared_speed: np.ndarray
    #: current speed estimated online from finished batches (:mod:`schedulers.routing.speed_estimator`).
    measured_speed: np.ndarray
    #: tokens (prompt and output) the replica processed per second over the recent window.
    tokens_per_s: np.ndarray
    #: seconds since the replica last completed a request (since the episode start if never).
    since_completion: np.ndarray
    #: share (0-1) of the arriving request's prompt the replica's prefix cache likely holds
    #: (:class:`schedulers.routing.prefix_index.PrefixIndex`); zeros where nothing tracks it (Vidur).
    prefix_match: np.ndarray | None = field(default=None)
    #: prompt blocks the router's prefix mirror holds for the replica (SGLang's tree size); zeros where untracked.
    prefix_blocks: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        for name in ("prefix_match", "prefix_blocks"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.waiting)))

    @classmethod
    def build(cls, num_replicas: int | None = None, **fields: object) -> "ReplicaSnapshot":
        """Snapshot from keyword arrays; missing fields are zeros (``kv_capacity`` defaults to 1000, speeds to 1)."""
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in fields.items()}
        unknown = set(arrays) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise TypeError(f"unknown snapshot fields: {sorted(unknown)}")
        if num_replicas is None:
            if not arrays:
                raise ValueError("give num_replicas or at least one field")
            num_replicas = len(next(iter(arrays.values())))
        for name, arr in arrays.items():
            if arr.shape != (num_replicas,):
                raise ValueError(f"field {name!r}: expected shape ({num_replicas},), got {arr.shape}")
        defaults = {f: np.zeros(num_replicas) for f in cls.__dataclass_fields__}
        defaults["kv_capacity"] = np.full(num_replicas, 1000.0)
        defaults["declared_speed"] = np.ones(num_replicas)
        defaults["measured_speed"] = np.ones(num_replicas)
        defaults.update(arrays)
        return cls(**defaults)

    @property
    def num_replicas(self) -> int:
        return len(self.waiting)

    def floats(self, name: str) -> list[float]:
        """Field ``name`` as a new list of Python floats (what a heuristic reads: see :func:`as_floats`)."""
        return as_floats(getattr(self, name))

    @property
    def outstanding_requests(self) -> np.ndarray:
        """Waiting plus running requests."""
        return self.waiting + self.running

    @property
    def outstanding_tokens(self) -> np.ndarray:
        """Unprocessed prompt tokens plus output tokens generated so far."""
        return self.prefill_tokens + self.decoded_tokens

    @property
    def kv_fraction(self) -> np.ndarray:
        """Allocated share of the KV cache, in [0, 1]."""
        return self.kv_blocks / np.maximum(self.kv_capacity, 1.0)

    def with_assignment(self, replica: int, prompt_tokens: int) -> "ReplicaSnapshot":
        """The snapshot after queueing one more request of ``prompt_tokens`` on ``replica``."""
        waiting = self.waiting.copy()
        prefill = self.prefill_tokens.copy()
        waiting_prefill = self.waiting_prefill_tokens.copy()
        waiting[replica] += 1
        prefill[replica] += prompt_tokens
        waiting_prefill[replica] += prompt_tokens
        return replace(self, waiting=waiting, prefill_tokens=prefill, waiting_prefill_tokens=waiting_prefill)


class LazySnapshot(ReplicaSnapshot):
    """A :class:`ReplicaSnapshot` whose fields are computed on first read, by ``compute(name)``.

    ``compute`` returns a dict holding at least field ``name`` (fields computed together come
    together), each as an array or as a list of floats: a list is what :meth:`floats` hands a
    heuristic, with no NumPy call on the way, and becomes an array only when read as one. A router
    reads a few fields per decision; this spares building the rest. Given plain ``arrays`` instead
    (as :func:`dataclasses.replace` does) it holds them as they are.
    """

    def __init__(self, compute: Callable[[str], dict[str, Any]] | None = None, **arrays: np.ndarray) -> None:
        object.__setattr__(self, "_compute", compute)
        object.__setattr__(self, "_values", dict(arrays))

    def _raw(self, name: str) -> Any:
        """Field ``name`` as computed (a list or an array), computing it on first read."""
        values = self._values
        if name not in values:
            for key, value in self._compute(name).items():
                values.setdefault(key, value)
        return values[name]

    def _field(self, name: str) -> np.ndarray:
        value = self._raw(name)
        if isinstance(value, list):
            value = self._values[name] = np.array(value, dtype=np.float64)
        return value

    def floats(self, name: str) -> list[float]:
        value = self._raw(name)
        return list(value) if isinstance(value, list) else as_floats(value)

    def complete(self) -> None:
        """Compute every field now (then later changes to what ``compute`` reads do not show)."""
        for name in self.__dataclass_fields__:
            self._raw(name)
        object.__setattr__(self, "_compute", None)

    def __reduce__(self) -> tuple[type, tuple[np.ndarray, ...]]:
        """Pickle and copy as a plain :class:`ReplicaSnapshot` (the compute function stays behind)."""
        return ReplicaSnapshot, tuple(getattr(self, name) for name in self.__dataclass_fields__)


for _name in ReplicaSnapshot.__dataclass_fields__:
    setattr(LazySnapshot, _name, property(lambda self, _n=_name: self._field(_n), doc=f"``{_name}``, computed on first read."))
del _name
