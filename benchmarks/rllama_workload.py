"""RLlama 0.7.0 on bench_compose's first workload; run by bench_compose.py under RLlama's interpreter.

Six components that each read one float of the context, weights on a linear schedule from 1.0
to 0.1 over 100,000 steps (``--own-schedules``: each on its own linear schedule); per step
``shaper.shape(composer.calculate(ctx), step)``, RLlama's documented loop. RLlama names a
component by its class, so the six are six classes.

RLlama 0.7.0's package ``__init__`` fails to import (``rllama.rewards.components.learning``
imports ``rllama.rewards.rewards``), so its composer, base class and shaper are loaded from their
own files under stand-in parent packages; the code measured is RLlama's, unchanged.

Prints one JSON line: ``{"steps_per_s": ..., "total": ...}``.
Run: ``PYTHON benchmarks/rllama_workload.py --steps 200000 --repeats 5``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import sys
import time
import types
from importlib.util import find_spec
from pathlib import Path


def load_rllama() -> tuple[type, type, type]:
    """RLlama's RewardComposer, BaseReward and RewardShaper, without its broken package import."""
    spec = find_spec("rllama")  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("rllama is not installed in this interpreter (pip install --no-deps rllama==0.7.0)")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, folder in (("rllama", root), ("rllama.rewards", root / "rewards")):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    composer = importlib.import_module("rllama.rewards.composer")
    base = importlib.import_module("rllama.rewards.base")
    shaper = importlib.import_module("rllama.rewards.shaper")
    return composer.RewardComposer, base.BaseReward, shaper.RewardShaper


def own_schedule(i: int) -> dict:
    """Component ``i``'s own linear schedule (bench_compose's OWN_SCHEDULES, in RLlama's format)."""
    return {"weight": 1.0, "schedule": "linear",
            "schedule_params": {"start_step": 0, "end_step": 100_000 + 10_000 * i, "start_value": 1.0,
                                "end_value": 0.1 * (i + 1)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time or this process's CPU time (bench_compose's --clock)")
    parser.add_argument("--own-schedules", action="store_true",
                        help="each component on its own linear schedule (end value 0.1*(i+1), end step 100,000+10,000*i)")
    args = parser.parse_args(argv)
    composer_cls, base_cls, shaper_cls = load_rllama()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    def reader(i: int) -> type:
        key = f"s{i}"
        return type(f"Signal{i}", (base_cls,), {"calculate": lambda self, context: context[key]})

    components = [reader(i)() for i in range(6)]
    schedule = {"weight": 1.0, "schedule": "linear",
                "schedule_params": {"start_step": 0, "end_step": 100_000, "start_value": 1.0, "end_value": 0.1}}
    rng = random.Random(0)
    ctxs = [{f"s{i}": rng.gauss(0.0, 1.0) for i in range(6)} for _ in range(1024)]
    best, total = math.inf, 0.0
    for _ in range(args.repeats):
        composer = composer_cls(components)
        shaper = shaper_cls({f"Signal{i}": own_schedule(i) if args.own_schedules else dict(schedule)
                             for i in range(6)})
        t0 = clock()
        for step in range(args.steps):
            total = shaper.shape(composer.calculate(ctxs[step & 1023]), step)
        best = min(best, clock() - t0)
    print(json.dumps({"steps_per_s": args.steps / best, "total": total}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
