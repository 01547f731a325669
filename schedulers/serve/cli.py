"""``rewardkit gateway``: serve the router in front of real engines (plugged into rewardkit's CLI)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

#: default seconds a request's headers (and a connection's next request) may take, and connections held
HEADER_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 4096


def add_gateway_command(subparsers: Any) -> None:
    """Add ``gateway``: an OpenAI-compatible proxy over ``--backend`` URLs, routing with ``--router``."""
    parser = subparsers.add_parser(
        "gateway", help="route OpenAI-compatible requests over N engines (vLLM, SGLang) with a router",
        description="An OpenAI-compatible proxy: each request goes to the backend the router picks; "
                    "/metrics for Prometheus; a decision log for training.")
    parser.add_argument("--backend", action="append", default=[],
                        help="engine base URL http(s)://host:port (repeat for each replica)")
    parser.add_argument("--router", default="least_prefill",
                        help=f"a router of the routing registry that can route live ({', '.join(live_router_names())}), "
                             "parameters after the name (cache_aware:balance_abs_threshold=8); ppo needs --checkpoint "
                             "(default: least_prefill)")
    parser.add_argument("--checkpoint", default=None, help="policy.pt of a PPO router (with --router ppo)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: localhost only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=None,
                        help="clients must send 'Authorization: Bearer KEY' (default: $REWARDKIT_GATEWAY_API_KEY; "
                             "none: no authentication, for localhost only)")
    parser.add_argument("--backend-api-key", default=None,
                        help="sent to every backend as 'Authorization: Bearer KEY' (default: $REWARDKIT_BACKEND_API_KEY)")
    parser.add_argument("--backend-header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="a header sent with every backend request (repeatable)")
    parser.add_argument("--decision-log", default=None, help="append every decision to this JSON Lines file")
    parser.add_argument("--reward", default=None, help="reward YAML computing each request's reward (log, /metrics)")
    parser.add_argument("--speeds", default=None, help="declared relative speed of each backend, comma-separated")
    parser.add_argument("--max-body-bytes", type=int, default=None, help="larger request bodies get 413 (default 1 MiB)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a whole request may take, streaming included (then 504 or an error event)")
    parser.add_argument("--connect-timeout", type=float, default=2.0,
                        help="seconds to connect to a backend (then it is down and the request moves)")
    parser.add_argument("--first-byte-timeout", type=float, default=None,
                        help="seconds a backend may take to start answering (then the request moves once); "
                             "default: --timeout")
    parser.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT_S,
                        help="seconds a client may take to send its request headers")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                        help="client connections held at once (more are closed)")
    parser.add_argument("--health-interval", type=float, default=1.0, help="seconds between health checks")
    parser.add_argument("--scrape-interval", type=float, default=0.25,
                        help="seconds between scrapes of each backend's /metrics (vLLM load and KV use); 0: none")
    parser.add_argument("--drain", type=float, default=30.0,
                        help="seconds in-flight requests get after SIGTERM (then they end with an error answer)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="threads of the PPO policy (1: a decision is tiny; more spin on the engines' cores)")
    parser.set_defaults(func=gateway_command)


def live_router_names() -> list[str]:
    """The registered routers a live cluster can run (built-ins and plug-ins), for ``--router``'s help."""
    from ..routing.policy import policy_names

    return policy_names(simulated=False)


def parse_speeds(text: str | None) -> list[float] | None:
    """``--speeds 1,0.5`` -> [1.0, 0.5]."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--speeds: expected numbers separated by commas, got {text!r}") from None


def gateway_command(args: argparse.Namespace) -> int:
    """Check the flags, then serve until SIGTERM; bad flags are one line and exit 2."""
    try:
        from .access import BACKEND_KEY_ENV, CLIENT_KEY_ENV, backend_headers, is_loopback
        from .app import create_app
        from .settings import MAX_BODY_BYTES, GatewaySettings
        from .server import serve
        from .settings import MAX_CONNECTIONS_LIMIT, integer, seconds
    except ImportError as exc:
        print(f"error: rewardkit gateway needs the serve extra: pip install 'rewardkit[serve]' ({exc})", file=sys.stderr)
        return 2
    try:
        integer(args.port, "--port", 1, 65535)
        seconds(args.drain, "--drain", low=0.0)
        seconds(args.header_timeout, "--header-timeout", low=0.1)
        integer(args.max_connections, "--max-connections", 1, MAX_CONNECTIONS_LIMIT)
        api_key = args.api_key if args.api_key is not None else os.environ.get(CLIENT_KEY_ENV) or None
        headers = backend_headers(args.backend_api_key or os.environ.get(BACKEND_KEY_ENV), args.backend_header)
        settings = GatewaySettings(args.backend, router=args.router, checkpoint=args.checkpoint,
                                   decision_log=args.decision_log, reward=args.reward,
                                   declared_speeds=parse_speeds(args.speeds),
                                   max_body_bytes=MAX_BODY_BYTES if args.max_body_bytes is None else args.max_body_bytes,
                                   connect_timeout_s=args.connect_timeout, first_byte_timeout_s=args.first_byte_timeout,
                                   request_timeout_s=args.timeout, health_interval_s=args.health_interval,
                                   scrape_interval_s=args.scrape_interval, torch_threads=args.torch_threads,
                                   extra_headers=headers, api_key=api_key)
        app = create_app(settings)  # builds the router (a bad name or checkpoint is a one-line error) and the reward
    except (ValueError, OSError) as exc:  # ConfigError and CheckpointError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if api_key is None and not is_loopback(args.host):
        print(f"warning: --host {args.host} serves every machine that can reach it without authentication; "
              f"set --api-key (or ${CLIENT_KEY_ENV})", file=sys.stderr)
    print(f"[gateway] {args.router} over {len(settings.backends)} backends on http://{args.host}:{args.port}", flush=True)
    gw = app.state.gateway
    serve(app, args.host, args.port, drain_s=args.drain, header_timeout_s=args.header_timeout,
          max_connections=args.max_connections, on_drain=gw.request_drain)
    return 0

