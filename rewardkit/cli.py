"""The ``rewardkit`` command: validate and explain reward configs, list and document components.

Core subcommands: ``validate``, ``explain``, ``check`` (which imports Hypothesis only when it
runs), ``stress``, ``components``, ``docs``, ``migrate``, ``optimize`` (which imports optuna only
when it runs), ``audit`` and ``serve-reward``. Other packages add
subcommands through the entry-point group ``rewardkit.commands``: each entry point loads a
function ``add(subparsers)`` that adds its parser and sets ``func=callable(args) -> int``.
A plugin is imported only when its subcommand runs (so ``validate`` never pays for torch), and
one that fails to import is reported, with exit code 2, only when that subcommand is invoked.

Exit codes: 0 success, 1 bad config or context, 2 usage error or unavailable plugin.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from . import __version__
from .composer import RewardComposer, RewardOutput
from .config import MAX_DEPTH, MAX_FILE_BYTES, check_structure, require_path
from .docgen import components_markdown, components_text
from .errors import ConfigError, RewardKitError
from .migrate_rllama import migrate_rllama_file
from .monitor.audit import add_audit_parser
from .params import describe
from .serve_reward.command import add_serve_reward_parser
from .stress.command import add_stress_parser

PLUGIN_GROUP = "rewardkit.commands"
CORE_COMMANDS = ("validate", "explain", "check", "stress", "components", "docs", "migrate", "optimize", "audit",
                 "serve-reward")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class ContextError(RewardKitError):
    """A context file for ``explain`` is missing, malformed or lacks keys."""


# ---- --import --------------------------------------------------------------------------------
def import_modules(names: Sequence[str] | None) -> None:
    """Import the user's modules named by ``--import`` so their ``@register`` components exist.

    The working directory is importable first, as with ``python -m`` (the ``rewardkit`` script
    alone would not find a module beside the user's config)."""
    if names and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names or ():
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
            raise ImportFailed(f"--import {name}: importing it failed: {type(exc).__name__}: {exc}") from None


class ImportFailed(RewardKitError):
    """A module named by ``--import`` could not be imported."""


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): modules that register the user's components."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (its @register components become usable); repeatable")


# ---- validate ------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    """Build each config; print ``<path>: OK`` or the ConfigError. Exit 1 if any failed."""
    import_modules(args.imports)
    failed = 0
    for path in args.configs:
        try:
            composer = RewardComposer.from_yaml(path)
        except ConfigError as exc:
            failed += 1
            print(str(exc) if exc.source else f"{path}: {exc}", file=sys.stderr)
            continue
        keys = ", ".join(sorted(composer.context_keys()))
        n = len(composer.term_names)
        print(f"{path}: OK ({n} term{'s' if n != 1 else ''}; context keys: {keys})")
    return EXIT_ERROR if failed else EXIT_OK


# ---- explain -------------------------------------------------------------------------------
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


# ---- check ---------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    """Verify the ``expect:`` section of each config (see :mod:`rewardkit.testing.check_command`)."""
    import_modules(args.imports)
    try:
        from .testing.check_command import run_check  # Hypothesis is needed only here
    except ImportError as exc:
        print(f"rewardkit check needs Hypothesis: pip install 'rewardkit[testing]' ({exc})", file=sys.stderr)
        return EXIT_USAGE
    return run_check(args)


def _examples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


# ---- components / docs ---------------------------------------------------------------------
def cmd_components(args: argparse.Namespace) -> int:
    """Print every registered component with its summary, params and inputs."""
    print(components_text(), end="")
    return EXIT_OK


def cmd_docs(args: argparse.Namespace) -> int:
    """Write (or, with --check, compare against) the generated Markdown component reference."""
    import_modules(args.imports)
    text = components_markdown()
    if args.out is None:
        print(text, end="")
        return EXIT_OK
    out = Path(args.out)
    try:
        if args.check:
            current = out.read_text(encoding="utf-8") if out.exists() else None
            if current != text:
                print(f"{out}: out of date; run `rewardkit docs --out {out}`", file=sys.stderr)
                return EXIT_ERROR
            print(f"{out}: up to date")
            return EXIT_OK
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        verb = "read" if args.check else "write"
        print(f"error: {out}: cannot {verb} the reference: {reason}", file=sys.stderr)
        return EXIT_ERROR
    print(f"wrote {out} ({text.count(chr(10))} lines)")
    return EXIT_OK


# ---- migrate ---------------------------------------------------------------------------------
def cmd_migrate_rllama(args: argparse.Namespace) -> int:
    """Convert an RLlama config; print or write it, and list what was not converted on stderr."""
    migration = migrate_rllama_file(args.old)
    text = migration.to_yaml()
    if args.out is None:
        print(text, end="")
    else:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"error: -o {args.out}: cannot write the converted config: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_ERROR
        print(f"wrote {args.out} ({len(migration.config['components'])} components)")
    for line in migration.unconverted:
        print(f"not converted: {line}", file=sys.stderr)
    return EXIT_OK


# ---- optimize -------------------------------------------------------------------------------
def cmd_optimize(args: argparse.Namespace) -> int:
    """Run or continue a reward-tuning study (rewardkit.optimize, which imports optuna)."""
    try:
        from .optimize.command import run_optimize
    except ImportError as exc:
        print(f"error: {exc}" if "pip install" in str(exc) else
              f"rewardkit optimize needs optuna (pip install 'rewardkit[optuna]'): {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_optimize(args)


def add_optimize_parser(sub: Any) -> None:
    """The ``optimize`` subcommand's flags (docs/optimization.md)."""
    p = sub.add_parser("optimize", help="tune a reward's weights and parameters with Optuna (resumable)",
                       description="Run or continue an Optuna study over the keys of a search space; "
                                   "--n-trials is the study's total, so running again continues it.")
    p.add_argument("--study", required=True, metavar="NAME", help="study name")
    p.add_argument("--base", required=True, metavar="REWARD.yaml", help="base reward config")
    p.add_argument("--search-space", required=True, metavar="SPACE.yaml", help="key paths to tune and their ranges")
    p.add_argument("--objective", required=True, metavar="vidur|MODULE:FUNCTION",
                   help="a registered objective (group rewardkit.objectives) or MODULE:FUNCTION importable "
                        "from the working directory")
    p.add_argument("--storage", default=None, metavar="URL|PATH",
                   help="RDB URL with a scheme (sqlite:///s.db, postgresql://...) or a journal file "
                        "(default: <study>.journal here)")
    p.add_argument("--n-trials", type=_int_range(0, MAX_TRIALS), default=None, metavar="N",
                   help="the study's total of finished trials (complete, pruned or failed)")
    p.add_argument("--timeout", type=_seconds(MAX_SECONDS), default=None, metavar="S",
                   help="stop starting trials after S seconds")
    p.add_argument("--workers", type=_int_range(1, MAX_WORKERS), default=1, metavar="W",
                   help="worker processes on this machine")
    p.add_argument("--sampler", choices=("tpe", "gp", "random", "nsga2"), default=None,
                   help="default: the study's stored sampler, else tpe")
    p.add_argument("--pruner", choices=("none", "median", "halving", "hyperband", "wilcoxon"), default=None,
                   help="default: the study's stored pruner, else none")
    p.add_argument("--seed", type=_int_range(0, 2**32 - 1), default=None, metavar="S",
                   help="sampler seed, an integer from 0 to 2**32 - 1 (stored with the study; trial n draws from (S, n), so "
                        "workers and later runs never replay a draw)")
    p.add_argument("--trial-timeout", type=_seconds(MAX_SECONDS), default=None, metavar="SECONDS",
                   help="stop a trial (or a noise, validation or report run) after SECONDS and record it as failed")
    p.add_argument("--enqueue", nargs="+", default=None, metavar="CONFIG.yaml",
                   help="seed the study with known reward configs (each once)")
    p.add_argument("--validate", type=_int_range(0, MAX_FINALISTS), default=3, metavar="K",
                   help="re-run the top K configs and the base on validation seeds, paired, and export the winner "
                        "only when it beats the base reliably (default 3; 0: off)")
    p.add_argument("--repeats", type=_int_range(2, MAX_REPEATS, "repeats measure the noise"), default=3,
                   metavar="R", help="evaluations of the base (the noise) and of each finalist at the race's first "
                                     "look, each with its own seeds and training seed (default 3)")
    p.add_argument("--max-repeats", type=_int_range(2, MAX_REPEATS), default=None, metavar="R",
                   help="the race's cap: finalists whose interval still straddles zero get more repeats, up to R "
                        "(default 4 x --repeats)")
    p.add_argument("--export-best", default=None, metavar="OUT.yaml",
                   help="write the validated winner's reward config (the base when none is reliably better)")
    p.add_argument("--report", action="store_true",
                   help="re-evaluate the best trials and the base config on fresh seeds")
    p.set_defaults(func=cmd_optimize)


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

    p = sub.add_parser("validate", help="check reward configs; print OK or the error per file",
                       description="Build each config and report OK or every error (file, key path, expected).")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML reward config(s)")
    add_import_option(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("explain", help="evaluate a config on a context and print each term",
                       description="Print raw, normalized, weight and contribution of every term, and the total; "
                                   "--show-code prints the Python the config compiles to.")
    p.add_argument("config", metavar="CONFIG", help="YAML reward config")
    p.add_argument("--context", default=None, metavar="CTX_JSON",
                   help="JSON object of context signals (or a list of them, evaluated in order)")
    p.add_argument("--show-code", action="store_true",
                   help="print the Python functions compiled from the config (single-env and batched)")
    p.add_argument("--step", type=_step_argument, default=None, metavar="N",
                   help="global step for weight schedules (default 0)")
    add_import_option(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("check", help="prove or test the expect: section of reward configs",
                       description="Verify each expectation of the configs' expect: sections: proved statically "
                                   "where possible, else tested on Hypothesis-sampled contexts and steps. "
                                   "Exit 1 if one is violated.")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML reward config(s) with an expect: section")
    add_import_option(p)
    p.add_argument("--examples", type=_examples, default=200, metavar="N",
                   help="Hypothesis examples per expectation that is not proved (default 200)")
    p.add_argument("--seed", type=_non_negative, default=0, metavar="N",
                   help="random seed of the sampled examples: the same seed draws the same examples (default 0)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("components", help="list registered components with params and inputs")
    p.set_defaults(func=cmd_components)

    p = sub.add_parser("docs", help="generate the Markdown component reference",
                       description="Generate the component reference from the registry.")
    p.add_argument("--out", default=None, metavar="PATH", help="file to write (default: print it)")
    p.add_argument("--check", action="store_true", help="exit 1 if PATH differs from the generated text")
    add_import_option(p)
    p.set_defaults(func=cmd_docs)

    p = sub.add_parser("migrate", help="convert a reward config from another library",
                       description="Convert another library's reward config into a rewardkit config.")
    migrate = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    m = migrate.add_parser("rllama", help="an RLlama YAML (composer_settings / reward_components / reward_shaping)",
                           description="Convert an RLlama config; what cannot be converted is listed with its line.")
    m.add_argument("old", metavar="OLD.yaml", help="the RLlama config")
    m.add_argument("-o", "--out", default=None, metavar="NEW.yaml", help="file to write (default: print it)")
    m.set_defaults(func=cmd_migrate_rllama)

    add_optimize_parser(sub)
    add_audit_parser(sub, add_import_option, import_modules)
    add_stress_parser(sub, add_import_option, import_modules)
    add_serve_reward_parser(sub)

    for ep in plugin_entry_points():
        if ep.name in CORE_COMMANDS:
            continue
        if ep.name == load_plugin:
            add_plugin(sub, ep)
        else:
            _add_stub(sub, ep.name, f"(plugin {ep.value})", lambda args: EXIT_USAGE)
    return parser


MAX_CLI_STEP = 2**53  # --step: steps beyond this are not exact as floats, which schedules compute with


def _non_negative(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


#: optimize's flag ranges (the seconds: the OS timer's limit, about 115 days; repeats: the validation seed range)
MAX_SECONDS = 1e7
MAX_TRIALS = 10**9
MAX_WORKERS = 256
MAX_FINALISTS = 100
MAX_REPEATS = 100_000


def _int_range(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``."""
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


def _seconds(high: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds above 0 and at most ``high``."""
    expected = f"expected a number of seconds above 0 and at most {high:.0e}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if not 0 < value <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{expected}, got {text}")
        return value

    return parse


def _step_argument(text: str) -> int:
    """``--step``: an integer from 0 to ``MAX_CLI_STEP``."""
    try:
        step = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {describe(text)}") from None
    if not 0 <= step <= MAX_CLI_STEP:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**53, got {describe(step)}")
    return step


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
