"""What an emitter returns (:class:`Emitted`: lines of source and the globals they name) and how a
finished function is defined (:func:`define`, its source registered so tracebacks show it)."""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class Emitted:
    """Lines of a generated function's body and the globals those lines name."""

    lines: list[str] = field(default_factory=list)
    globals: dict[str, Any] = field(default_factory=dict)

    def add(self, other: "Emitted", indent: str = "") -> "Emitted":
        """Append ``other``'s lines (each prefixed with ``indent``) and take its globals."""
        self.lines.extend(indent + line for line in other.lines)
        self.globals.update(other.globals)
        return self

    def bind(self, name: str, value: Any) -> str:
        """Make ``value`` a global of the function under ``name`` (a name the scope handed out)."""
        self.globals[name] = value
        return name


def indented(lines: Iterable[str], prefix: str = "    ") -> list[str]:
    return [prefix + line for line in lines]


def define(source: str, env: dict[str, Any], name: str, filename: str) -> Any:
    """Compile generated ``source`` (our own code, built from a validated config) and return ``name``.

    The source is registered with ``linecache`` under ``filename`` so tracebacks show its lines.
    """
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), env, namespace)  # noqa: S102
    return namespace[name]


def forget_sources(filenames: Iterable[str]) -> None:
    """Drop a plan's sources from ``linecache`` (the plan is gone)."""
    for filename in filenames:
        linecache.cache.pop(filename, None)
