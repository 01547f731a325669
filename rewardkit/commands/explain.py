"""``rewardkit explain``: evaluate a config on a context file and print every term's raw,
normalized, weight and contribution, and the total (or the Python the config compiles to)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

import numpy as np

from ..composer import RewardComposer, RewardOutput
from ..config import MAX_DEPTH, MAX_FILE_BYTES, check_structure, require_path
from ..errors import ConfigError, RewardKitError
from ..params import describe
from .arg_types import step
from .common import EXIT_OK, EXIT_USAGE, add_import_option, import_modules


class ContextError(RewardKitError):
    """A context file for ``explain`` is missing, malformed or lacks keys."""


def add(sub: Any) -> None:
    """The ``explain`` subcommand."""
    p = sub.add_parser("explain", help="evaluate a config on a context and print each term",
                       description="Print raw, normalized, weight and contribution of every term, and the total; "
                                   "--show-code prints the Python the config compiles to.")
    p.add_argument("config", metavar="CONFIG", help="YAML reward config")
    p.add_argument("--context", default=None, metavar="CTX_JSON",
                   help="JSON object of context signals (or a list of them, evaluated in order)")
    p.add_argument("--show-code", action="store_true",
                   help="print the Python functions compiled from the config (single-env and batched)")
    p.add_argument("--step", type=step, default=None, metavar="N",
                   help="global step for weight schedules (default 0)")
    add_import_option(p)
    p.set_defaults(func=cmd_explain)


def load_contexts(path: str, text_keys: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Read ``path`` as one context (a JSON object) or a sequence of them (a JSON list).

    Numbers stay floats; lists become float arrays (per-replica vectors); keys in ``text_keys``
    (read as text by the config) hold a string or a list of strings. Errors name the file
    and the key. The file gets the limits of YAML configs (size, nesting depth, number of values).
    """
    require_path(path, "load_contexts")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ContextError(f"{path}: expected an existing JSON file, got a missing path") from None
    except OSError as exc:
        raise ContextError(f"{path}: expected a readable UTF-8 file: {exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ContextError(f"{path}: expected a file of at most {MAX_FILE_BYTES} bytes, got a larger one")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ContextError(f"{path}: expected a readable UTF-8 file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ContextError(f"{path}: expected valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ContextError(f"{path}: expected at most {MAX_DEPTH} levels of nested lists and objects, got more") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ContextError(f"{path}: expected valid JSON: {describe(str(exc))}") from None
    try:
        check_structure(data, source=path)
    except ConfigError as exc:
        raise ContextError(str(exc)) from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ContextError(f"{path}: expected a JSON object (or a non-empty list of them), got an empty list")
    contexts = []
    for n, item in enumerate(items):
        where = f"[{n}]" if isinstance(data, list) else ""
        if not isinstance(item, dict):
            raise ContextError(f"{path}{where}: expected a JSON object mapping signal names to numbers or text, "
                               f"got {type(item).__name__}")
        ctx: dict[str, Any] = {}
        for key, value in item.items():
            ctx[key] = _context_value(value, f"{path}{where}: key {key!r}", key in text_keys)
        contexts.append(ctx)
    return contexts


def _context_value(value: Any, where: str, text: bool = False) -> Any:
    if text:  # numbers are read as text, as the composer reads them (an integer answer column)
        def textual(v: Any) -> bool:
            return isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool))

        if textual(value) or (isinstance(value, list) and all(textual(v) for v in value)):
            return value
        raise ContextError(f"{where}: expected text (a string or a number, or a list of them), got {describe(value)}")
    if isinstance(value, bool) or value is None or isinstance(value, (str, dict)):
        raise ContextError(f"{where}: expected a number or a list of numbers, got {describe(value)}")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            raise ContextError(f"{where}: expected a number within float range, got {describe(value)}") from None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ContextError(f"{where}: expected a number or a (nested) list of numbers of one shape, "
                           f"got {describe(value)}") from None
    return arr


def _fmt(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "[" + ", ".join(_fmt(float(v)) for v in value.reshape(-1)) + "]"
    v = float(value)
    if v == 0.0:
        return "0"
    return f"{v:.6g}"


def explain_table(composer: RewardComposer, out: RewardOutput) -> str:
    """Rows ``term raw normalized weight contribution`` for every term, then the total."""
    header = ("term", "raw", "normalized", "weight", "contribution")
    rows = []
    for name in composer.term_names:
        t = out.terms[name]
        depth = name.count("/")
        rows.append(("  " * depth + name, _fmt(t.raw), _fmt(t.normalized), _fmt(t.weight), _fmt(t.contribution)))
    top = [n for n in composer.term_names if "/" not in n]
    contrib_sum = sum((out.terms[n].contribution for n in top), 0.0)
    has_total_transforms = composer.transforms_total
    if has_total_transforms:
        rows.append(("sum of top-level", "", "", "", _fmt(contrib_sum)))
    rows.append(("total", "", "", "", _fmt(out.total)))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(5)]

    def line(r: Sequence[str]) -> str:
        return "  ".join([r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 5)]).rstrip()

    sep = "-" * len(line(header))
    body = [line(r) for r in rows]
    table = [line(header), sep] + body[:-1 - has_total_transforms] + [sep] + body[-1 - has_total_transforms:]
    # what a term reported about the call (a remote term's latency, requests, failures...)
    table += [f"{name}: " + ", ".join(f"{key}={_fmt(value)}" for key, value in out.terms[name].info.items())
              for name in composer.term_names if out.terms[name].info]
    # where a term with applies_to gave a value (elsewhere its row reads 0)
    table += [f"{name}: applies={_fmt_applies(out.terms[name].applies)}"
              for name in composer.term_names if out.terms[name].applies is not None]
    return "\n".join(table)


def _fmt_applies(mask: Any) -> str:
    if isinstance(mask, (bool, np.bool_)):
        return "yes" if mask else "no"
    return "[" + ", ".join("yes" if v else "no" for v in np.asarray(mask).reshape(-1)) + "]"


def cmd_explain(args: argparse.Namespace) -> int:
    """Evaluate a config on the context(s) of a JSON file and print the per-term breakdown."""
    import_modules(args.imports)
    composer = RewardComposer.from_yaml(args.config)
    if args.show_code:
        print(composer.generated_code(), end="")
        if args.context is None:
            return EXIT_OK
        print()
    if args.context is None:
        print("rewardkit explain: error: give --context CTX_JSON (or --show-code)", file=sys.stderr)
        return EXIT_USAGE
    contexts = load_contexts(args.context, composer.text_keys)
    required = composer.required_context_keys()
    for n, ctx in enumerate(contexts):
        missing = sorted(required - set(ctx))
        if missing:
            where = f"{args.context}[{n}]" if len(contexts) > 1 else args.context
            raise ContextError(
                f"{where}: missing context key{'s' if len(missing) > 1 else ''} "
                + ", ".join(repr(k) for k in missing) + f" that {args.config} reads; "
                + f"the context has: {', '.join(sorted(ctx)) or 'nothing'}")
    for n, ctx in enumerate(contexts):
        step = args.step if n == 0 else None
        used_step = composer.step if step is None else step
        try:
            out = composer(ctx, step=step)
        except (RewardKitError, ValueError, ArithmeticError) as exc:
            # non-finite or missing values, shape mismatches, negative inputs a component refuses
            raise ContextError(f"{args.context}: {exc}") from None
        title = f"{args.config} at step {used_step}"
        if len(contexts) > 1:
            title = f"context {n + 1}/{len(contexts)}: " + title
            if n:
                print()
        print(title)
        print(explain_table(composer, out))
    return EXIT_OK
