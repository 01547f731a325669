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
:class:`~rewardkit.compose.CompiledPlan` (``composer.plan``: the two generated functions). The
asynchronous terms' event loop is ``rewardkit.async_terms``; the output types ``rewardkit.outputs``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import weakref
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from .async_terms import AsyncCall, CallCancelled, EventLoopThread
from .backend import evaluating, maybe_any, to_numpy
from .compose import CompiledPlan
from .config import RewardSpec, TermNode, leaves, load_yaml, parse_config, spec_to_dict, walk
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
        self._owner: Any = None
        self._build_runtime()

    def _build_runtime(self) -> None:
        """The parts that are rebuilt, not copied, by deepcopy and pickle: the compiled plan, the
        background event loop of asynchronous terms and the worker thread of ``acall``. The plan
        and the shaper hold the composer weakly, so a dropped composer is freed at once (no
        reference cycle waits for a garbage-collection pass) and its finalizer ends the loop's
        thread and the worker."""
        self.shaper.on_change(_WeakCall(self._on_weight_change))
        self.plan = CompiledPlan(self.spec, self.reader, self.store, self.shaper,
                                 fallback=_WeakCall(self._not_scalar_call),
                                 source=self.source, allow_nonfinite=self.allow_nonfinite)
        self._scalar_fn = self.plan.single_env
        self._async_loop = EventLoopThread()
        self._acall_worker = _LazyWorker()
        self._finalizer = weakref.finalize(self, _close_runtime, self._async_loop, self._acall_worker)

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
        """Stop the background event loop of asynchronous terms and ``acall``'s worker thread (a
        later call starts new ones). ``with composer:`` closes it on leaving the block; a dropped
        composer is closed when it is freed."""
        _close_runtime(self._async_loop, self._acall_worker)

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

    # ---- what adapters ask (read-only) ---------------------------------------------------------
    def leaves(self) -> Iterator[TermNode]:
        """Every term of the config (no groups), in evaluation order."""
        return leaves(self.spec.nodes)

    @property
    def text_keys(self) -> frozenset[str]:
        """Context keys some term reads as text (a list of ``str``, one per environment)."""
        return frozenset(slot.key for slot in self.reader.slots if slot.text)

    @property
    def asynchronous(self) -> bool:
        """Whether some term waits on I/O (a remote scorer or judge): then :meth:`acall` lets them wait
        concurrently, and trainers' adapters offer ``async`` functions."""
        return any(getattr(node.component, "asynchronous", False) for node in self.leaves())

    @property
    def stateful(self) -> bool:
        """Whether the composer keeps per-environment state (stateful components, normalizers): if not,
        :meth:`reset` clears nothing and adapters may skip it."""
        return bool(self.store.components or self.store.normalizers)

    @property
    def transforms_total(self) -> bool:
        """Whether the config transforms the total, so the total is not the weighted sum of its terms."""
        return bool(self.spec.total_transforms)

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
        with self.store.lock:
            return self.store.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (all or nothing; a ``ConfigError`` names the key path)."""
        with self.store.lock:
            self.store.load_state_dict(state)

    # ---- copying, pickling, sharing ---------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("plan", "_scalar_fn", "_owner", "_async_loop", "_acall_worker", "_finalizer"):
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
        with self.store.lock:
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

    def evaluate_batch(self, ctx: Mapping[str, Any], step: int | None = None, terminated: Any = None,
                       truncated: Any = None) -> RewardOutput:
        """``composer(ctx, step, terminated, truncated)`` for a caller that knows ``ctx`` holds a
        batch (a trainer's reward function): the batched path entered directly, without trying the
        one-environment function first. The same checks, numbers and state changes."""
        with self.store.lock:
            return self._batched_call(ctx, step, terminated, truncated)

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

    def _batched_call(self, ctx: Any, step: Any, terminated: Any, truncated: Any, start: Any = None,
                      commit: Callable[[tuple[RewardOutput, int | None]], None] | None = None) -> RewardOutput:
        """Read the batch, run the compiled batched function in a transaction, clear ended
        episodes' state and advance the step (the caller holds ``store.lock``). ``start``
        launches asynchronous terms (the background loop by default); ``commit`` (``acall``) is
        handed the output and the new step before anything is kept, and raises to drop it all."""
        step = self.store.step if step is None else check_step(step)
        inputs = self.reader.read_batch(ctx)
        term, trunc, done = self.reader.episode_flags(inputs, terminated, truncated)
        store, plan = self.store, self.plan
        start = start or self._async_loop.start
        # what a failure would leave half-updated; with ``commit`` every holder (it may still refuse)
        guarded = store.guarded if commit is None else [*store.components, *store.normalizers]
        with store.transaction(guarded), evaluating(self.check_inputs, inputs.dtype):
            total, values = plan.batched(*inputs.values, step, term, trunc, done, start)
            if store.components and maybe_any(done):  # on a device: a where() per state array, no sync
                store.end_episodes(done)
            batch = inputs.batch
            if batch is None:
                values = [v if isinstance(v, (int, float)) else float(to_numpy(v)[0]) for v in values]
                total = float(to_numpy(total)[0])
            out = RewardOutput(total, values, plan.names, batch, plan.collect_info())
            new_step = step + (batch or 1) if store.training else None
            if commit is not None:
                commit((out, new_step))  # acall: the caller's loop keeps it (and sets the step) or drops it
                return out
        if new_step is not None:
            store.step = new_step
        return out

    async def acall(self, ctx: Mapping[str, Any], step: int | None = None, terminated: Any = None,
                    truncated: Any = None) -> RewardOutput:
        """``composer(ctx)`` for async code: asynchronous terms run on the caller's event loop.

        The cheap terms are computed in the composer's worker thread while the asynchronous ones
        are in flight on this loop; calls of one composer (``acall`` or plain, from any thread)
        run one after another and each is counted. Waiting for its turn holds no thread of the
        loop's default executor. A cancelled ``acall`` changes nothing (step, statistics, state)
        and its terms' requests are cancelled. Without asynchronous terms this is the plain call.
        """
        if not self.plan.asynchronous:
            return self(ctx, step, terminated, truncated)
        loop = asyncio.get_running_loop()
        call = AsyncCall(loop)
        store = self.store

        def evaluate() -> RewardOutput:
            with store.lock:
                if call.cancelled:  # cancelled while it waited for its turn: never runs
                    raise CallCancelled("acall cancelled")
                return self._batched_call(ctx, step, terminated, truncated, call.start, call.commit)

        store.acall_loops[loop] = store.acall_loops.get(loop, 0) + 1
        try:
            work = asyncio.wrap_future(self._acall_worker.submit(evaluate))
            try:
                await asyncio.wait((call.ready, work), return_when=asyncio.FIRST_COMPLETED)
                if not call.ready.done():
                    work.result()  # the call failed before it was computed: its error
                    raise RuntimeError("acall: the call ended without a result")  # pragma: no cover
            except BaseException:
                call.cancel()
                if not work.done():
                    work.add_done_callback(_ignore_outcome)
                raise
            out, new_step = call.ready.result()
            if new_step is not None:  # the worker holds the lock and waits for this decision
                store.step = new_step
            call.keep()
            work.add_done_callback(_ignore_outcome)
            return out
        finally:
            left = store.acall_loops.get(loop, 1) - 1
            if left:
                store.acall_loops[loop] = left
            else:
                store.acall_loops.pop(loop, None)


class _WeakCall:
    """A method called through a weak reference to its object (no reference cycle through it).

    A copy or a pickle of it does nothing: the copied composer registers its own."""

    def __init__(self, method: Callable[..., Any] | None) -> None:
        self._ref = None if method is None else weakref.WeakMethod(method)  # type: ignore[arg-type]

    def __call__(self, *args: Any) -> Any:
        bound = None if self._ref is None else self._ref()
        if bound is None:
            return None
        return bound(*args)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _WeakCall, (None,)


def _ignore_outcome(future: "asyncio.Future[Any]") -> None:
    """Retrieve a finished worker's outcome (a dropped call's error is not news)."""
    if not future.cancelled():
        future.exception()


class _LazyWorker:
    """The thread ``acall`` computes in: one, created at the first ``acall`` (calls take turns on
    the state lock anyway), so waiting holds none of the event loop's default executor."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[], RewardOutput]) -> "concurrent.futures.Future[RewardOutput]":
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rewardkit-acall")
        return self._pool.submit(fn)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _close_runtime(loop_thread: EventLoopThread, worker: _LazyWorker) -> None:
    """End a composer's background loop and acall worker (``close()`` and its finalizer)."""
    worker.close()
    loop_thread.close()
