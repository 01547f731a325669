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

The composer is three parts held by composition, each with a public contract:
:class:`~rewardkit.inputs.InputReader` (``composer.reader``: which context keys are read, how they
are checked and converted), :class:`~rewardkit.state_store.StateStore` (``composer.store``: step,
training flag, component and normalizer state, ``state_dict``, transactions) and
:class:`~rewardkit.codegen.CompiledPlan` (``composer.plan``: the two generated functions). The
asynchronous terms' event loop is ``rewardkit.async_terms``; the output types ``rewardkit.outputs``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .async_terms import EventLoopThread, on_loop
from .backend import evaluating, maybe_any, to_numpy
from .codegen import CompiledPlan
from .config import RewardSpec, TermNode, load_yaml, parse_config, spec_to_dict, walk
from .errors import InvalidInputError
from .inputs import MAX_STEP, InputReader, NotScalar, as_bool_array, check_step
from .outputs import RewardOutput, TermOutput
from .params import describe
from .shaper import RewardShaper
from .state_store import StateStore

__all__ = ["RewardComposer", "RewardOutput", "TermOutput", "MAX_STEP"]


class RewardComposer:
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
        order = list(walk(spec.nodes))
        self.store = StateStore(spec)
        self.reader = InputReader([n for n in order if isinstance(n, TermNode)], source=source,
                                  allow_nonfinite=allow_nonfinite, check_inputs=check_inputs)
        self.shaper = RewardShaper({n.name: n.weight for n in order})
        self.shaper.on_change(self._on_weight_change)
        self._owner: Any = None
        self._build_runtime()

    def _build_runtime(self) -> None:
        """The parts that are rebuilt, not copied, by deepcopy and pickle: the compiled plan and
        the background event loop of asynchronous terms."""
        self.plan = CompiledPlan(self.spec, self.reader, self.store, self.shaper, fallback=self._not_scalar_call,
                                 source=self.source, allow_nonfinite=self.allow_nonfinite)
        self._scalar_fn = self.plan.single_env
        self._async_loop = EventLoopThread()
        self._acall_lock = threading.Lock()
        weakref.finalize(self, self._async_loop.close)

    def _on_weight_change(self) -> None:
        self.plan.compile()
        self._scalar_fn = self.plan.single_env

    # ---- step and mode (held by the state store) ---------------------------------------------
    @property
    def step(self) -> int:
        """The step counter: schedules read it; calls in training mode advance it."""
        return self.store.step

    @step.setter
    def step(self, value: int) -> None:
        self.store.step = check_step(value)

    @property
    def training(self) -> bool:
        """Whether calls update normalizer statistics and advance the step (see :meth:`train`)."""
        return self.store.training

    @training.setter
    def training(self, value: bool) -> None:
        self.store.training = bool(value)

    def close(self) -> None:
        """Stop the background event loop of asynchronous terms (a later call starts a new one)."""
        self._async_loop.close()

    def __enter__(self) -> "RewardComposer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        return self.plan.names

    def context_keys(self) -> set[str]:
        """Every context key some component reads (optional ones included)."""
        return self.reader.keys()

    def required_context_keys(self) -> set[str]:
        """Context keys that must be present."""
        return self.reader.required_keys()

    def batch_size(self, ctx: Mapping[str, Any]) -> int | None:
        """The number of environments ``ctx`` holds, ``None`` for one (shapes only; see
        :meth:`InputReader.batch_size <rewardkit.inputs.InputReader.batch_size>`)."""
        return self.reader.batch_size(ctx)

    def generated_code(self) -> str:
        """The Python source of the two compiled functions (single environment, then batched).

        Tracebacks through them show these lines (the source is registered with ``linecache``).
        """
        return self.plan.generated_code()

    def state_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML-safe) capturing the step, every component and normalizer state,
        and a fingerprint of the config it belongs to."""
        return self.store.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (all or nothing; a ``ConfigError`` names the key path)."""
        self.store.load_state_dict(state)

    # ---- copying, pickling, sharing ---------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("plan", "_scalar_fn", "_owner", "_async_loop", "_acall_lock"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner = None
        self._build_runtime()

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
        self.store.training = True
        return self

    def eval(self) -> "RewardComposer":
        """Freeze normalizer statistics and the step counter."""
        self.store.training = False
        return self

    def reset(self, mask: Any = None) -> None:
        """Start new episodes: clears per-environment state (everywhere, or where the boolean
        ``mask`` over environments is true); keeps normalizer statistics and the step.

        ``mask`` is None or a 1-D array (or list) of booleans with one entry per environment;
        anything else raises ``InvalidInputError`` and changes nothing.
        """
        if mask is not None:
            mask = as_bool_array(mask, "reset mask")
            if mask.ndim != 1:
                raise InvalidInputError(f"reset mask: expected a 1-D array of booleans (one per environment), "
                                        f"got shape {tuple(mask.shape)}")
        self.store.reset(mask)

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
        with an environment axis, or asynchronous terms), a missing key or a context that is not
        a mapping."""
        if exc.__class__ is NotScalar:
            return self._batched_call(ctx, step, terminated, truncated)
        if isinstance(exc, KeyError):
            self.reader.raise_missing(ctx, exc)
        if isinstance(exc, TypeError) and not isinstance(ctx, Mapping):
            raise InvalidInputError(f"expected a context mapping signal names to values, got "
                                    f"{type(ctx).__name__}") from None
        raise exc

    def _batched_call(self, ctx: Any, step: Any, terminated: Any, truncated: Any, start: Any = None) -> RewardOutput:
        """Read the batch, run the compiled batched function in a transaction, clear ended
        episodes' state and advance the step. ``start`` launches asynchronous terms (the
        background loop by default)."""
        step = self.store.step if step is None else check_step(step)
        inputs = self.reader.read_batch(ctx)
        term, trunc, done = self.reader.episode_flags(inputs, terminated, truncated)
        store, plan = self.store, self.plan
        start = start or self._async_loop.start
        if store.guarded:  # snapshot what a failure would leave half-updated
            with store.transaction(store.guarded), evaluating(self.check_inputs, inputs.dtype):
                total, values = plan.batched(*inputs.values, step, term, trunc, done, start)
                if store.components and maybe_any(done):  # on a device: a where() per state array, no sync
                    store.end_episodes(done)
        else:
            with evaluating(self.check_inputs, inputs.dtype):
                total, values = plan.batched(*inputs.values, step, term, trunc, done, start)
            if store.components and maybe_any(done):
                store.end_episodes(done)
        batch = inputs.batch
        if batch is None:
            values = [v if isinstance(v, (int, float)) else float(to_numpy(v)[0]) for v in values]
            total = float(to_numpy(total)[0])
        if store.training:
            store.step = step + (batch or 1)
        return RewardOutput(total, values, plan.names, batch, plan.collect_info())

    async def acall(self, ctx: Mapping[str, Any], step: int | None = None, terminated: Any = None,
                    truncated: Any = None) -> RewardOutput:
        """``composer(ctx)`` for async code: asynchronous terms run on the caller's event loop.

        The cheap terms are computed in a worker thread while the asynchronous ones are in flight
        on this loop; concurrent ``acall`` of one composer run one after another. Without
        asynchronous terms this is the plain call.
        """
        if not self.plan.asynchronous:
            return self(ctx, step, terminated, truncated)
        start = on_loop(asyncio.get_running_loop())

        def evaluate() -> RewardOutput:
            with self._acall_lock:
                return self._batched_call(ctx, step, terminated, truncated, start)

        return await asyncio.to_thread(evaluate)

