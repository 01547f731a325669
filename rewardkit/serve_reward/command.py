"""The ``rewardkit serve-reward`` subcommand: its flags, and serving with uvicorn.

Importing this module needs only the standard library; Starlette, uvicorn and prometheus-client
(the ``serve`` extra) are imported when the command runs.

Shutting down: the first SIGTERM or SIGINT stops taking connections and lets the requests being
scored finish for up to ``--shutdown-grace-s``; any later signal skips that wait. Either way the
call still in flight is then cancelled (it changes nothing), the state is written and the process
exits 0 (1 when the state could not be written). No signal is re-raised at the end, so none can
end the process before the state is written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..commands.arg_types import port, positive_int, seconds
from .protocol import DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_PENDING, DEFAULT_READ_TIMEOUT_S

if TYPE_CHECKING:
    from .app import RewardServer

DEFAULT_KEY_ENV = "REWARDKIT_REWARD_API_KEY"
#: seconds uvicorn lets running requests finish after SIGTERM, before the call in flight is cancelled and the state saved
GRACEFUL_S = 30.0
#: seconds left after the grace period for the cancelled requests' 503 answers to be sent
SEND_503_S = 1.0


def add(sub: Any) -> None:
    """Add ``serve-reward`` to the ``rewardkit`` subcommands (docs/reward-server.md)."""
    p = sub.add_parser("serve-reward", help="serve a reward config over HTTP (OpenRLHF's --remote_rm_url protocol)",
                       description="Answer POST /get_reward (and /) with {query, prompts, labels[, step]} -> "
                                   "{rewards, scores, extra_logs}; GET /health, GET /metrics (Prometheus). "
                                   "The state (normalizers, step, budgets) is saved to --state at SIGTERM and "
                                   "restored at start.")
    p.add_argument("config", metavar="CONFIG", help="YAML reward config")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=5000, help="port (default 5000, as OpenRLHF's serve_rm)")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="state file: restored at start when it exists, written whenever the server stops (its folder must exist)")
    p.add_argument("--save-every-s", type=seconds(), default=None, metavar="S",
                   help="also save the state every S seconds when something was scored (a crash then loses at most S s)")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the API key requests need; given, VAR must hold a key. "
                        f"Without the flag, {DEFAULT_KEY_ENV} when it is in the environment (then it must hold a key), "
                        "else no key")
    p.add_argument("--max-body-bytes", type=positive_int, default=DEFAULT_MAX_BODY_BYTES, metavar="N",
                   help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY_BYTES})")
    p.add_argument("--max-pending", type=positive_int, default=DEFAULT_MAX_PENDING, metavar="N",
                   help=f"requests being scored at once (their bodies read); more get 503 (default {DEFAULT_MAX_PENDING})")
    p.add_argument("--read-timeout-s", type=seconds(), default=DEFAULT_READ_TIMEOUT_S, metavar="S",
                   help=f"a client that has not sent its whole body S seconds after its headers gets 408 "
                        f"(default {DEFAULT_READ_TIMEOUT_S:g})")
    p.add_argument("--shutdown-grace-s", type=seconds(), default=GRACEFUL_S, metavar="S",
                   help=f"after SIGTERM/SIGINT, let running requests finish for up to S seconds before cancelling them and "
                        f"saving (default {GRACEFUL_S:g}; a second signal skips the wait)")
    p.add_argument("--max-batch", type=positive_int, default=DEFAULT_MAX_BATCH, metavar="N",
                   help=f"completions per composer call when requests are merged (default {DEFAULT_MAX_BATCH})")
    p.add_argument("--strip-suffix", action="append", default=[], metavar="TEXT",
                   help="remove TEXT from the end of completions (e.g. '<|im_end|>': OpenRLHF decodes queries "
                        "with their special tokens); repeatable")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (its @register components become usable); repeatable")
    p.set_defaults(func=cmd_serve_reward)


def api_key_from_env(flag: str | None) -> str | None:
    """The API key the server needs, read from the environment (None: no key).

    ``flag`` is ``--api-key-env`` (None when not given: then ``REWARDKIT_REWARD_API_KEY``, and no
    key when that is not in the environment). A variable named by the flag and unset, or any
    variable set to an empty or unsendable key, raises ``ValueError`` naming the flag and the
    variable: the server never starts open by mistake."""
    from .protocol import api_key_bytes

    name = flag or DEFAULT_KEY_ENV
    given = f"--api-key-env {name}" + ("" if flag else " (the default)")
    value = os.environ.get(name)
    if value is None:
        if flag is None:
            return None
        raise ValueError(f"{given}: the variable is not set; expected the API key in it (without --api-key-env and "
                         f"with {DEFAULT_KEY_ENV} unset, the server runs without a key)")
    try:
        api_key_bytes(value)
    except ValueError as exc:
        raise ValueError(f"{given}: {exc}") from None
    return value


def cmd_serve_reward(args: argparse.Namespace) -> int:
    """Build the server (restoring its state) and serve until SIGTERM/SIGINT, then save the state."""
    try:
        import uvicorn  # noqa: F401 - the extra is checked before anything starts

        from .app import RewardServer
    except ImportError as exc:
        print(f"error: rewardkit serve-reward needs the serve extra (pip install 'rewardkit[serve]'): {exc}",
              file=sys.stderr)
        return 2
    from ..composer import RewardComposer
    from ..errors import RewardKitError
    from .state import check_writable

    try:
        api_key = api_key_from_env(args.api_key_env)
        if args.state is not None:
            try:
                check_writable(Path(args.state))
            except ValueError as exc:
                raise ValueError(f"--state {args.state}: {exc}") from None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name in args.imports:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported
            print(f"error: --import {name}: importing it failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    try:
        composer = RewardComposer.from_yaml(args.config)
        server = RewardServer(composer, state_path=args.state, api_key=api_key,
                              max_body_bytes=args.max_body_bytes, max_pending=args.max_pending,
                              max_batch=args.max_batch, strip_suffixes=args.strip_suffix,
                              save_every_s=args.save_every_s, read_timeout_s=args.read_timeout_s)
    except RewardKitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    restored = f"; state restored from {args.state} at step {composer.step}" if server.restored else ""
    keyed = (f"; API key from ${args.api_key_env or DEFAULT_KEY_ENV}" if server.keyed
             else "; no API key (every route is open)")
    print(f"rewardkit serve-reward: {args.config} ({len(server.scorer.term_names)} terms) on "
          f"http://{args.host}:{args.port}/get_reward{restored}{keyed}", file=sys.stderr, flush=True)
    return serve(server, args.host, args.port, args.shutdown_grace_s)


def serve(server: RewardServer, host: str, port: int, grace_s: float = GRACEFUL_S) -> int:
    """Serve ``server`` with uvicorn until a signal, then write its state on every way out.

    0 when the state was written (or no ``--state`` was given), 1 when it could not be."""
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, with the signals handled by :func:`_signals_to` and the state written at the end."""

        closed_ok = True

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the command's own handlers are in place for the whole run, last save included

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.should_exit:  # a second signal: no more waiting for running requests
                self.force_exit = True
            self.should_exit = True
            name = signal.Signals(sig).name
            message = (f"rewardkit serve-reward: {name}: stopping now, cancelling the call in flight, then saving\n"
                       if self.force_exit else
                       f"rewardkit serve-reward: {name}: finishing running requests (up to {grace_s:g} s; a second "
                       "signal stops at once), then saving\n")
            with contextlib.suppress(OSError):
                os.write(2, message.encode())  # not print(): a handler may interrupt a print to stderr

        async def shutdown(self, sockets: Any = None) -> None:
            """uvicorn's shutdown; at the grace deadline the calls still running are cancelled and their
            requests answered 503 (uvicorn, a second later, would drop them unanswered)."""
            async def at_deadline() -> None:
                await asyncio.sleep(grace_s)
                await server.stop_scoring()

            deadline = asyncio.ensure_future(at_deadline())
            try:
                await super().shutdown(sockets)
            finally:
                deadline.cancel()

        async def serve(self, sockets: Any = None) -> None:
            try:
                await super().serve(sockets)
            finally:  # after a forced stop uvicorn skips the app's shutdown: the state is written here then
                self.closed_ok = await server.aclose()
                lifespan = getattr(self, "lifespan", None)
                if self.started and self.force_exit and lifespan is not None:
                    await lifespan.shutdown()  # the app's shutdown ends as it should (its aclose is done), no traceback

    # uvicorn's own deadline a little later than ours, for the 503s to be sent (it types it int; it waits with a float)
    config = uvicorn.Config(server.app(), host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=grace_s + SEND_503_S)
    userver = Server(config)
    with _signals_to(userver.handle_exit):
        userver.run()
    return 0 if userver.closed_ok else 1


@contextlib.contextmanager
def _signals_to(handler: Any) -> Iterator[None]:
    """SIGINT and SIGTERM call ``handler`` (and nothing else) while the block runs."""
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
