"""argparse types shared by every ``rewardkit`` subcommand: each turns a flag's text into a checked
value, or raises ``ArgumentTypeError`` with what was expected and what was given."""

from __future__ import annotations

import argparse
import math
from typing import Callable

from ..params import describe

#: --step and --seed: integers beyond this are not exact as floats, which schedules compute with
MAX_EXACT_INTEGER = 2**53


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_whole_number(text: str) -> int:
    """An integer >= 1, where anything else (text included) reads as "not a positive whole number"."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def int_range(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""
    expected = f"expected an integer from {low} to {high}" + (f" ({why})" if why else "")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{expected}, got {value}")
        return value

    return parse


def exact_integer(text: str) -> int:
    """An integer from 0 to 2**53 (a step or a seed: exact as a float)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if not 0 <= value <= MAX_EXACT_INTEGER:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**53, got {value}")
    return value


def step(text: str) -> int:
    """A training step for weight schedules: an integer from 0 to 2**53."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {describe(text)}") from None
    if not 0 <= value <= MAX_EXACT_INTEGER:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**53, got {describe(value)}")
    return value


def seconds(high: float = math.inf) -> Callable[[str], float]:
    """A number of seconds above 0 and at most ``high`` (finite; NaN refused)."""
    expected = ("expected a positive number of seconds" if high == math.inf
                else f"expected a number of seconds above 0 and at most {high:g}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if not 0 < value <= high or value == math.inf:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    return parse


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return value
