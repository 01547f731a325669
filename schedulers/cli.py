"""``rewardkit train`` and ``rewardkit evaluate``: the scheduler's subcommands of the rewardkit CLI.

They are plugged into rewardkit's CLI through the entry-point group ``rewardkit.commands``
(see pyproject.toml), so rewardkit itself never imports this package.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any, Callable

from rewardkit.errors import ConfigError

from .bounds import MAX_EVAL_SEEDS, MAX_SEED

DEFAULT_BASELINES = (
    "round_robin,random,lor,jsq,least_kv,least_tokens,least_prefill,power_of_two,"
    "cap_jsq,cap_least_tokens,cap_least_prefill,adaptive,oracle"
)
DEFAULT_ENV = "configs/envs/codellama34b_tp2_4r.yaml"
EVAL_SEEDS = (101, 102, 103, 104, 105)


#: top-level modules of the ``router`` extra; a command missing one names the extra to install.
ROUTER_EXTRA_MODULES = frozenset({"torch", "gymnasium", "matplotlib", "pandas", "sklearn", "wandb", "ddsketch",
                                  "plotly_express", "fasteners", "huggingface_hub"})

#: exit code of ``train`` and ``evaluate`` for a bad config or a Vidur set-up error (documented in docs/vidur-scheduler.md).
EXIT_BAD_INPUT = 2


def reporting_missing_vidur(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command``, but Vidur missing is a one-line error naming the install command (exit 2), not a traceback."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ImportError as exc:
            top = str(exc.name or "").split(".")[0]
            if top == "vidur":
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_BAD_INPUT
            if top in ROUTER_EXTRA_MODULES:
                print(f"error: this command needs {top} (the router extra): pip install 'rewardkit[router]' ({exc})",
                      file=sys.stderr)
                return EXIT_BAD_INPUT
            raise

    return run


def add_train_command(subparsers: Any) -> None:
    """Add ``train``: PPO training of the Vidur router from a config YAML."""
    parser = subparsers.add_parser("train", help="train the PPO request router in Vidur",
                                   description="Train the PPO request router (resumes an interrupted run).")
    parser.add_argument("config", nargs="?", default="configs/ppo_vidur.yaml", help="training config YAML")
    parser.add_argument("--config", dest="config_opt", default=None, help="training config YAML (same as CONFIG)")
    parser.add_argument("--out", default=None, help="output folder (default: runs/<config name>)")
    parser.add_argument("--no-resume", action="store_true", help="start over even if out has checkpoints")
    parser.add_argument("--from-log", action="append", default=None, metavar="FILE",
                        help="learn from a gateway's decision log (repeat for several logs): see --mode")
    parser.add_argument("--mode", choices=("replay", "clone", "reward"), default="replay",
                        help="with --from-log: replay (the default): train CONFIG's PPO in the simulator on the log's "
                             "workload, as rewardkit replay builds it; clone the logged router's decisions; reward: "
                             "fine-tune toward the logged decisions that were better rewarded")
    parser.add_argument("--profile", default=None, help="with --mode replay: a Vidur profile folder (as rewardkit replay)")
    parser.add_argument("--init", default=None, help="with --from-log: the checkpoint to fine-tune (policy.pt)")
    parser.add_argument("--epochs", type=int, default=20, help="with --from-log: passes over the log")
    parser.set_defaults(func=reporting_missing_vidur(train_command))


def offline_command(args: argparse.Namespace) -> int:
    """``rewardkit train --from-log``: learn from a decision log (by default PPO on its replayed workload);
    one-line errors, exit 2."""
    from .rl.checkpoint_file import CheckpointError
    from .train.offline import train_from_log

    out = args.out or str(Path("runs") / f"offline-{Path(args.from_log[0]).stem}")
    if args.mode == "replay":
        return replay_train_command(args, out)
    try:
        check_out_dir(out)
        path = train_from_log(args.from_log, out, mode=args.mode, init=args.init, epochs=args.epochs)
    except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as exc:  # check_out_dir's are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"learned from {', '.join(args.from_log)} ({args.mode}); policy: {path}")
    return 0


def replay_train_command(args: argparse.Namespace, out: str) -> int:
    """``rewardkit train --from-log LOG --mode replay``: PPO on the replayed workload; one-line errors, exit 2."""
    from .replay.training import train_on_log
    from .rl.checkpoint_file import CheckpointError

    try:
        check_out_dir(out)
        result = train_on_log(args.from_log, args.config_opt or args.config, out, profile=args.profile,
                              resume=not args.no_resume)
    except (ConfigError, CheckpointError, ValueError, RuntimeError) as exc:  # RuntimeError: a Vidur set-up error
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"trained {result.updates} updates on the replayed {', '.join(args.from_log)}; policy: {result.policy_path}")
    return 0


def train_command(args: argparse.Namespace) -> int:
    """Train from parsed arguments; print where the policy went; return an exit code."""
    from .rl.checkpoint_file import CheckpointError
    from .sim.profiles import VidurSetupError
    from .train.trainer import train  # heavy (torch): imported when the command runs

    if getattr(args, "from_log", None):
        return offline_command(args)
    config = args.config_opt or args.config
    out = args.out or str(Path("runs") / Path(config).stem)
    try:
        check_out_dir(out)
        result = train(config, out, resume=not args.no_resume)
    except (ConfigError, VidurSetupError, CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # the out folder or a file in it could not be written (full disk, permissions)
        print(f"error: {os_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"trained {result.updates} updates, {result.global_step} env steps; policy: {result.policy_path}")
    return 0


def check_out_dir(out: str | Path, option: str = "--out") -> None:
    """Refuse an output folder that cannot be one (a file in the way, an unwritable parent) before any
    work; nothing is created here (a config error later leaves no empty folder behind)."""
    path = Path(out)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{option} {path}: expected a folder for the results, got a file")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ValueError(f"{option} {path}: expected a folder we may write in, got one without permission")
        return
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: expected a folder path, got one under the file {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: expected a folder we may create, got one under {parent} without permission")


def os_error(exc: OSError) -> str:
    """A one-line message for a failed read or write: the file, then the reason (our own messages as they are)."""
    return f"{exc.filename}: {exc.strerror or exc}" if exc.filename is not None and exc.strerror else str(exc)


def evaluation_seeds(spec: str) -> list[int]:
    """The seeds written in ``spec``: ``42`` is seed 42; ``1,7,9`` those seeds; ``301-320`` that range
    (seeds and ranges mix: ``101-105,301``). Distinct, from 0 to 2^32 - 1, at most ``MAX_EVAL_SEEDS``
    in all (checked before any list is built). A count of seeds is :func:`first_evaluation_seeds`."""
    expected = "comma-separated seeds and ranges A-B with 0 <= A <= B (seed 42 is '42'; a count is --n-seeds)"
    parts: list[tuple[int, int]] = []
    total = 0
    for part in (p.strip() for p in str(spec).split(",")):
        try:
            first, dash, last = part.partition("-")
            low, high = int(first), int(last if dash else first)
        except ValueError:
            raise ValueError(f"--seeds: expected {expected}, got {part!r} in {spec!r}") from None
        if not 0 <= low <= high or high > MAX_SEED:
            raise ValueError(f"--seeds: expected {expected}, each at most {MAX_SEED}, got {part!r} in {spec!r}")
        total += high - low + 1
        if total > MAX_EVAL_SEEDS:
            raise ValueError(f"--seeds: expected at most {MAX_EVAL_SEEDS} seeds (the limit), got more in {spec!r}")
        parts.append((low, high))
    seeds = [s for low, high in parts for s in range(low, high + 1)]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds: expected distinct seeds, got {spec!r}")
    return seeds


def first_evaluation_seeds(count: int) -> list[int]:
    """The first ``count`` evaluation seeds (101, 102, ...; never trained on by the shipped configs)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_EVAL_SEEDS:
        raise ValueError(f"--n-seeds: expected a count from 1 to {MAX_EVAL_SEEDS} (the limit), got {count!r}")
    return [EVAL_SEEDS[0] + i for i in range(count)]


def add_seed_options(parser: argparse.ArgumentParser, default_count: int) -> None:
    """``--seeds`` (the seeds themselves) or ``--n-seeds`` (how many, from 101): one obvious meaning each."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--seeds", default=None,
                       help="evaluation seeds: '42' is seed 42; lists and ranges '101-105,301' (see --n-seeds for a count)")
    group.add_argument("--n-seeds", type=int, default=None,
                       help=f"evaluate on this many seeds, 101 onwards (default {default_count})")
    parser.set_defaults(default_seed_count=default_count)


def seeds_from_args(args: argparse.Namespace) -> list[int]:
    """The seeds ``--seeds`` or ``--n-seeds`` name (the default count when neither is given)."""
    if getattr(args, "seeds", None) is not None:
        return evaluation_seeds(args.seeds)
    count = args.n_seeds if getattr(args, "n_seeds", None) is not None else args.default_seed_count
    return first_evaluation_seeds(count)


def describe_seeds(seeds: list[int]) -> str:
    """``101-105, 301 (6 seeds)``: consecutive runs written as ranges."""
    runs: list[list[int]] = []
    for s in seeds:
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
    return f"{text} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})"


def add_evaluate_command(subparsers: Any) -> None:
    """Add ``evaluate``: every policy on the same seeds and arrivals, table and plots."""
    parser = subparsers.add_parser(
        "evaluate", help="compare a PPO checkpoint with routing heuristics in Vidur",
        description="Run every policy on the same seeds and arrivals; print a table, write CSV/JSON/PNG.")
    parser.add_argument("--checkpoint", default=None, help="PPO checkpoint or policy.pt (omit: heuristics only)")
    parser.add_argument("--warm-start", default=None,
                        help="warm-start policy to evaluate as 'warm_start' (default: bc_policy.pt next to --checkpoint, if any)")
    parser.add_argument("--baselines", default=DEFAULT_BASELINES,
                        help="comma-separated heuristic names (cap_*: declared speed; adaptive: measured speed; "
                             "oracle: true speed, a reference ceiling; the industry's baselines cache_aware, "
                             "affinity_token_load, llm_d_optimized, least_load and dynamo_kv take parameters: "
                             "cache_aware:balance_abs_threshold=8)")
    add_seed_options(parser, default_count=5)
    parser.add_argument("--env", default=DEFAULT_ENV, help="environment YAML (cluster and workload)")
    parser.add_argument("--qps", type=float, default=None, help="override the Poisson arrival rate")
    parser.add_argument("--replicas", type=int, default=None, help="override the number of replicas")
    parser.add_argument("--trace", default=None, help="override the request-length trace CSV")
    parser.add_argument("--requests", type=int, default=None, help="override requests per episode")
    parser.add_argument("--out", default=None, help="folder for results (default: runs/eval-<env name>)")
    parser.set_defaults(func=reporting_missing_vidur(evaluate_command))


def evaluate_command(args: argparse.Namespace) -> int:
    """Run the comparison from parsed arguments; return an exit code."""
    from .evaluate.paired import evaluate_policies  # heavy (Vidur): imported when the command runs
    from .environments import load_any_env_config
    from .routing.policy import make_policy

    overrides: dict[str, Any] = {}
    if args.qps is not None:
        overrides["qps"] = args.qps
    if args.replicas is not None:
        overrides["num_replicas"] = args.replicas
    if args.trace is not None:
        overrides["trace_file"] = args.trace
    if args.requests is not None:
        overrides["requests_per_episode"] = args.requests
    try:
        seeds = seeds_from_args(args)
        cfg = load_any_env_config(args.env, overrides)
        print(f"evaluation seeds: {describe_seeds(seeds)}", flush=True)
        routers: dict[str, Any] = {}
        simulated = not hasattr(cfg, "live")  # a live cluster has no true speeds (no oracle)
        for name in [b.strip() for b in args.baselines.split(",") if b.strip()]:
            try:
                routers[name] = make_policy(name, simulated=simulated)
            except ValueError as exc:
                raise ValueError(f"--baselines: {exc}") from None
        warm = args.warm_start
        if warm is None and args.checkpoint and (Path(args.checkpoint).parent / "bc_policy.pt").is_file():
            warm = str(Path(args.checkpoint).parent / "bc_policy.pt")
        # one decision at a time on one thread: a pool of threads only spins, on the cores the
        # simulator or live engines need
        if args.checkpoint:
            routers["ppo"] = make_policy("ppo", args.checkpoint, threads=1)
        if warm:
            routers["warm_start"] = make_policy("ppo", warm, threads=1)
        if not routers:
            raise ValueError(f"--baselines: expected at least one heuristic name (or a --checkpoint), got {args.baselines!r}")
        out = Path(args.out) if args.out else Path("runs") / f"eval-{cfg.name}"
        check_out_dir(out)
        if not simulated:
            check_live_backends(cfg, args.env)
        results = evaluate_policies(cfg, routers, seeds, out_dir=out)
    except (ConfigError, ValueError, OSError, RuntimeError) as exc:  # RuntimeError: VidurSetupError; OSError: a write
        print(f"error: {os_error(exc) if isinstance(exc, OSError) else exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(results.format_table())
    print(f"results and plots in {out}/")
    unanswered = sorted({row["router"] for row in results.episodes if not row.get("num_completed")})
    if unanswered:
        print(f"error: no request was answered in some episodes of {', '.join(unanswered)} (see {out}/episodes.csv): "
              "their figures are NaN; are the engines up?", file=sys.stderr)
        return 1
    return 0


def check_live_backends(cfg: Any, env: str) -> None:
    """A one-line error when none of a live env's backends answers (every episode would fail)."""
    from .live.reachability import unreachable_backends

    failed = unreachable_backends(cfg.live.backends)
    if len(failed) == len(set(cfg.live.backends)):
        first, reason = next(iter(failed.items()))
        raise ValueError(f"{env}: live.backends: none of the {len(failed)} backends answers ({first}: {reason}); "
                         "start the engines first")
    for url, reason in failed.items():
        print(f"warning: {env}: live.backends: {url} does not answer ({reason})", file=sys.stderr)
