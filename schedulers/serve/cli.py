"""``rewardkit gateway``: serve the router in front of real engines (plugged into rewardkit's CLI)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_gateway_command(subparsers: Any) -> None:
    """Add ``gateway``: an OpenAI-compatible proxy over ``--backend`` URLs, routing with ``--router``."""
    parser = subparsers.add_parser(
        "gateway", help="route OpenAI-compatible requests over N engines (vLLM, SGLang) with a router",
        description="An OpenAI-compatible proxy: each request goes to the backend the router picks; "
                    "/metrics for Prometheus; a decision log for training.")
    parser.add_argument("--backend", action="append", default=[], help="engine base URL (repeat for each replica)")
    parser.add_argument("--router", default="least_prefill", help="a heuristic name, or ppo with --checkpoint")
    parser.add_argument("--checkpoint", default=None, help="policy.pt of a PPO router (with --router ppo)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: localhost only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--decision-log", default=None, help="append every decision to this JSON Lines file")
    parser.add_argument("--reward", default=None, help="reward YAML computing each request's reward (log, /metrics)")
    parser.add_argument("--speeds", default=None, help="declared relative speed of each backend, comma-separated")
    parser.add_argument("--max-body-bytes", type=int, default=None, help="larger request bodies get 413")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a backend may take for one request")
    parser.add_argument("--health-interval", type=float, default=1.0, help="seconds between health checks")
    parser.add_argument("--scrape-interval", type=float, default=0.25,
                        help="seconds between scrapes of each backend's /metrics (vLLM load and KV use); 0: none")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds in-flight requests get after SIGTERM")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="threads of the PPO policy (1: a decision is tiny; more spin on the engines' cores)")
    parser.set_defaults(func=gateway_command)


def gateway_command(args: argparse.Namespace) -> int:
    """Check the flags, then serve until SIGTERM; bad flags are one line and exit 2."""
    try:
        from .gateway import MAX_BODY_BYTES, GatewaySettings, create_app, serve
    except ImportError as exc:
        print(f"error: rewardkit gateway needs the serve extra: pip install 'rewardkit[serve]' ({exc})", file=sys.stderr)
        return 2
    try:
        speeds = None if args.speeds is None else [float(x) for x in args.speeds.split(",")]
        if not 0 < args.port < 65536 or args.timeout <= 0 or args.health_interval <= 0 or args.drain < 0:
            raise ValueError(f"--port, --timeout, --health-interval, --drain: expected a port 1-65535 and positive "
                             f"seconds, got {args.port}, {args.timeout}, {args.health_interval}, {args.drain}")
        if not args.scrape_interval >= 0:
            raise ValueError(f"--scrape-interval: expected seconds >= 0 (0: no scraping), got {args.scrape_interval}")
        settings = GatewaySettings(args.backend, router=args.router, checkpoint=args.checkpoint,
                                   decision_log=args.decision_log, reward=args.reward, declared_speeds=speeds,
                                   max_body_bytes=args.max_body_bytes or MAX_BODY_BYTES,
                                   request_timeout_s=args.timeout, health_interval_s=args.health_interval,
                                   scrape_interval_s=args.scrape_interval, torch_threads=args.torch_threads)
        app = create_app(settings)  # builds the router (a bad name or checkpoint is a one-line error) and the reward
    except (ValueError, OSError) as exc:  # ConfigError and CheckpointError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"[gateway] {args.router} over {len(settings.backends)} backends on http://{args.host}:{args.port}", flush=True)
    serve(app, args.host, args.port, args.drain)
    return 0
