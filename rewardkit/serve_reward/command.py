"""The ``rewardkit serve-reward`` subcommand: its flags, and serving with uvicorn.

Importing this module needs only the standard library; Starlette, uvicorn and prometheus-client
(the ``serve`` extra) are imported when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from .protocol import DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_PENDING

DEFAULT_KEY_ENV = "REWARDKIT_REWARD_API_KEY"
#: seconds uvicorn lets running requests finish after SIGTERM, before the state is saved
GRACEFUL_S = 30


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return value


def add_serve_reward_parser(sub: Any) -> None:
    """Add ``serve-reward`` to the ``rewardkit`` subcommands (docs/reward-server.md)."""
    p = sub.add_parser("serve-reward", help="serve a reward config over HTTP (OpenRLHF's --remote_rm_url protocol)",
                       description="Answer POST /get_reward (and /) with {query, prompts, labels[, step]} -> "
                                   "{rewards, scores, extra_logs}; GET /health, GET /metrics (Prometheus). "
                                   "The state (normalizers, step, budgets) is saved to --state at SIGTERM and "
                                   "restored at start.")
    p.add_argument("config", metavar="CONFIG", help="YAML reward config")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=5000, help="port (default 5000, as OpenRLHF's serve_rm)")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="state file: restored at start when it exists, written at SIGTERM/SIGINT")
    p.add_argument("--save-every-s", type=_seconds, default=None, metavar="S",
                   help="also save the state every S seconds when something was scored (a crash then loses at most S s)")
    p.add_argument("--api-key-env", default=DEFAULT_KEY_ENV, metavar="VAR",
                   help=f"environment variable holding the API key; when set, requests need it (default {DEFAULT_KEY_ENV})")
    p.add_argument("--max-body-bytes", type=_positive, default=DEFAULT_MAX_BODY_BYTES, metavar="N",
                   help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY_BYTES})")
    p.add_argument("--max-pending", type=_positive, default=DEFAULT_MAX_PENDING, metavar="N",
                   help=f"requests admitted at once; more get 503 (default {DEFAULT_MAX_PENDING})")
    p.add_argument("--max-batch", type=_positive, default=DEFAULT_MAX_BATCH, metavar="N",
                   help=f"completions per composer call when requests are merged (default {DEFAULT_MAX_BATCH})")
    p.add_argument("--strip-suffix", action="append", default=[], metavar="TEXT",
                   help="remove TEXT from the end of completions (e.g. '<|im_end|>': OpenRLHF decodes queries "
                        "with their special tokens); repeatable")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (its @register components become usable); repeatable")
    p.set_defaults(func=cmd_serve_reward)


def cmd_serve_reward(args: argparse.Namespace) -> int:
    """Build the server (restoring its state) and serve until SIGTERM/SIGINT, then save the state."""
    try:
        import uvicorn

        from .app import RewardServer
    except ImportError as exc:
        print(f"error: rewardkit serve-reward needs the serve extra (pip install 'rewardkit[serve]'): {exc}",
              file=sys.stderr)
        return 2
    from ..composer import RewardComposer
    from ..errors import RewardKitError

    for name in args.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported
            print(f"error: --import {name}: importing it failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    try:
        composer = RewardComposer.from_yaml(args.config)
        server = RewardServer(composer, state_path=args.state, api_key=os.environ.get(args.api_key_env) or None,
                              max_body_bytes=args.max_body_bytes, max_pending=args.max_pending,
                              max_batch=args.max_batch, strip_suffixes=args.strip_suffix,
                              save_every_s=args.save_every_s)
    except RewardKitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    restored = f"; state restored from {args.state} at step {composer.step}" if server.restored else ""
    keyed = f"; API key from ${args.api_key_env}" if server._key else ""
    print(f"rewardkit serve-reward: {args.config} ({len(server.scorer.term_names)} terms) on "
          f"http://{args.host}:{args.port}/get_reward{restored}{keyed}", file=sys.stderr, flush=True)
    uvicorn.run(server.app(), host=args.host, port=args.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=GRACEFUL_S)
    return 0
