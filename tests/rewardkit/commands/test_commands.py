"""One shape for a command: every core subcommand is a module with ``add(subparsers)``, the CLI's
parser is built from that list, and the argparse types say what they expected."""

from __future__ import annotations

import argparse
import importlib
import math

import pytest

from rewardkit.cli import build_parser
from rewardkit.commands import CORE_COMMANDS
from rewardkit.commands import arg_types as t


def test_every_core_command_is_one_module_whose_add_adds_exactly_it() -> None:
    for name, module in CORE_COMMANDS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add(sub)
        assert list(sub.choices) == [name], module
        parser = sub.choices[name]
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # migrate's sources
        funcs = [p.get_default("func") for a in nested for p in a.choices.values()] or [parser.get_default("func")]
        assert funcs and all(callable(f) for f in funcs), name
    parser = build_parser()
    listed = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert list(listed)[:len(CORE_COMMANDS)] == list(CORE_COMMANDS)


@pytest.mark.parametrize("parse, text, message", [
    (t.non_negative_int, "-1", "expected an integer >= 0, got -1"),
    (t.positive_int, "0", "expected a positive integer, got '0'"),
    (t.positive_whole_number, "x", "expected a positive whole number, got 'x'"),
    (t.int_range(2, 5, "why"), "9", "expected an integer from 2 to 5 (why), got 9"),
    (t.exact_integer, str(2**53 + 1), "expected an integer from 0 to 2**53"),
    (t.step, "1.5", "expected an integer, got"),
    (t.seconds(), "nan", "expected a positive number of seconds, got 'nan'"),
    (t.seconds(), "inf", "expected a positive number of seconds, got 'inf'"),
    (t.seconds(10.0), "11", "expected a number of seconds above 0 and at most 10, got '11'"),
    (t.port, "70000", "expected a port from 1 to 65535, got '70000'"),
])
def test_each_type_refuses_with_what_it_expected(parse, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*").replace("+", r"\+")):
        parse(text)


def test_each_type_accepts_its_values() -> None:
    assert t.non_negative_int("0") == 0 and t.positive_int("3") == 3 and t.int_range(2, 5)("5") == 5
    assert t.exact_integer(str(2**53)) == 2**53 and t.step("7") == 7 and t.port("8080") == 8080
    assert t.seconds()("0.5") == 0.5 and t.seconds(10.0)("10") == 10.0 and not math.isnan(t.seconds()("1e300"))
