"""How ``rewardkit audit`` and the monitor's per-step update scale with the length of a training log.

Writes a synthetic TRL ``trainer_state.json`` of N logged steps (the keys ``GRPOTrainer`` logs, about
25 per step, as in ``tests/rewardkit/monitor/monitor_support.trl_log``; a hack from the middle of the
run on), then times, for each N:

- ``rewardkit audit LOG --config C --json`` as a user runs it (a fresh ``python -m rewardkit.cli``
  process: import, reading the JSON, the monitor, printing), wall-clock;
- ``Monitor.update``, the callback's per-step work, over the first 1,000 steps and the last 1,000.

The adversarial probe measured the audit before the fix at 21 s for 8k steps and 127 s for 16k, a 300k-step log
unfinished after 44 minutes, and the callback at 8 ms a step at step 16k.

    python benchmarks/bench_audit_scale.py                      # 8k, 16k, 300k
    python benchmarks/bench_audit_scale.py --steps 8000 16000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rewardkit.monitor import Monitor  # noqa: E402

CONFIG = """\
version: 1
components:
  proxy: {type: regex_match, params: {pattern: 'sure'}}
  strict: {type: answer_match, params: {mode: numeric}, weight: 0.0}
monitor:
  gold: strict
"""


def trl_log(step: int, n: int) -> dict[str, float]:
    """One log entry with TRL 1.x's keys; the proxy climbs from the middle of the run, gold stays."""
    proxy = 0.2 if step < n // 2 else min(1.0, 0.2 + 0.8 * (step - n // 2) / max(1, n // 10))
    wobble = 0.01 * ((step * 7919) % 13) / 13
    return {"loss": 0.01, "grad_norm": 0.5 + wobble, "learning_rate": 1e-3, "num_tokens": 1000.0 * step,
            "completions/mean_length": 8.0 + wobble, "completions/min_length": 2.0, "completions/max_length": 16.0,
            "completions/clipped_ratio": 0.1, "completions/mean_terminated_length": 8.0,
            "completions/min_terminated_length": 2.0, "completions/max_terminated_length": 15.0,
            "rewards/proxy/mean": proxy + wobble, "rewards/proxy/std": 0.4, "rewards/strict/mean": 0.1 + wobble,
            "rewards/strict/std": 0.3, "reward": proxy + wobble, "reward_std": 0.4, "frac_reward_zero_std": 0.1,
            "kl": 0.0, "entropy": 1.2, "clip_ratio/region_mean": 0.0, "epoch": step / n, "step": step}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[8000, 16000, 300000])
    args = parser.parse_args(argv)
    with open("/proc/loadavg", encoding="ascii") as f:
        print(f"load average before: {f.read().split()[:3]}")
    rows = [("logged steps", "log MB", "audit wall s", "exit", "alerts", "update us/step, first 1k",
             "update us/step, last 1k")]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "reward.yaml"
        config.write_text(CONFIG, encoding="utf-8")
        for n in args.steps:
            history = [trl_log(s, n) for s in range(1, n + 1)]
            log = Path(tmp) / f"state_{n}.json"
            log.write_text(json.dumps({"global_step": n, "log_history": history}), encoding="utf-8")
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "rewardkit.cli", "audit", str(log), "--config", str(config),
                                   "--json"], capture_output=True, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            wall = time.perf_counter() - started
            alerts = len(json.loads(done.stdout)["alerts"]) if done.stdout else "-"
            monitor = Monitor.from_config(config)
            first = min(1000, n)
            t0 = time.perf_counter()
            for record in history[:first]:
                monitor.update(record)
            t1 = time.perf_counter()
            for record in history[first:n - first]:
                monitor.update(record)
            t2 = time.perf_counter()
            for record in history[max(first, n - first):]:
                monitor.update(record)
            t3 = time.perf_counter()
            last = max(1, n - max(first, n - first))
            rows.append((f"{n:,}", f"{log.stat().st_size / 1e6:.0f}", f"{wall:.1f}", str(done.returncode), str(alerts),
                         f"{(t1 - t0) / first * 1e6:.0f}", f"{(t3 - t2) / last * 1e6:.0f}"))
            print(f"  {n} steps: {wall:.1f} s", file=sys.stderr, flush=True)
            log.unlink()
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    with open("/proc/loadavg", encoding="ascii") as f:
        print(f"load average after: {f.read().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
