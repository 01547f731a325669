"""``rewardkit loadgen``: replay an env YAML's (or a trace's) arrivals against an OpenAI-compatible endpoint.

Plugged into rewardkit's CLI through the entry-point group ``rewardkit.commands``. Prints a
table of TTFT / TPOT / ITL / e2e (mean, p50, p90, p99) and throughput, and writes the summary and
every request's record as JSON (``--out``). Bad options are one-line errors (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from rewardkit.errors import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_ENV = "configs/envs/hetero.yaml"


def add_loadgen_command(subparsers: Any) -> None:
    """Add ``loadgen``."""
    p = subparsers.add_parser(
        "loadgen", help="replay a workload against an OpenAI-compatible endpoint and measure it",
        description="Send an env YAML's arrivals and request lengths (or a trace's) to an OpenAI-compatible "
                    "endpoint, open loop; print TTFT/TPOT/ITL/e2e percentiles and throughput; save JSON.")
    p.add_argument("--url", required=True, help="endpoint base URL, e.g. http://127.0.0.1:8000 (a gateway or one engine)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--env", default=None, help=f"env YAML whose arrivals and lengths to replay (default {DEFAULT_ENV})")
    src.add_argument("--trace", default=None, help="trace CSV: num_prefill_tokens, num_decode_tokens[, arrived_at]")
    p.add_argument("--seed", type=int, default=101, help="arrival and prompt seed (the simulator's episode seed)")
    p.add_argument("--qps", type=float, default=None, help="override the arrival rate (requests/s)")
    p.add_argument("--requests", type=int, default=100, help="number of requests (default 100)")
    p.add_argument("--duration", type=float, default=None, help="send no request after this many seconds")
    p.add_argument("--timeout", type=float, default=120.0, help="per-request timeout in seconds")
    p.add_argument("--length-scale", type=float, default=1.0, help="multiply prompt and output lengths by this")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="shorten requests (both parts in proportion) so prompt + output fits the engine")
    p.add_argument("--shared-prefix", default=None, metavar="GROUPS:TOKENS",
                   help="prepend one of GROUPS system prompts of TOKENS tokens (prefix-cache workload; default: the "
                        "env YAML's shared_prefix, fitted into its max_tokens unless --max-model-len is given)")
    p.add_argument("--sessions", type=int, default=0,
                   help="with --shared-prefix: multi-turn conversations (each turn repeats the earlier ones)")
    p.add_argument("--api", choices=("completions", "chat"), default="completions")
    p.add_argument("--prompt-format", choices=("ids", "text"), default="ids",
                   help="prompts as token ids (exact lengths; vLLM accepts them) or as words (completions API)")
    p.add_argument("--vocab-size", type=int, default=2000, help="token ids are drawn below this")
    p.add_argument("--model", default=None, help="model name (default: the first of GET /v1/models)")
    p.add_argument("--api-key", default=None,
                   help="sent as 'Authorization: Bearer KEY' with every request, for a gateway started with --api-key "
                        "(default: $REWARDKIT_GATEWAY_API_KEY, the variable the gateway reads)")
    p.add_argument("--no-stream", action="store_true", help="plain responses (no TTFT or ITL)")
    p.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    p.add_argument("--out", default=None, help="JSON file for the summary and per-request records")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=loadgen_command)


def discover_model(url: str, timeout_s: float = 10.0, api_key: str | None = None) -> tuple[str, int | None]:
    """The first model id ``GET /v1/models`` lists, and its ``max_model_len`` when the engine says (vLLM does)."""
    import asyncio

    from ..shared.engine_client import EngineClient, EngineError
    from ..shared.engine_requests import auth_headers

    async def models() -> dict:
        async with EngineClient(timeout_s) as client:
            resp = await client.request("GET", url + "/v1/models", headers=auth_headers(api_key))
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}")
        return resp.json()

    try:
        entry = asyncio.run(models())["data"][0]
        model = str(entry["id"])
    except (EngineError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"--url {url}: could not list models at /v1/models ({type(exc).__name__}: {exc}); "
                         "is the endpoint up? (or give --model)") from None
    length = entry.get("max_model_len") if isinstance(entry, dict) else None
    return model, length if isinstance(length, int) and not isinstance(length, bool) and length >= 2 else None


def build_workload(args: argparse.Namespace) -> list:
    """The request specs the options describe."""
    from ..shared.requests import SharedPrefix, build_requests
    from ..shared.workload import load_workload
    from .sources import lengths_from_env, lengths_from_trace, load_path_check

    max_model_len, env_shared = args.max_model_len, None
    if args.trace:
        load_path_check(args.trace, "--trace")
        lengths = lengths_from_trace(args.trace, args.seed, args.qps, args.requests)
    else:
        env = args.env or DEFAULT_ENV
        load_path_check(env, "--env")
        lengths = lengths_from_env(env, args.seed, args.qps, args.requests)
        workload = load_workload(env)
        env_shared, env_max_tokens = workload.shared_prefix, workload.max_tokens
        if env_shared is not None and not args.shared_prefix and max_model_len is None:
            max_model_len = env_max_tokens  # the simulator fits the same prompts into max_tokens
    if args.shared_prefix:
        shared = SharedPrefix.parse(args.shared_prefix, args.sessions)
    elif args.sessions:
        raise ValueError("--sessions: needs --shared-prefix GROUPS:TOKENS")
    else:
        shared = env_shared
    budget = max_model_len
    if shared is not None and budget is not None:
        budget = budget - shared.prefix_tokens
        if budget < 2:
            raise ValueError(f"--shared-prefix: {shared.prefix_tokens} tokens leave no room within "
                             f"--max-model-len {max_model_len}")
    lengths = lengths.fitted(args.length_scale, budget)
    return build_requests(lengths, args.seed, args.vocab_size, shared, max_model_len)


def loadgen_command(args: argparse.Namespace) -> int:
    """Run the load generator from parsed arguments; return an exit code."""
    try:
        from ..shared.engine_requests import GATEWAY_KEY_ENV, auth_headers, base_url
        from .runner import format_summary, replay, summarize
        if not args.no_progress:
            import tqdm  # noqa: F401  (checked before the run, not after its first request)
    except ImportError as exc:  # the serve extra is missing
        print(f"error: rewardkit loadgen needs {exc.name}: pip install 'rewardkit[serve]' ({exc})", file=sys.stderr)
        return EXIT_USAGE
    from .options import check_options
    from .sources import WorkloadError, summarize_workload

    try:
        check_options(args)
        url = base_url(args.url)
        api_key = args.api_key if args.api_key is not None else os.environ.get(GATEWAY_KEY_ENV) or None
        auth_headers(api_key)  # checked before the run
        specs = build_workload(args)
        model, engine_len = discover_model(url, api_key=api_key) if args.model is None else (args.model, None)
        if args.max_model_len is None and engine_len is not None:
            args.max_model_len = engine_len  # prompts the engine would refuse are fitted instead
            print(f"max model length {engine_len} (from {url}/v1/models; --max-model-len overrides)", file=sys.stderr)
            specs = build_workload(args)
    except (WorkloadError, ConfigError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.sessions and args.max_model_len is None:
        print("warning: --sessions without a model length: conversations grow without bound and an engine refuses "
              "the prompts past its own; give --max-model-len", file=sys.stderr)
    workload = summarize_workload(specs)
    print(f"workload: {workload['requests']} requests over {workload['span_s']:.1f} s "
          f"({workload['offered_qps']:.2f} req/s offered), mean prompt {workload['mean_prompt_tokens']:.0f} "
          f"and output {workload['mean_output_tokens']:.0f} tokens, shared-prefix tokens "
          f"{100 * workload['shared_token_fraction']:.0f}%, {workload['shortened_prompts']} prompts shortened to fit "
          f"the model length ({workload['dropped_turns']} oldest turns left out); model {model!r} at {url}",
          file=sys.stderr)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(specs), unit="req", file=sys.stderr, dynamic_ncols=True)
    interrupted = False
    try:
        records, wall = asyncio.run(replay(
            url, specs, model=model, api=args.api, prompt_format=args.prompt_format, stream=not args.no_stream,
            ignore_eos=not args.no_ignore_eos, timeout_s=args.timeout, duration_s=args.duration,
            on_done=(lambda _r: bar.update(1)) if bar is not None else None, api_key=api_key))
    except KeyboardInterrupt:
        interrupted, records, wall = True, [], 0.0
    finally:
        if bar is not None:
            bar.close()
    if interrupted:
        print("interrupted: no results written", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary = summarize(records, wall)
    print(format_summary(summary, title=f"loadgen {url}"))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"url": url, "model": model,
                   "options": {k: v for k, v in vars(args).items() if k not in ("func", "api_key")},
                   "workload": workload, "summary": summary, "requests": [r.to_dict() for r in records]}
        out.write_text(json.dumps(payload, indent=1))
        print(f"results in {out}")
    return EXIT_OK if summary["completed"] else EXIT_FAILED
