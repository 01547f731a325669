"""What ``scalar_fn`` and ``scalar_source`` buy: one component written three ways, timed in one run.

The same maths, ``scale * (value - target)**2``, as
1. ``compute`` only (the composer wraps it in NumPy for single-environment calls),
2. ``compute`` plus ``scalar_fn`` (a plain-float function the composer calls),
3. ``compute`` plus ``scalar_source`` (an expression the composer inlines into its generated code),
each in a one-term config and in a config where it sits beside ``vidur_hybrid.yaml``'s five
terms. Single-environment steps/s (best of seven, runs taking turns), and the batched path over 1,024 environments
(which always uses ``compute``). Every variant is checked to give the same numbers first.
Run: ``.venv/bin/python benchmarks/bench_component_paths.py [--quick]``; it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from rewardkit import BaseReward, Param, RewardComposer, register  # noqa: E402
from rewardkit.base import Array  # noqa: E402


class _SquaredError(BaseReward):
    """scale*(value-target)**2: 0 at the target, in [0, inf)."""

    inputs = {"value": 0}
    params = {"target": Param.number(0.0, "value with zero error"), "scale": Param.positive(1.0, "factor")}
    output_range = (0.0, math.inf)

    def compute(self, x: Mapping[str, Array], terminated: Array, truncated: Array) -> Array:
        return self.scale * (x["value"] - self.target) ** 2


@register("bench_squared_error_compute", replace=True)
class ComputeOnly(_SquaredError):
    """scale*(value-target)**2 with compute only."""


@register("bench_squared_error_scalar_fn", replace=True)
class WithScalarFn(_SquaredError):
    """scale*(value-target)**2 with a plain-float scalar_fn."""

    def scalar_fn(self) -> Callable[..., float]:
        scale, target = self.scale, self.target

        def one_env(value: float, terminated: bool, truncated: bool) -> float:
            d = value - target
            return scale * d * d

        return one_env


@register("bench_squared_error_inlined", replace=True)
class Inlined(WithScalarFn):
    """scale*(value-target)**2 inlined into the generated code."""

    def scalar_source(self, args: list[str], env: dict[str, Any], tag: str) -> str | None:
        d = f"{tag}_d"
        return f"({self.scale!r} * ({d} := {args[0]} - {self.target!r}) * {d})"


VARIANTS = [("compute only", "bench_squared_error_compute"), ("compute + scalar_fn", "bench_squared_error_scalar_fn"),
            ("compute + scalar_source (inlined)", "bench_squared_error_inlined")]
TERM = {"params": {"target": 0.5, "scale": 2.0}, "inputs": {"value": "latency"}, "weight": -0.3}


def config(kind: str, with_hybrid: bool) -> dict[str, Any]:
    base = yaml.safe_load((ROOT / "configs" / "rewards" / "vidur_hybrid.yaml").read_text()) if with_hybrid \
        else {"version": 1, "components": {}}
    base["components"]["error"] = {"type": kind, **TERM}
    return base


def rates(composers: list[RewardComposer], contexts: list[dict[str, Any]], n: int, repeats: int = 7) -> list[float]:
    """Steps per second of each composer, best of ``repeats`` runs of ``n`` calls; the runs take
    turns between composers so that a busy machine slows them alike."""
    best = [math.inf] * len(composers)
    m = len(contexts)
    for _ in range(repeats):
        for i, composer in enumerate(composers):
            composer.reset()
            t0 = time.perf_counter()
            for step in range(n):
                composer(contexts[step % m])
            best[i] = min(best[i], time.perf_counter() - t0)
    return [n / b for b in best]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run, noisier figures)")
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    rng = np.random.default_rng(0)
    scalar = [{"throughput": float(rng.uniform(0, 0.2)), "latency": float(rng.uniform(0, 12)),
               "replica_loads": rng.integers(0, 20, size=4).astype(float)} for _ in range(1024)]
    batches = [{"throughput": rng.uniform(0, 0.2, 1024), "latency": rng.uniform(0, 12, 1024),
                "replica_loads": rng.integers(0, 20, size=(1024, 4)).astype(float)} for _ in range(8)]
    rows = []
    for with_hybrid in (False, True):
        composers = [(label, RewardComposer.from_dict(config(kind, with_hybrid))) for label, kind in VARIANTS]
        reference = [c(scalar[0]).total for _, c in composers]
        if len(set(reference)) != 1:
            raise SystemExit(f"the variants disagree: {reference}")
        single = rates([c for _, c in composers], scalar, int(50_000 * scale))
        batched = rates([c for _, c in composers], batches, max(20, int(200 * scale)))
        for (label, _), one, many in zip(composers, single, batched, strict=True):
            rows.append(("error term + vidur_hybrid" if with_hybrid else "error term alone", label,
                         one, one / single[-1], many))
    print("| config | component written with | single-env steps/s | speed vs inlined | batched (1,024 envs) steps/s |")
    print("|---|---|---|---|---|")
    for where, label, single, ratio, batched in rows:
        print(f"| {where} | {label} | {single:,.0f} | {ratio:.2f}x | {batched:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
