"""Train a set of the monitor benchmark's GRPO runs (``examples.monitor.train``), two at a time, resumably.

A run whose ``trainer_state.json`` exists is skipped, so an interrupted set resumes where it stopped.
Each run is one process with one torch thread; the outcome of a run does not depend on what runs
beside it (its seed fixes its samples), only its time does. The sets:

- ``third``: the runs trained after corroboration and ``partial.yaml`` were fixed (docs/results/monitor.md),
  on seeds no earlier set used.

    python benchmarks/train_monitor_runs.py --set third --out benchmarks/data/monitor_third

- ``fourth``: the same shape on seeds no earlier set used, declared with the corrected label for the
  partial reward (docs/results/monitor.md), the monitor's rules unchanged.

    python benchmarks/train_monitor_runs.py --set fourth --out benchmarks/data/monitor_fourth

- ``fifth``: the same shape again on new seeds, declared with ``watched_spread`` and the stress reports
  of ``benchmarks/data/monitor_stress/`` frozen (docs/results/monitor.md).

    python benchmarks/train_monitor_runs.py --set fifth --out benchmarks/data/monitor_fifth

- ``sixth``: new seeds, 16 completions a step (4 prompts, 4 samples each) rather than 8, declared with the
  content detectors' "two of the last three steps" and the ``learned`` label (docs/results/monitor.md).

    python benchmarks/train_monitor_runs.py --set sixth --out benchmarks/data/monitor_sixth
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]


def runs(partial: Sequence[int], lenient: Sequence[int], length: Sequence[int], judge: Sequence[int],
         honest: Sequence[int], honest_slow: Sequence[int]) -> list[tuple[str, int, float]]:
    """One set's runs: each reward's seeds at 4e-3, then ``honest_slow``'s honest seeds at 1e-3."""
    fast = (("partial", partial), ("lenient", lenient), ("length", length), ("judge", judge), ("honest", honest))
    return [*((reward, seed, 4e-3) for reward, seeds in fast for seed in seeds),
            *(("honest", seed, 1e-3) for seed in honest_slow)]


#: set name -> (reward, seed, learning rate)
SETS: dict[str, list[tuple[str, int, float]]] = {
    "third": runs((1, 2, 3, 4, 5, 6), (6, 7, 8), (5, 6, 7), (6, 7, 8), (9, 10, 11), (12, 13)),
    "fourth": runs((7, 8, 9, 10, 11, 12), (9, 10, 11), (8, 9, 10), (9, 10, 11), (14, 15, 16), (17, 18)),
    "fifth": runs((13, 14, 15, 16, 17, 18), (12, 13, 14), (11, 12, 13), (12, 13, 14), (19, 20, 21), (22, 23)),
    "sixth": runs((19, 20, 21, 22, 23, 24), (15, 16, 17), (14, 15, 16), (15, 16, 17), (24, 25, 26), (27, 28)),
}
#: set name -> the trainer options it adds (the others use the trainer's defaults: 2 prompts a step)
SET_OPTIONS: dict[str, list[str]] = {"sixth": ["--prompts-per-step", "4"]}


def train(reward: str, seed: int, learning_rate: float, out: Path, steps: int, options: Sequence[str] = ()) -> str:
    """One run in its own process (its log beside its folder); returns a line for the progress."""
    folder = out / f"{reward}_seed{seed}"
    if (folder / "trainer_state.json").exists():
        return f"{folder.name}: done before, skipped"
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with (out / f"{folder.name}.log").open("w") as log:
        code = subprocess.call([sys.executable, "-m", "examples.monitor.train", "--reward", reward, "--seed", str(seed),
                                "--steps", str(steps), "--learning-rate", str(learning_rate), "--out", str(out),
                                *options],
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return f"{folder.name}: exit {code} in {time.perf_counter() - started:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args(argv)
    runs = SETS[args.set]
    with ThreadPoolExecutor(args.parallel) as pool:
        options = SET_OPTIONS.get(args.set, [])
        futures = [pool.submit(train, r, s, lr, args.out.resolve(), args.steps, options) for r, s, lr in runs]
        for i, future in enumerate(futures, 1):
            print(f"[{i}/{len(runs)}] {future.result()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
