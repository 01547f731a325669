"""Emitter: the single-environment function's reading of the context, each key once, as a float,
a ``str`` or a list of floats, checked finite; a NumPy array with an environment axis leaves for the
batched path before anything changed."""

from __future__ import annotations

from typing import Sequence

from ..inputs import InputSlot
from .names import Scope
from .source import Emitted


def scalar_inputs(slots: Sequence[InputSlot], scope: Scope, *, assume_present: bool, allow_nonfinite: bool) -> Emitted:
    """Read each context key once and check it is finite (``assume_present``: optional keys too
    are read with ``ctx[key]``; a missing one raises ``KeyError``, which the caller hands on)."""
    lines: list[str] = []
    numbers: list[tuple[str, str]] = []  # (key, variable) of the numbers read as present
    for slot in slots:
        key, nd = slot.key, slot.ndim
        optional = slot.optional and not assume_present
        x, total = scope.ctx(key), scope.ctx_sum(key)
        if slot.text:  # one str; a list or array of them is a batch (_text raises _NotScalar)
            if optional:
                lines += [f"    {x} = ctx.get({key!r}, _ABSENT)",
                          f"    if {x} is _ABSENT: {x} = None",
                          f"    elif {x}.__class__ is not str: {x} = _text({x}, {key!r})"]
            else:
                lines += [f"    {x} = ctx[{key!r}]",
                          f"    if {x}.__class__ is not str: {x} = _text({x}, {key!r})"]
            continue
        nonfinite = "raise _NotScalar" if allow_nonfinite else f"_nonfinite({key!r}, {x})"
        # a NumPy array with an environment axis: the batched path, before anything changed
        # (a direct call: no exception raised and caught on the way)
        batch = "return _fallback(ctx, step, terminated, truncated, _BATCH)"
        # ``v - v`` is 0.0 (false) for a finite float and NaN (true) for NaN and +-inf: the
        # finiteness check without a function call
        if nd == 0 and optional:
            lines += [f"    {x} = ctx.get({key!r}, _ABSENT)",
                      f"    if {x}.__class__ is float:",
                      f"        if {x} - {x}: {nonfinite}",
                      f"    elif {x} is _ABSENT: {x} = None",
                      "    else:",
                      f"        if {x}.__class__ is _ndarray and {x}.ndim: {batch}",
                      f"        {x} = _number({x}, {key!r})",
                      f"        if {x} - {x}: {nonfinite}"]
            continue
        if nd == 0:
            lines += [f"    {x} = ctx[{key!r}]",
                      f"    if {x}.__class__ is not float:",
                      f"        if {x}.__class__ is _ndarray and {x}.ndim: {batch}",
                      f"        {x} = _number({x}, {key!r})"]
            numbers.append((key, x))  # checked below, all at once
            continue
        lines += _vector_input(key, nd, x, total, optional, nonfinite, batch)
    lines += _numbers_finite(numbers, allow_nonfinite)
    return Emitted(lines)


def _vector_input(key: str, nd: int, x: str, total: str, optional: bool, nonfinite: str, batch: str) -> list[str]:
    """One per-replica key: a list of floats (fast to read from Python), its sum offered to inlined blocks."""
    lines = []
    if optional:
        lines.append(f"    {x} = ctx.get({key!r}, _ABSENT)")
        lines.append(f"    if {x} is _ABSENT: {x} = None")
    else:
        lines.append(f"    {x} = ctx[{key!r}]")
    guard = f"{x} is not None and " if optional else ""
    fast = f"{x}.__class__ is _ndarray and {x}.dtype is _F64 and {x}.ndim == 1"
    # a flat list of Python floats/ints (the common case) skips numpy.asarray and back
    plain = f"{x}.__class__ is list and ({total} := _plain_floats({x})) is not None"
    if optional:
        if nd == 1:
            lines.append(f"    elif {plain}: {x} = {total}")
        lines.append(f"    elif {fast}: {x} = {x}.tolist()")
    else:
        lead = "if"
        if nd == 1:
            lines.append(f"    if {plain}: {x} = {total}")
            lead = "elif"
        lines.append(f"    {lead} {fast}: {x} = {x}.tolist()")
    lines.append(f"    elif {x}.__class__ is _ndarray and {x}.ndim > {nd}: {batch}")
    lines.append(f"    else: {x} = _vector_input({x}, {key!r}, {nd})")
    if optional:
        lines.append(f"    {total} = None if {x} is None else sum({x})")
    else:
        lines.append(f"    {total} = sum({x})")  # offered to inlined blocks as <var>_sum
    # the sum of finite values is finite unless it overflows: then check each value
    lines.append(f"    if {guard}{total} - {total} and not all(map(_isfinite, {x})): {nonfinite}")
    return lines


def _numbers_finite(numbers: list[tuple[str, str]], allow_nonfinite: bool) -> list[str]:
    """The finiteness test of the scalar keys read as present: one test on their sum, which is finite
    when they all are (unless it overflows); only then each one, so the error names the first bad key."""
    if not numbers:
        return []
    nonfinite = "raise _NotScalar" if allow_nonfinite else "_nonfinite({key!r}, {x})"
    if len(numbers) == 1:
        key, x = numbers[0]
        return [f"    if {x} - {x}: {nonfinite.format(key=key, x=x)}"]
    return ([f"    _inputs_sum = {' + '.join(x for _, x in numbers)}", "    if _inputs_sum - _inputs_sum:"]
            + [f"        if {x} - {x}: {nonfinite.format(key=key, x=x)}" for key, x in numbers])
