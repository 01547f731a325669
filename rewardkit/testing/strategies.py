"""Hypothesis strategies for rewardkit: component parameters and inputs, composer contexts, steps.

``contexts(composer)`` draws the context a composer reads: every key it reads, scalars as floats
and per-replica vectors as 1-D arrays (one replica count per context), each value within the
domain its components declare (``BaseReward.input_domains``) or the range given for that key.
Parameters are drawn from a component's declared ``params`` schema.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from hypothesis import strategies as st

from ..base import BaseReward
from ..composer import RewardComposer
from ..config import walk
from ..params import Param
from ..schedules import Schedule

Bounds = tuple[float, float]
ANY_FINITE: Bounds = (-math.inf, math.inf)
#: Replica counts drawn for per-replica vector inputs.
MAX_REPLICAS = 6
#: Default horizon of sampled steps when no schedule moves (or only beyond it).
DEFAULT_HORIZON = 1_000_000


def floats_in(bounds: Bounds = ANY_FINITE) -> st.SearchStrategy[float]:
    """Finite floats in the closed range ``bounds`` (the whole float64 range by default: huge
    values and subnormals included)."""
    low, high = bounds
    return st.floats(min_value=None if math.isinf(low) else low, max_value=None if math.isinf(high) else high,
                     allow_nan=False, allow_infinity=False)


# ---- parameters -------------------------------------------------------------------------------
@st.composite
def _clip_bounds(draw: st.DrawFn) -> list[float | None] | None:
    if draw(st.booleans()):
        return None
    low, high = sorted(draw(st.lists(floats_in(), min_size=2, max_size=2, unique=True)))
    return [draw(st.sampled_from([low, None])), draw(st.sampled_from([high, None]))]


#: Patterns drawn for a regular-expression parameter: format checks of the kinds users write
#: (none backtracks catastrophically; the timeout path has a test of its own).
PATTERNS = (r"\d+", r"^<answer>.*</answer>$", r"(?i)answer\W", r"[.!?]$", r"\bcat\b", r"^\s*$", r"é|étoile",
            r"(?s)<answer>(.*?)</answer>")


def _choice_options(expected: str) -> list[Any]:
    """Options of a ``Param.choice``, read back from its ``expected`` text ("one of 'a', 'b'")."""
    return list(ast.literal_eval("(" + expected[len("one of "):] + ",)"))


def param_strategy(param: Param) -> st.SearchStrategy[Any] | None:
    """Values a ``Param`` made by one of its constructors accepts; ``None`` for a custom kind."""
    expected = param.expected
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "a finite number": floats_in(),
        "a positive number": st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False),
        "a non-negative number": floats_in((0.0, math.inf)),
        "a number in [0, 1]": floats_in((0.0, 1.0)),
        "a number in (0, 1]": st.floats(min_value=0.0, max_value=1.0, exclude_min=True),
        "a non-empty string": st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6),
        "a list [low, high] or null": _clip_bounds(),
        "a regular expression": st.sampled_from(PATTERNS),
    }
    if expected in kinds:
        return kinds[expected]
    if expected.startswith("one of "):
        try:
            return st.sampled_from(_choice_options(expected))
        except (ValueError, SyntaxError):
            return None
    return None


def params_strategy(cls: type[BaseReward], given: Mapping[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Parameter mappings for ``cls``: each drawn from its schema unless ``given`` fixes it (a
    value) or overrides its strategy (a Hypothesis strategy). A parameter of a custom kind keeps
    its default; a required one of a custom kind must be given."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(cls.params))
    if unknown:
        raise ValueError(f"{cls.__name__} has no parameter {unknown[0]!r}; it has: {', '.join(sorted(cls.params)) or 'none'}")
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for name, param in cls.params.items():
        if name in given:
            value = given[name]
            fields[name] = value if isinstance(value, st.SearchStrategy) else st.just(value)
            continue
        strategy = param_strategy(param)
        if strategy is None:
            if param.required:
                raise ValueError(f"{cls.__name__}: cannot draw required parameter {name!r} ({param.expected}); "
                                 f"pass params={{{name!r}: value or strategy}}")
            strategy = st.just(param.default)
        fields[name] = strategy
    return st.fixed_dictionaries(fields)


# ---- component inputs -------------------------------------------------------------------------
def input_bounds(component: BaseReward, local: str, override: Mapping[str, Bounds] | None = None) -> Bounds:
    """Sampling range of one input: ``override`` if given, else the component's declared domain."""
    if override and local in override:
        return override[local]
    return tuple(getattr(component, "input_domains", {}).get(local, ANY_FINITE))  # type: ignore[return-value]


#: Words text strategies mix in: numbers, format tags, punctuation, case, repeats, non-ASCII.
TEXT_WORDS = ("the", "The", "cat", "cat", "answer", "Answer:", "is", "42", "-3.5", "1,000", "0.25", "<answer>",
              "</answer>", ".", "!", "?", "\n", "\t", "étoile", "aaaa", "b")


def texts(max_words: int = 24) -> st.SearchStrategy[str]:
    """Completions: arbitrary Unicode text, or runs of :data:`TEXT_WORDS` (numbers, tags, repeats)."""
    return st.one_of(st.text(max_size=40),
                     st.lists(st.sampled_from(TEXT_WORDS), max_size=max_words).map(" ".join))


def component_inputs(component: BaseReward, n_envs: int, n_replicas: int,
                     ranges: Mapping[str, Bounds] | None = None) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """One call's inputs keyed by local input name, shaped ``(n_envs,)`` or ``(n_envs, n_replicas)``;
    text inputs are ``(n_envs,)`` object arrays of ``str``."""
    fields = {}
    for local, ndim in component.inputs.items():
        if local in component.text_inputs:
            fields[local] = st.lists(texts(), min_size=n_envs, max_size=n_envs).map(_object_array)
            continue
        shape = (n_envs,) if ndim == 0 else (n_envs, n_replicas)
        size = int(np.prod(shape))
        fields[local] = st.lists(floats_in(input_bounds(component, local, ranges)), min_size=size, max_size=size).map(
            lambda values, shape=shape: np.array(values, dtype=np.float64).reshape(shape))
    return st.fixed_dictionaries(fields)


def _object_array(values: list[str]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


# ---- composer contexts -------------------------------------------------------------------------
@dataclass(frozen=True)
class ContextKey:
    """A context key a composer reads: its per-environment axes, sampling range, optionality."""

    name: str
    ndim: int
    bounds: Bounds
    optional: bool
    text: bool = False
    #: values a term's ``applies_to`` names for this key (drawn half of the time)
    choices: tuple[str, ...] = ()


def context_keys(composer: RewardComposer, ranges: Mapping[str, Bounds] | None = None) -> list[ContextKey]:
    """Every key ``composer`` reads, with the intersection of its readers' domains (or ``ranges``)."""
    found: dict[str, dict[str, Any]] = {}
    for leaf in composer.leaves():
        comp = leaf.component
        for local, key in comp.input_keys.items():
            entry = found.setdefault(key, {"ndim": comp.inputs[local], "low": -math.inf, "high": math.inf,
                                           "optional": True, "text": local in comp.text_inputs})
            low, high = input_bounds(comp, local)
            entry["low"], entry["high"] = max(entry["low"], low), min(entry["high"], high)
            entry["optional"] &= local in comp.optional_inputs
        for key, values in (leaf.applies_to or {}).items():  # applies_to columns: text, drawn among their values
            entry = found.setdefault(key, {"ndim": 0, "low": -math.inf, "high": math.inf, "optional": False,
                                           "text": True})
            entry["optional"] = False
            entry["choices"] = tuple(sorted(set(entry.get("choices", ())) | values))
    keys = []
    for name in sorted(found):
        entry = found[name]
        bounds = (entry["low"], entry["high"])
        if ranges and name in ranges:
            bounds = ranges[name]
        if not bounds[0] <= bounds[1]:
            raise ValueError(f"context key {name!r}: the domains of the components reading it do not overlap")
        keys.append(ContextKey(name, entry["ndim"], bounds, entry["optional"], entry["text"], entry.get("choices", ())))
    return keys


def contexts(composer: RewardComposer, *, ranges: Mapping[str, Bounds] | None = None,
             n_envs: int | None = None, max_replicas: int = MAX_REPLICAS) -> st.SearchStrategy[dict[str, Any]]:
    """Contexts that ``composer`` reads, for one environment or (``n_envs``) a batch.

    Scalars are floats (``(n_envs,)`` arrays in a batch); per-replica vectors are arrays of one
    drawn replica count. ``ranges`` maps a context key to the ``(low, high)`` it is drawn from;
    the default is the domain its components declare (any finite float when they declare none).
    Optional keys (read only by optional inputs) are sometimes left out.
    """
    if ranges is None and composer.spec.expect is not None:
        ranges = composer.spec.expect.inputs  # the config's own sampling ranges
    keys = context_keys(composer, ranges)

    @st.composite
    def draw_context(draw: st.DrawFn) -> dict[str, Any]:
        n_replicas = draw(st.integers(1, max_replicas))
        ctx: dict[str, Any] = {}
        for key in keys:
            if key.optional and draw(st.booleans()):
                continue
            if key.text:  # a str for one environment, a list of them for a batch
                text = st.one_of(st.sampled_from(key.choices), texts()) if key.choices else texts()
                drawn = draw(st.lists(text, min_size=n_envs or 1, max_size=n_envs or 1))
                ctx[key.name] = drawn[0] if n_envs is None else drawn
                continue
            per_env = 1 if key.ndim == 0 else n_replicas
            count = per_env * (n_envs or 1)
            values = draw(st.lists(floats_in(key.bounds), min_size=count, max_size=count))
            if n_envs is None:
                ctx[key.name] = values[0] if key.ndim == 0 else np.array(values, dtype=np.float64)
            else:
                shape = (n_envs,) if key.ndim == 0 else (n_envs, n_replicas)
                ctx[key.name] = np.array(values, dtype=np.float64).reshape(shape)
        return ctx

    return draw_context()


# ---- training steps ----------------------------------------------------------------------------
def schedule_breakpoints(schedule: Schedule) -> set[int]:
    """Steps where ``schedule`` changes behaviour (start, end of a ramp, stairs, points)."""
    config = schedule.config
    start = int(config.get("start_step") or 0)
    points = {start}
    span = getattr(schedule, "span", None)
    if span is not None:
        points.add(start + int(math.ceil(span)))
    every = config.get("every")
    if every:
        points.update(start + int(math.ceil(k * every)) for k in range(1, 4))
    for step, _ in config.get("points") or []:
        points.add(max(0, int(step)))
    return points


def weight_schedules(composer: RewardComposer) -> list[tuple[str, Schedule]]:
    """(term name, weight schedule) of every term and group of ``composer``."""
    return [(node.name, node.weight) for node in walk(composer.spec.nodes)]


def steps(composer: RewardComposer, within: tuple[int, int] | None = None) -> st.SearchStrategy[int]:
    """Training steps to evaluate at: any step in ``within`` (default from 0 to past the last
    breakpoint of the weight schedules), with the breakpoints and their neighbours favoured."""
    marks: set[int] = {0}
    for _, schedule in weight_schedules(composer):
        marks |= schedule_breakpoints(schedule)
    if within is None:
        within = (0, max(DEFAULT_HORIZON, 2 * max(marks)))
    first, last = within
    near = sorted({m + d for m in marks for d in (-1, 0, 1) if first <= m + d <= last} | {first, last})
    return st.one_of(st.integers(first, last), st.sampled_from(near))
