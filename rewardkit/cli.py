"""The ``rewardkit`` command line: the core subcommands (:data:`rewardkit.commands.CORE_COMMANDS`, one
module each) and the plug-ins of the entry-point group ``rewardkit.commands``, each of which loads a
function ``add(subparsers)`` that adds its parser and sets ``func=callable(args) -> int``.
A plug-in is imported only when its subcommand runs (so ``validate`` never pays for torch), and
one that fails to import is reported, with exit code 2, only when that subcommand is invoked.

Exit codes: 0 success, 1 bad config or context, 2 usage error or unavailable plug-in (a
subcommand may define more: ``audit`` and ``stress`` say 1 for a finding).
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import Any, Callable, Sequence

from . import __version__
from .commands import CORE_COMMANDS, add_core_commands
from .commands.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from .errors import RewardKitError

PLUGIN_GROUP = "rewardkit.commands"


# ---- plugins --------------------------------------------------------------------------------
def plugin_entry_points() -> list[metadata.EntryPoint]:
    """Entry points of the ``rewardkit.commands`` group, first one of each name, by name."""
    seen: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        seen.setdefault(ep.name, ep)
    return [seen[name] for name in sorted(seen)]


def _unavailable(name: str, target: str, exc: BaseException) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"rewardkit {name}: command unavailable: loading {target} failed: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE

    return run


def _add_stub(subparsers: Any, name: str, help_text: str, func: Callable[[argparse.Namespace], int]) -> None:
    """A parser that accepts any arguments and runs ``func`` (help listing or error report)."""
    if name in subparsers.choices:  # the plugin added its parser, then failed
        subparsers.choices[name].set_defaults(func=func, accepts_any_arguments=True)
        return
    parser = subparsers.add_parser(name, help=help_text, add_help=False)
    parser.set_defaults(func=func, accepts_any_arguments=True)


def add_plugin(subparsers: Any, ep: metadata.EntryPoint) -> None:
    """Load ``ep`` and let it add its subcommand; on failure add a stub that reports why."""
    try:
        add = ep.load()
        add(subparsers)
    except Exception as exc:  # noqa: BLE001 - any failure of a plugin must not break the CLI
        _add_stub(subparsers, ep.name, f"(unavailable: {type(exc).__name__})", _unavailable(ep.name, ep.value, exc))
        return
    if ep.name not in subparsers.choices:
        exc = RuntimeError(f"{ep.value} did not add a subcommand named {ep.name!r}")
        _add_stub(subparsers, ep.name, "(unavailable)", _unavailable(ep.name, ep.value, exc))


# ---- parser and entry point -----------------------------------------------------------------
def build_parser(load_plugin: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; plugin ``load_plugin`` is imported, others only listed."""
    parser = argparse.ArgumentParser(
        prog="rewardkit", description="Compose, check and explain reinforcement-learning rewards.")
    parser.add_argument("--version", action="version", version=f"rewardkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_core_commands(sub)
    for ep in plugin_entry_points():
        if ep.name in CORE_COMMANDS:
            continue
        if ep.name == load_plugin:
            add_plugin(sub, ep)
        else:
            _add_stub(sub, ep.name, f"(plugin {ep.value})", lambda args: EXIT_USAGE)
    return parser


def _command_name(argv: Sequence[str]) -> str | None:
    for token in argv:
        if not token.startswith("-"):
            return token
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rewardkit`` command line; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(load_plugin=_command_name(argv))
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "accepts_any_arguments", False):
            parser.error("unrecognized arguments: " + " ".join(extra))
    except SystemExit as exc:  # --help, --version or a usage error (argparse printed it)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = args.func(args)
    except RewardKitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return EXIT_OK if code is None else int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
