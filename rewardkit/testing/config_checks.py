"""Promises of a composed reward, sampled with Hypothesis: monotone, bounded, finite.

Each ``assert_*`` draws a short history of training calls (so components and normalizers hold
state, at steps spread over the weight schedules), then checks the promise; a broken one raises
:class:`ExpectationError` with the shrunk context and step. :func:`check_config` verifies a
config's whole ``expect:`` section, statically first (:mod:`.static_proofs`), else by sampling.

The composer under test is never touched: each example works on a rebuilt twin
(``copy.deepcopy``). Monotonicity compares two twins in
``eval()`` mode, so the value being compared does not move normalizer statistics.
"""

from __future__ import annotations

import copy

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ..composer import RewardComposer
from ..expectations import Expectations
from .static_proofs import Proof, prove_finite, prove_monotone, prove_range
from .strategies import Bounds, context_keys, contexts, floats_in, texts
from .strategies import steps as step_strategy

ContextArg = Mapping[str, Any] | st.SearchStrategy[dict[str, Any]] | None
StepsArg = int | Iterable[int] | st.SearchStrategy[int] | None


class ExpectationError(AssertionError):
    """A composed reward breaks a promise; the message holds the shrunk context and step."""

    def __init__(self, expectation: str, detail: str, step: int | None = None,
                 context: Mapping[str, Any] | None = None) -> None:
        self.expectation, self.detail, self.step, self.context = expectation, detail, step, context
        super().__init__(f"{expectation}: {detail}")


class _Broken(Exception):
    def __init__(self, message: str, step: int | None, context: Mapping[str, Any] | None) -> None:
        super().__init__(message)
        self.step, self.context = step, context


def twin(composer: RewardComposer) -> RewardComposer:
    """A new composer with the same config and state, sharing nothing with ``composer``."""
    return copy.deepcopy(composer)


def _fmt(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=17, separator=", ", max_line_width=10_000)
    return repr(float(value)) if isinstance(value, (int, float, np.floating)) else repr(value)


def format_context(ctx: Mapping[str, Any]) -> str:
    """``{key: value, ...}`` with full precision, keys sorted."""
    return "{" + ", ".join(f"{k}: {_fmt(ctx[k])}" for k in sorted(ctx)) + "}"


def _contexts(composer: RewardComposer, context: ContextArg, ranges: Mapping[str, Bounds] | None
              ) -> st.SearchStrategy[dict[str, Any]]:
    if context is None:
        return contexts(composer, ranges=ranges)
    if isinstance(context, st.SearchStrategy):
        return context
    if isinstance(context, Mapping):
        return st.just(dict(context))
    raise TypeError(f"context: expected None, a mapping or a Hypothesis strategy, got {context!r}")


def _steps(composer: RewardComposer, steps: StepsArg) -> st.SearchStrategy[int]:
    if steps is None:
        within = composer.spec.expect.steps if composer.spec.expect is not None else None
        return step_strategy(composer, within)
    if isinstance(steps, st.SearchStrategy):
        return steps
    if isinstance(steps, (int, np.integer)):
        return st.just(int(steps))
    values = [int(s) for s in steps]
    if not values:
        raise ValueError("steps: expected at least one step")
    return st.sampled_from(values)


@dataclass
class _Call:
    ctx: dict[str, Any]
    step: int
    terminated: bool


def _history(ctxs: st.SearchStrategy[dict[str, Any]], steps: st.SearchStrategy[int], max_calls: int,
             min_calls: int = 0) -> st.SearchStrategy[list[_Call]]:
    call = st.builds(_Call, ctxs, steps, st.sampled_from([False, False, False, True]))
    return st.lists(call, min_size=min_calls, max_size=max_calls).map(lambda calls: sorted(calls, key=lambda c: c.step))


def _evaluate(composer: RewardComposer, call: _Call, what: str) -> float:
    try:
        return float(composer(call.ctx, step=call.step, terminated=call.terminated).total)
    except Exception as exc:  # noqa: BLE001 - an error on a valid context breaks the promise
        raise _Broken(f"{what} raised {type(exc).__name__}: {exc}", call.step, call.ctx) from exc


def _describe_history(history: list[_Call]) -> str:
    if not history:
        return ""
    lines = [f"\n  after {len(history)} earlier training call{'s' if len(history) > 1 else ''}:"]
    lines += [f"\n    step {c.step}: {format_context(c.ctx)}{' (episode ends)' if c.terminated else ''}" for c in history]
    return "".join(lines)


class _Runner:
    """Runs one promise with Hypothesis and counts the examples it ran.

    ``seed``: Hypothesis's random seed, so a run can be repeated draw for draw (None: a fresh one)."""

    def __init__(self, name: str, examples: int, seed: int | None = None) -> None:
        self.name, self.examples, self.seed, self.ran = name, examples, seed, 0

    def run(self, strategy: st.SearchStrategy[Any], check: Callable[[Any], None]) -> int:
        @settings(max_examples=self.examples, database=None, deadline=None, verbosity=Verbosity.quiet,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(strategy)
        def run(drawn: Any) -> None:
            self.ran += 1
            check(drawn)

        if self.seed is not None:
            run = hypothesis_seed(self.seed)(run)
        try:
            run()
        except _Broken as exc:
            raise ExpectationError(self.name, str(exc), exc.step, exc.context) from None
        return self.ran


def assert_monotone(composer: RewardComposer, key: str, direction: str, *, context: ContextArg = None,
                    steps: StepsArg = None, examples: int = 200, history: int = 3,
                    ranges: Mapping[str, Bounds] | None = None, seed: int | None = None) -> int:
    """Assert the total is ``direction`` ("increasing" or "decreasing", not strictly) in context
    key ``key``: raising it (every element, for a vector; appending to it, for text), all else
    fixed, never moves the total the other way. ``context`` is a fixed base context, a strategy of them, or ``None`` (drawn
    from :func:`contexts`); ``steps`` a step, steps or a strategy (default: spread over the weight
    schedules). ``seed`` repeats a run's draws (None: fresh ones). Returns the number of examples run."""
    if direction not in ("increasing", "decreasing"):
        raise ValueError(f"direction: expected 'increasing' or 'decreasing', got {direction!r}")
    info = {k.name: k for k in context_keys(composer, ranges if ranges is not None else _config_ranges(composer))}
    if key not in info:
        raise ValueError(f"{key!r} is not a context key the composer reads ({', '.join(sorted(info))})")
    ctxs, step_s = _contexts(composer, context, ranges), _steps(composer, steps)
    values = floats_in(info[key].bounds)

    @st.composite
    def example(draw: st.DrawFn) -> tuple[list[_Call], _Call, Any, Any]:
        past = draw(_history(ctxs, step_s, history))
        call = _Call(draw(ctxs), draw(step_s), False)
        if info[key].text:  # text: "higher" is the same text with more appended
            shorter = draw(texts())
            return past, call, shorter, shorter + draw(texts())
        if info[key].ndim == 0:
            a, b = draw(values), draw(values)
        else:
            n = len(np.atleast_1d(call.ctx[key])) if key in call.ctx else draw(st.integers(1, 6))
            a = np.array(draw(st.lists(values, min_size=n, max_size=n)))
            b = np.array(draw(st.lists(values, min_size=n, max_size=n)))
        return past, call, np.minimum(a, b), np.maximum(a, b)

    def check(drawn: tuple[list[_Call], _Call, Any, Any]) -> None:
        past, call, low, high = drawn
        base = twin(composer).train()
        for c in past:
            _evaluate(base, c, f"the earlier call at step {c.step}")
        at_low = _Call({**call.ctx, key: _scalar(low)}, call.step, False)
        at_high = _Call({**call.ctx, key: _scalar(high)}, call.step, False)
        t_low = _evaluate(twin(base).eval(), at_low, "evaluating")
        t_high = _evaluate(twin(base).eval(), at_high, "evaluating")
        if (t_high < t_low) if direction == "increasing" else (t_high > t_low):
            raise _Broken(f"at step {call.step}, {key}={_fmt(low)} gives total {t_low!r} but {key}={_fmt(high)} "
                          f"gives {t_high!r}\n  context: {format_context(at_low.ctx)}" + _describe_history(past),
                          call.step, at_low.ctx)

    return _Runner(f"monotone in {key} ({direction})", examples, seed).run(example(), check)


def _scalar(value: Any) -> Any:
    return value if isinstance(value, str) else float(value) if np.ndim(value) == 0 else value


def _config_ranges(composer: RewardComposer) -> Mapping[str, Bounds]:
    return composer.spec.expect.inputs if composer.spec.expect is not None else {}


def _assert_every_total(composer: RewardComposer, name: str, ok: Callable[[float], bool], what: str, *,
                        context: ContextArg, steps: StepsArg, examples: int, calls: int,
                        ranges: Mapping[str, Bounds] | None, seed: int | None) -> int:
    ctxs, step_s = _contexts(composer, context, ranges), _steps(composer, steps)

    def check(trajectory: list[_Call]) -> None:
        sim = twin(composer).train()
        for n, call in enumerate(trajectory):
            total = _evaluate(sim, call, f"call {n + 1} of {len(trajectory)}")
            if not ok(total):
                raise _Broken(f"at step {call.step}, the total is {total!r}, {what}\n  context: "
                              f"{format_context(call.ctx)}" + _describe_history(trajectory[:n]), call.step, call.ctx)

    trajectories = _history(ctxs, step_s, calls, min_calls=1)
    return _Runner(name, examples, seed).run(trajectories, check)


def assert_range(composer: RewardComposer, low: float | None, high: float | None, *, context: ContextArg = None,
                 steps: StepsArg = None, examples: int = 200, calls: int = 4,
                 ranges: Mapping[str, Bounds] | None = None, seed: int | None = None) -> int:
    """Assert every total of a sampled sequence of training calls lies in ``[low, high]``
    (``None``: unbounded on that side); ``seed`` repeats a run's draws. Returns the number of examples run."""
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    return _assert_every_total(composer, f"range [{_end(low)}, {_end(high)}]", lambda t: lo <= t <= hi,
                               f"outside [{_end(low)}, {_end(high)}]", context=context, steps=steps,
                               examples=examples, calls=calls, ranges=ranges, seed=seed)


def assert_finite(composer: RewardComposer, *, context: ContextArg = None, steps: StepsArg = None,
                  examples: int = 200, calls: int = 4, ranges: Mapping[str, Bounds] | None = None,
                  seed: int | None = None) -> int:
    """Assert every total of a sampled sequence of training calls is finite; ``seed`` repeats a
    run's draws. Returns the number of examples run."""
    return _assert_every_total(composer, "finite", math.isfinite, "not finite", context=context, steps=steps,
                               examples=examples, calls=calls, ranges=ranges, seed=seed)


def _end(v: float | None) -> str:
    return "null" if v is None or math.isinf(v) else f"{v:g}"


# ---- a config's expect: section ----------------------------------------------------------------
@dataclass(frozen=True)
class ExpectationResult:
    """One expectation's outcome: ``proved``, ``tested`` (``examples`` run) or ``violated``."""

    name: str
    status: str
    detail: str
    examples: int = 0
    error: ExpectationError | None = None


def check_config(composer: RewardComposer, expect: Expectations | None = None, *,
                 examples: int = 200, seed: int | None = 0) -> list[ExpectationResult]:
    """Verify each expectation (default: the config's ``expect:`` section), statically where
    possible, else by sampling ``examples`` examples; never raises on a violation. ``seed``
    (default 0) makes two checks of one config draw the same examples (None: fresh draws)."""
    expect = expect if expect is not None else composer.spec.expect
    if expect is None:
        return []
    ranges = expect.inputs
    jobs: list[tuple[str, Callable[[], Proof], Callable[[], int]]] = []
    for key, direction in expect.monotone.items():
        jobs.append((f"monotone in {key} ({direction})",
                     lambda key=key, direction=direction: prove_monotone(composer, key, direction, ranges),
                     lambda key=key, direction=direction: assert_monotone(composer, key, direction,
                                                                          examples=examples, ranges=ranges, seed=seed)))
    if expect.range is not None:
        low, high = expect.range
        jobs.append((f"range [{_end(low)}, {_end(high)}]", lambda: prove_range(composer, low, high, ranges),
                     lambda: assert_range(composer, low, high, examples=examples, ranges=ranges, seed=seed)))
    if expect.finite:
        jobs.append(("finite", lambda: prove_finite(composer, ranges),
                     lambda: assert_finite(composer, examples=examples, ranges=ranges, seed=seed)))
    results = []
    for name, prove, sample in jobs:
        proof = prove()
        if proof.proved:
            results.append(ExpectationResult(name, "proved", proof.reason))
            continue
        try:
            ran = sample()
        except ExpectationError as exc:
            results.append(ExpectationResult(name, "violated", f"{exc.detail}\n(static proof: {proof.reason})",
                                             error=exc))
            continue
        results.append(ExpectationResult(name, "tested", f"static proof: {proof.reason}", ran))
    return results
