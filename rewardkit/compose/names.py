"""The names of one generated function: every identifier handed out once, and the variables of a
plan's terms and context keys, asked for by what they hold (``scope.raw("ttft")``)."""

from __future__ import annotations

import keyword
import re
from typing import Iterable

#: Names the generated functions use for themselves; terms and context keys never take them.
RESERVED = frozenset({"ctx", "step", "terminated", "truncated", "done", "total", "out", "_self", "start", "_pending",
                      "_inputs_sum"})


def identifier(text: str) -> str:
    """A Python identifier that reads like ``text``: ``group/term`` -> ``group__term``."""
    ident = re.sub(r"\W", "_", text.replace("/", "__"), flags=re.ASCII)
    return ident if ident and not ident[0].isdigit() else "t" + ident


class Namer:
    """Hands out identifiers, each once (a suffix ``_2``, ``_3``... settles collisions)."""

    def __init__(self, reserved: Iterable[str]) -> None:
        self.used: set[str] = set(reserved)

    def unique(self, base: str) -> str:
        name, k = base, 2
        while name in self.used or keyword.iskeyword(name):
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def reserve(self, names: Iterable[str]) -> None:
        """Names something else already took (the function's fixed globals, a component's temporaries)."""
        self.used.update(names)


class Scope:
    """The variables of one generated function: four per node (``<term>``, its contribution;
    ``<term>_raw``, ``<term>_norm``, ``<term>_weight``), a mask per ``applies_to`` term, and two per
    context key (``ctx_<key>``, ``ctx_<key>_sum``); then ``fixed`` globals, which helpers never take."""

    def __init__(self, node_names: Iterable[str], applying: Iterable[str], keys: Iterable[str],
                 fixed: Iterable[str] = ()) -> None:
        self.namer = Namer(RESERVED)
        applying = set(applying)
        self._vars: dict[str, str] = {}
        for name in node_names:
            base = identifier(name)
            for suffix in ("", "_raw", "_norm", "_weight"):
                self._vars[name + suffix] = self.namer.unique(base + suffix)
            if name in applying:
                self._vars[name + "_applies"] = self.namer.unique(base + "_applies")
        for key in keys:
            self._vars["ctx:" + key] = self.namer.unique("ctx_" + identifier(key))
            self._vars["ctx_sum:" + key] = self.namer.unique("ctx_" + identifier(key) + "_sum")
        self.namer.reserve(fixed)

    def contribution(self, node: str) -> str:
        return self._vars[node]

    def raw(self, node: str) -> str:
        return self._vars[node + "_raw"]

    def normalized(self, node: str) -> str:
        return self._vars[node + "_norm"]

    def weight(self, node: str) -> str:
        return self._vars[node + "_weight"]

    def applies(self, node: str) -> str:
        return self._vars[node + "_applies"]

    def ctx(self, key: str) -> str:
        return self._vars["ctx:" + key]

    def ctx_sum(self, key: str) -> str:
        return self._vars["ctx_sum:" + key]

    def unique(self, base: str) -> str:
        """A fresh identifier for a helper (a component's function, a normalizer, a snapshot)."""
        return self.namer.unique(base)
