"""``rewardkit replay LOG [LOG...] --routers A,B``: routers judged on a gateway's own traffic, in the simulator.

Plugged into rewardkit's CLI through the entry-point group ``rewardkit.commands``. Exit 0, or 2 on
bad input (a one-line error naming the file, line or key).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rewardkit.errors import ConfigError

from ..bounds import MAX_EVAL_SEEDS

EXIT_BAD_INPUT = 2
#: most time windows of a windowed speed fit
MAX_WINDOWS = 100


def add_replay_command(subparsers: Any) -> None:
    """Add ``replay``: calibrate on the logged router, then evaluate candidates on the log's workload."""
    parser = subparsers.add_parser(
        "replay", help="evaluate routers on a gateway's decision log, in the simulator",
        description="Build a workload and a cluster from decision logs, replay the logged router (the calibration "
                    "error), then every router of --routers on the same arrivals, with paired intervals over seeds.")
    parser.add_argument("logs", nargs="+", metavar="LOG", help="decision logs of one cluster (rewardkit gateway --decision-log)")
    parser.add_argument("--routers", required=True,
                        help="comma-separated routers (parameters allowed: cache_aware:balance_abs_threshold=2; "
                             "a learned one as NAME=PATH.pt or PATH.pt)")
    parser.add_argument("--profile", default=None,
                        help="a Vidur profile folder (such as ../shared/vidur/profiles) for logs whose engines it does not know")
    parser.add_argument("--env", default=None, help="env YAML of the simulated cluster's shape "
                                                    "(default: configs/envs/prefix_live_shape.yaml)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the simulator's randomness (default 5)")
    parser.add_argument("--jitter-ms", type=float, default=None, help="arrival jitter of seeds 1.. (ms each way, default 5)")
    parser.add_argument("--fit", choices=("constant", "windowed"), default="constant",
                        help="one speed per replica, or a speed per replica and time window (its slower windows "
                             "replayed as slowdowns)")
    parser.add_argument("--windows", type=int, default=8, help="with --fit windowed: time windows over the log (default 8)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--plot", default=None, help="where the TTFT plot goes (default: runs/replay-<log>/replay_ttft.png)")
    parser.set_defaults(func=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    """Run a replay from parsed arguments; print the table or JSON; return an exit code."""
    import numpy as np

    from .pipeline import replay_logs
    from .report import format_report, plot_ttft, to_json
    from .workload import DEFAULT_BASE_ENV, DEFAULT_JITTER_MS

    try:
        if args.fit == "windowed" and not 2 <= args.windows <= MAX_WINDOWS:
            raise ValueError(f"--windows: expected a count from 2 to {MAX_WINDOWS}, got {args.windows}")
        if not 1 <= args.seeds <= MAX_EVAL_SEEDS:
            raise ValueError(f"--seeds: expected a count from 1 to {MAX_EVAL_SEEDS}, got {args.seeds}")
        for log in args.logs:
            if not Path(log).is_file():
                raise ValueError(f"{log}: no such decision log")
        summary, results, prep = replay_logs(
            args.logs, args.routers.split(","), seeds=args.seeds, base_env=args.env or DEFAULT_BASE_ENV,
            profile=args.profile, jitter_ms=DEFAULT_JITTER_MS if args.jitter_ms is None else args.jitter_ms,
            windows=args.windows if args.fit == "windowed" else 1)
        plot = Path(args.plot) if args.plot else Path("runs") / f"replay-{Path(args.logs[0]).stem}" / "replay_ttft.png"
        logged = np.array([r.ttft_s for r in prep.run.requests])
        summary["plot"] = str(plot_ttft(results, prep.fit.overhead_s, logged, plot))
    except (ConfigError, ValueError, RuntimeError) as exc:  # RuntimeError: a Vidur set-up error
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ImportError as exc:  # the simulator or the router extra is missing: say which, not a traceback
        print(f"error: rewardkit replay needs {exc.name or exc} (pip install 'rewardkit[router]' and vidur; "
              f"see docs/install.md): {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(to_json(summary) if args.json else format_report(summary) + f"\nTTFT plot: {summary['plot']}")
    return 0
