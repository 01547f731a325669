"""``RewardComposer``: evaluates a reward config on a context, with a per-term breakdown.

For each term: ``raw = component(ctx)``, ``normalized = transforms(normalizer(raw))``,
``contribution = weight(step) * normalized``. A group's ``raw`` is the sum of its children's
contributions, then it is normalized, transformed and weighted the same way. The total is
``total_transforms(sum of top-level contributions)``; without total transforms the top-level
contributions add up to the total exactly.

A context whose values are numbers is evaluated by a Python function compiled once from the
config (no NumPy on the hot path; it is the composer's ``__call__`` itself); a context with a
leading environment axis ``(n_envs,)`` is evaluated in its arrays' library (NumPy, PyTorch on any
device, JAX) and every output gets that axis. Both give the same numbers; float32 arrays in give
float32 out, anything else float64 (docs/concepts.md, "Any array library, on its device").
``composer.generated_code()`` (``rewardkit explain CONFIG --show-code``) shows both functions:
variables are named after the terms, each component's helpers live under its own prefix, and
tracebacks through them show the generated lines.

A call that raises changes nothing (step, normalizer statistics, component state), and so does
a ``load_state_dict`` or ``reset`` that raises.

This module holds the public API; the generated-code emitter is ``rewardkit.codegen``, the
input checks ``rewardkit.inputs``, saving, restoring and transactions of state
``rewardkit.transactions`` (``state_dict``/``load_state_dict`` are defined there) and the output
types ``rewardkit.outputs``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import weakref
from pathlib import Path
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Iterator, Mapping


from .async_terms import EventLoopThread, on_loop
from .base import BaseReward
from .codegen import CodeEmitter
from .config import GroupNode, RewardSpec, TermNode, load_yaml, parse_config, spec_to_dict
from .errors import InvalidInputError
from .inputs import MAX_STEP, Array, InputChecks, _bool_array, _check_step, _NotScalar
from .outputs import RewardOutput, TermOutput
from .params import describe
from .shaper import RewardShaper
from .transactions import StateTransactions

__all__ = ["RewardComposer", "RewardOutput", "TermOutput", "MAX_STEP"]


def _walk(nodes: list[TermNode | GroupNode]) -> Iterator[TermNode | GroupNode]:
    for node in nodes:
        yield node
        if isinstance(node, GroupNode):
            yield from _walk(node.children)



class RewardComposer(CodeEmitter, InputChecks, StateTransactions):
    """Evaluates a validated reward config; build it with :meth:`from_yaml` or :meth:`from_dict`.

    ``allow_nonfinite=True`` lets NaN/inf context values through (they raise by default).
    A call that raises changes nothing: the step, normalizer statistics and component state stay
    as they were. ``copy.deepcopy`` and ``pickle`` give independent composers with the same state.
    """

    def __init__(self, spec: RewardSpec, *, source: str | None = None, allow_nonfinite: bool = False,
                 check_inputs: bool = True) -> None:
        self.spec = spec
        self.source = source
        self.allow_nonfinite = allow_nonfinite
        self.check_inputs = check_inputs
        self.step = 0
        self.training = True
        self._order = list(_walk(spec.nodes))
        self._names = tuple(node.name for node in self._order)
        self._false_flags: dict[int, Array] = {}
        self._leaves = [n for n in self._order if isinstance(n, TermNode)]
        self._stateful_nodes = [n for n in self._leaves if n.component.stateful]
        self._stateful = [n.component for n in self._stateful_nodes]
        self._normalized = [n for n in self._order if n.normalizer is not None]
        self._normalizers = [n.normalizer for n in self._normalized]
        self._guarded = self._needs_snapshot()
        self.shaper = RewardShaper({n.name: n.weight for n in self._order})
        self.shaper.on_change(self._on_weight_change)
        self._readers = self._collect_readers()
        # one slot per context key: (key, per-env ndim, whether every reader is optional, first reader)
        self._slot_info = [(key, readers[0][2], all(r[3] for r in readers), readers[0])
                           for key, readers in self._readers.items()]
        self._fingerprint = hashlib.sha256(
            json.dumps(self.to_dict(), sort_keys=True, default=repr).encode()).hexdigest()[:16]
        self._owner: Any = None
        self._asynchronous = any(n.component.asynchronous for n in self._leaves)
        self._info_nodes = [n for n in self._leaves
                            if type(n.component).last_call_info is not BaseReward.last_call_info]
        self._start_async_loop()
        self._compile()

    def _start_async_loop(self) -> None:
        self._async_loop = EventLoopThread()
        self._acall_lock = threading.Lock()
        weakref.finalize(self, self._async_loop.close)

    def close(self) -> None:
        """Stop the background event loop of asynchronous terms (a later call starts a new one)."""
        self._async_loop.close()

    def __enter__(self) -> "RewardComposer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _collect_info(self) -> dict[str, dict[str, float]]:
        """``last_call_info()`` of the terms that report one (copied into ``TermOutput.info``)."""
        return {n.name: dict(n.component.last_call_info()) for n in self._info_nodes}

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | Path, **kwargs: Any) -> "RewardComposer":
        """Load, validate and build a composer from a YAML file.

        ``path`` is a ``str`` or ``os.PathLike``; anything else (an int would be read by ``open`` as
        a file descriptor, ``0`` being standard input) is refused with a ``TypeError``.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"from_yaml: expected a file path (str or pathlib.Path), got {type(path).__name__} "
                            f"{describe(path)}; use from_dict for a mapping")
        source = str(path)
        return cls(parse_config(load_yaml(path), source=source), source=source, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None, **kwargs: Any) -> "RewardComposer":
        """Validate and build a composer from a config mapping."""
        return cls(parse_config(data, source=source or "<dict>"), source=source, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data; ``from_dict(to_dict())`` builds an identical composer."""
        return spec_to_dict(self.spec)

    @property
    def term_names(self) -> tuple[str, ...]:
        """Names of every term and group, in evaluation (pre-)order."""
        return self._names

    def context_keys(self) -> set[str]:
        """Every context key some component reads (optional ones included)."""
        return set(self._readers)

    def required_context_keys(self) -> set[str]:
        """Context keys that must be present."""
        return {k for k, readers in self._readers.items() if any(not opt for _, _, _, opt in readers)}

    def generated_code(self) -> str:
        """The Python source of the two compiled functions (single environment, then batched).

        Tracebacks through them show these lines (the source is registered with ``linecache``).
        """
        return self._scalar_source + "\n\n" + self._vector_source

    # ---- copying, pickling, sharing ---------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_scalar_fn", "_vector_fn", "_owner", "_code_id", "_scalar_source", "_vector_source",
                    "_false_flags", "_async_loop", "_acall_lock"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner = None
        self._false_flags = {}
        self._start_async_loop()
        self._compile()

    def attach_to(self, owner: Any) -> None:
        """Bind this composer to one environment wrapper; a second live wrapper is refused.

        Per-environment state (potential shaping, EMAs, ``return_std`` returns) belongs to one
        environment, so one composer cannot serve two single-environment wrappers.
        """
        current = self._owner() if self._owner is not None else None
        if current is not None and current is not owner:
            raise ValueError(
                f"this RewardComposer already computes the reward of {type(current).__name__} "
                f"{current!r}; its per-environment state cannot serve a second environment. Give each "
                "environment its own composer (copy.deepcopy(composer) or another from_yaml), or wrap a "
                "vector environment once with the vector wrapper")
        self._owner = weakref.ref(owner)

    # ---- modes and state --------------------------------------------------------------------
    def train(self) -> "RewardComposer":
        """Normalizer statistics update and the step counter advances (the default)."""
        self.training = True
        return self

    def eval(self) -> "RewardComposer":
        """Freeze normalizer statistics and the step counter."""
        self.training = False
        return self

    def reset(self, mask: Any = None) -> None:
        """Start new episodes: clears per-environment state (everywhere, or where the boolean
        ``mask`` over environments is true); keeps normalizer statistics and the step.

        ``mask`` is None or a 1-D array (or list) of booleans with one entry per environment;
        anything else raises ``InvalidInputError`` and changes nothing.
        """
        if mask is not None:
            mask = _bool_array(mask, "reset mask")
            if mask.ndim != 1:
                raise InvalidInputError(f"reset mask: expected a 1-D array of booleans (one per environment), "
                                        f"got shape {tuple(mask.shape)}")
        with self._transaction():
            for comp in self._stateful:
                comp.reset(mask)
            for norm in self._normalizers:
                norm.reset(mask)

    # ---- evaluation -----------------------------------------------------------------------
    if TYPE_CHECKING:
        def __call__(self, ctx: Mapping[str, Any], step: int | None = None,
                     terminated: Any = None, truncated: Any = None) -> RewardOutput:
            """Evaluate the reward on ``ctx``; see the module docstring for the arithmetic."""
    else:
        # ``composer(ctx, step=None, terminated=None, truncated=None)`` enters the compiled
        # single-environment function directly: Python finds __call__ on the class, and this
        # property hands it the instance's function (a C-level attribute read, no Python frame in
        # between). ``step`` defaults to the composer's counter and must be a non-negative
        # integer; the episode flags are booleans (arrays of booleans in batched calls). A batched
        # call advances the step by its number of environments.
        __call__ = property(attrgetter("_scalar_fn"), doc="Evaluate the reward on a context (see the class).")

    def _not_scalar_call(self, ctx: Any, step: Any, terminated: Any, truncated: Any,
                         exc: BaseException) -> RewardOutput:
        """Where the compiled single-environment function hands over: a batched context (arrays
        with an environment axis), a missing key or a context that is not a mapping."""
        if exc.__class__ is _NotScalar:
            return self._batched_call(ctx, step, terminated, truncated)
        if isinstance(exc, KeyError):
            self._raise_missing(ctx, exc)
        if isinstance(exc, TypeError) and not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got "
                                    f"{type(ctx).__name__}") from None
        raise exc

    def _batched_call(self, ctx: Any, step: Any, terminated: Any, truncated: Any, start: Any = None) -> RewardOutput:
        step = self.step if step is None else _check_step(step)
        total, values, batch = self._call_vector(ctx, step, terminated, truncated, start)
        if self.training:
            self.step = step + (batch or 1)
        return RewardOutput(total, values, self._names, batch, self._collect_info() if self._info_nodes else None)

    async def acall(self, ctx: Mapping[str, Any], step: int | None = None, terminated: Any = None,
                    truncated: Any = None) -> RewardOutput:
        """``composer(ctx)`` for async code: asynchronous terms run on the caller's event loop.

        The cheap terms are computed in a worker thread while the asynchronous ones are in flight
        on this loop; concurrent ``acall`` of one composer run one after another. Without
        asynchronous terms this is the plain call.
        """
        if not self._asynchronous:
            return self(ctx, step, terminated, truncated)
        start = on_loop(asyncio.get_running_loop())

        def evaluate() -> RewardOutput:
            with self._acall_lock:
                return self._batched_call(ctx, step, terminated, truncated, start)

        return await asyncio.to_thread(evaluate)
