"""``rewardkit docs``: generate (or check) the Markdown component reference from the registry."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..docgen import components_markdown
from .common import EXIT_ERROR, EXIT_OK, add_import_option, import_modules


def add(sub: Any) -> None:
    """The ``docs`` subcommand."""
    p = sub.add_parser("docs", help="generate the Markdown component reference",
                       description="Generate the component reference from the registry.")
    p.add_argument("--out", default=None, metavar="PATH", help="file to write (default: print it)")
    p.add_argument("--check", action="store_true", help="exit 1 if PATH differs from the generated text")
    add_import_option(p)
    p.set_defaults(func=cmd_docs)


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
