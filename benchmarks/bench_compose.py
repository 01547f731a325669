"""Composer speed beside hand-written code of the same maths and beside RLlama, measured in one run.

Workloads (see the table it prints; every figure is a ratio from this one run):
1. RLlama's composer workload: six components that each read one float, linearly scheduled weights,
   against a hand-written loop and against RLlama 0.7.0 itself (benchmarks/rllama_workload.py, run
   under the interpreter of ``.venv-rllama``, which ``make bench-env-rllama`` creates; without it
   the rate recorded once on this machine is shown, marked as recorded).
2. ``configs/rewards/vidur_hybrid.yaml`` on scalar contexts (loads: a NumPy array of 4 replicas),
   against a hand-written reward function called per step (the target) and against the same maths
   inlined in the loop (no call per step, a floor no reward function reaches; shown, no target).
3. ``vidur_hybrid.yaml`` batched over 1,024 environments against a hand-written NumPy expression.
3b. Other shapes: the RLlama workload with each of the six info_value terms on its own linear
   schedule (against RLlama with the same schedules), and six different built-in components
   (throughput sigmoid, logistic latency, threshold penalty, EMA delta, load standard deviation,
   info value) batched over 1,024 environments (against hand-written NumPy).
3c. Text terms (regex_match, length_penalty, answer_match, repetition_rate) over 1,024 completions
   against hand-written Python of the same maths, patterns compiled once.
4. ``vidur_hybrid.yaml`` on torch CPU tensors, 4,096 environments (float32, as simulators give
   them), against hand-written torch of the same maths; on a machine with a CUDA device the same
   on the GPU, with env-steps per second (the bench runs unchanged there).

Every hand-written function is checked to give the composer's numbers before it is timed; building
a composer from its YAML happens before the clock starts (once per run, as a user does). Each
ratio comes from runs in alternation (composer, baseline, composer, ...; best of five each), so a
change of machine load during the run falls on both sides alike.
``--clock cpu`` reads this process's CPU time instead of wall time (RLlama's run reads its own), so
that on a machine shared with other jobs the time a side waits for a core is left out of both sides
(the torch rows, whose threads' CPU time adds up, are then left out).
Run: ``.venv/bin/python benchmarks/bench_compose.py [--quick] [--only TEXT] [--clock wall|cpu]
[--rllama-python PATH]``.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rewardkit  # noqa: E402

HYBRID = ROOT / "configs" / "rewards" / "vidur_hybrid.yaml"
#: RLlama 0.7.0's steps/s on workload 1 on this machine (the bench's 3x bound was 550k steps/s)
RLLAMA_RATE = 550_000 / 3
#: Each of the six terms on its own linear schedule: end 0.1*(i+1) after 100,000+10,000*i steps.
OWN_ENDS = [0.1 * (i + 1) for i in range(6)]
OWN_STEPS = [100_000 + 10_000 * i for i in range(6)]
SIX_OWN = {
    "version": 1,
    "components": {
        f"c{i}": {"type": "info_value", "params": {"key": f"s{i}"},
                  "weight": {"schedule": "linear", "start": 1.0, "end": OWN_ENDS[i], "steps": OWN_STEPS[i]}}
        for i in range(6)
    },
}
#: Six different built-in components in one flat config: sigmoid, logistic, load standard deviation,
#: EMA delta, threshold penalty, info value.
HYBRID_FLAT = {
    "version": 1,
    "components": {
        "throughput": {"type": "throughput_sigmoid", "params": {"target": 0.05, "scale": 0.05}, "weight": 0.08},
        "logistic": {"type": "logistic_latency", "params": {"threshold": 6.0, "sigma": 2.0}, "weight": -0.4},
        "load_balance": {"type": "load_imbalance", "params": {"statistic": "std"}, "weight": -0.15},
        "delta": {"type": "ema_delta", "params": {"signal": "throughput", "ema_alpha": 0.1}, "weight": 0.2},
        "latency": {"type": "threshold_penalty", "params": {"threshold": 6.0, "slope": 1.0}, "weight": -0.72},
        "bonus": {"type": "info_value", "params": {"key": "cache_hit_rate"}, "weight": 0.05},
    },
}
ANSWER = r"<answer>.*?</answer>"
TEXT = {
    "version": 1,
    "components": {
        "format": {"type": "regex_match", "params": {"pattern": ANSWER}},
        "length": {"type": "length_penalty", "params": {"unit": "words", "max": 40, "per_unit": 0.01}},
        "correct": {"type": "answer_match", "params": {"mode": "numeric", "tolerance": 1e-6}},
        "repeats": {"type": "repetition_rate", "params": {"n": 3}, "weight": -1.0},
    },
}
SIX = {
    "version": 1,
    "components": {
        f"c{i}": {"type": "info_value", "params": {"key": f"s{i}"},
                  "weight": {"schedule": "linear", "start": 1.0, "end": 0.1, "steps": 100_000}}
        for i in range(6)
    },
}


OWN_NAME = "RLlama workload, each term its own linear schedule"
FLAT_NAME = "6 built-in components batched, 1,024 envs"
Workload = Callable[[], Callable[[int], Any]]  # set-up (untimed) -> run(n steps) (timed)


#: the clock the rates are read on: wall time (``--clock wall``, the default) or this process's CPU
#: time (``--clock cpu``: on a machine shared with other jobs, time spent waiting for a core is left
#: out of both sides; only for single-threaded workloads, as threads' CPU time adds up)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter


def best_rate(workload: Workload, n: int, repeats: int) -> float:
    """Steps per second of ``workload()(n)`` (best of ``repeats``). Set-up (building a composer
    from its YAML, fresh state) happens before the clock starts, as a user builds it once."""
    best = math.inf
    for _ in range(repeats):
        run = workload()
        t0 = clock()
        run(n)
        best = min(best, clock() - t0)
    return n / best


def paired_rates(first: Callable[[], float], second: Callable[[], float], repeats: int) -> tuple[float, float]:
    """Best rate of each of two measurements taken in alternation (first, second, first, ...), so
    that a change of machine load during the run falls on both sides of the ratio alike."""
    a = b = 0.0
    for _ in range(repeats):
        a, b = max(a, first()), max(b, second())
    return a, b


# ---- workload 1: six info_value terms with linear schedules --------------------------------
def six_hand(ctxs: list[dict[str, float]]) -> Callable[[int], float]:
    keys = [f"s{i}" for i in range(6)]
    slope = (0.1 - 1.0) / 100_000

    def run(n: int) -> float:
        total = 0.0
        for step in range(n):
            ctx = ctxs[step & 1023]
            w = 1.0 + slope * min(100_000.0, max(0.0, step))
            total = 0.0
            for k in keys:
                total += w * ctx[k]
        return total

    return run


def six_composer(ctxs: list[dict[str, float]]) -> Callable[[int], float]:
    composer = rewardkit.RewardComposer.from_dict(SIX)

    def run(n: int) -> float:
        total = 0.0
        for step in range(n):
            total = composer(ctxs[step & 1023]).total
        return total

    return run


def six_own_hand(ctxs: list[dict[str, float]]) -> Callable[[int], float]:
    """Six linear schedules of their own, written the way the composer's docs define them."""
    keys = [f"s{i}" for i in range(6)]
    terms = list(zip(keys, OWN_ENDS, [float(s) for s in OWN_STEPS], strict=True))

    def run(n: int) -> float:
        total = 0.0
        for step in range(n):
            ctx = ctxs[step & 1023]
            total = 0.0
            for key, end, span in terms:
                p = 1.0 if step >= span else step / span
                total += ((1.0 - p) + p * end) * ctx[key]
        return total

    return run


def composer_loop(config: dict[str, Any], ctxs: list[Any]) -> Callable[[int], Any]:
    """A composer built from ``config`` (untimed), called once per step on ``ctxs`` in turn (their
    number a power of two: the loop picks one as the baselines' loops do, ``step & mask``)."""
    composer = rewardkit.RewardComposer.from_dict(config)
    mask = len(ctxs) - 1
    if len(ctxs) & mask:
        raise ValueError(f"composer_loop: expected a power-of-two number of contexts, got {len(ctxs)}")

    def run(n: int) -> Any:
        total = None
        for step in range(n):
            total = composer(ctxs[step & mask]).total
        return total

    return run


# ---- workload 2 and 3: vidur_hybrid -----------------------------------------------------------
def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


class HandHybridReward:
    """Hand-written Python of vidur_hybrid.yaml's maths as a user would write the reward: a
    callable with its EMA state, called once per environment step (same formulas, plain floats)."""

    def __init__(self) -> None:
        self.mean = self.var = 0.0
        self.started = False

    def __call__(self, ctx: dict[str, Any]) -> float:
        thr, lat, loads = ctx["throughput"], ctx["latency"], ctx["replica_loads"].tolist()
        absolute = (0.1 * sigmoid((thr - 0.05) / 0.05) - 0.9 * max(0.0, lat - 6.0)
                    - 0.5 * sigmoid((lat - 6.0) / 2.0))
        if not self.started:
            self.mean, self.var, delta, self.started = thr, 0.0, 0.0, True
        else:
            d = thr - self.mean
            std = math.sqrt(self.var)
            delta = d / (std + 1e-8) if std > 1e-8 else 0.0
            self.mean = 0.9 * self.mean + 0.1 * thr
            self.var = 0.9 * self.var + 0.1 * d * d
        m = sum(loads) / len(loads)
        cv = math.sqrt(sum((v - m) ** 2 for v in loads) / len(loads)) / m if m > 0 else 0.0
        return 0.8 * absolute + 0.2 * delta - 0.15 * cv


def hybrid_hand_function(ctxs: list[dict[str, Any]]) -> Callable[[int], float]:
    reward = HandHybridReward()

    def run(n: int) -> float:
        total = 0.0
        for step in range(n):
            total = reward(ctxs[step & 1023])
        return total

    return run


def hybrid_hand_scalar(ctxs: list[dict[str, Any]]) -> Callable[[int], float]:
    """The same maths inlined into the loop (no call per step: a floor no reward function reaches)."""

    def run(n: int) -> float:
        mean = var = 0.0
        started = False
        total = 0.0
        for step in range(n):
            ctx = ctxs[step & 1023]
            thr, lat, loads = ctx["throughput"], ctx["latency"], ctx["replica_loads"].tolist()
            absolute = (0.1 * sigmoid((thr - 0.05) / 0.05) - 0.9 * max(0.0, lat - 6.0)
                        - 0.5 * sigmoid((lat - 6.0) / 2.0))
            if not started:
                mean, var, delta, started = thr, 0.0, 0.0, True
            else:
                d = thr - mean
                std = math.sqrt(var)
                delta = d / (std + 1e-8) if std > 1e-8 else 0.0
                mean = 0.9 * mean + 0.1 * thr
                var = 0.9 * var + 0.1 * d * d
            m = sum(loads) / len(loads)
            cv = math.sqrt(sum((v - m) ** 2 for v in loads) / len(loads)) / m if m > 0 else 0.0
            total = 0.8 * absolute + 0.2 * delta - 0.15 * cv
        return total

    return run


def hybrid_composer_scalar(ctxs: list[dict[str, Any]]) -> Callable[[int], float]:
    composer = rewardkit.RewardComposer.from_yaml(HYBRID)

    def run(n: int) -> float:
        total = 0.0
        for step in range(n):
            total = composer(ctxs[step & 1023]).total
        return total

    return run


def hybrid_hand_numpy(batches: list[dict[str, np.ndarray]]) -> Callable[[int], np.ndarray]:
    """Hand-written NumPy of vidur_hybrid.yaml's maths over a batch of environments."""

    def run(n: int) -> np.ndarray:
        mean = var = None
        total = None
        for step in range(n):
            b = batches[step % len(batches)]
            thr, lat, loads = b["throughput"], b["latency"], b["replica_loads"]
            absolute = (0.1 / (1.0 + np.exp(-(thr - 0.05) / 0.05)) - 0.9 * np.maximum(0.0, lat - 6.0)
                        - 0.5 / (1.0 + np.exp(-(lat - 6.0) / 2.0)))
            if mean is None:
                mean, var, delta = thr.copy(), np.zeros_like(thr), np.zeros_like(thr)
            else:
                d = thr - mean
                std = np.sqrt(var)
                delta = np.where(std > 1e-8, d / (std + 1e-8), 0.0)
                mean = 0.9 * mean + 0.1 * thr
                var = 0.9 * var + 0.1 * d * d
            m = loads.mean(axis=1)
            cv = np.where(m > 0, loads.std(axis=1) / np.where(m > 0, m, 1.0), 0.0)
            total = 0.8 * absolute + 0.2 * delta - 0.15 * cv
        return total

    return run


def hybrid_composer_batched(batches: list[dict[str, np.ndarray]]) -> Callable[[int], np.ndarray]:
    composer = rewardkit.RewardComposer.from_yaml(HYBRID)

    def run(n: int) -> np.ndarray:
        total = None
        for step in range(n):
            total = composer(batches[step % len(batches)]).total
        return total

    return run


def hybrid_flat_hand_numpy(batches: list[dict[str, np.ndarray]]) -> Callable[[int], np.ndarray]:
    """Hand-written NumPy of HYBRID_FLAT over a batch of environments."""
    mask = len(batches) - 1

    def run(n: int) -> np.ndarray:
        mean = var = None
        total = None
        for step in range(n):
            b = batches[step & mask]
            thr, lat, loads = b["throughput"], b["latency"], b["replica_loads"]
            sig = 1.0 / (1.0 + np.exp(-(thr - 0.05) / 0.05))
            logistic = 1.0 / (1.0 + np.exp(-(lat - 6.0) / 2.0))
            if mean is None:
                mean, var, delta = thr.copy(), np.zeros_like(thr), np.zeros_like(thr)
            else:
                d = thr - mean
                std = np.sqrt(var)
                delta = np.where(std > 1e-8, d / (std + 1e-8), 0.0)
                mean = 0.9 * mean + 0.1 * thr
                var = 0.9 * var + 0.1 * d * d
            std = loads.std(axis=1)
            total = (0.08 * sig - 0.4 * logistic - 0.15 * std + 0.2 * delta - 0.72 * np.maximum(0.0, lat - 6.0)
                     + 0.05 * b["cache_hit_rate"])
        return total

    return run


# ---- workload 3c: text terms ----------------------------------------------------------------
def text_batches(rng: np.random.Generator, n: int) -> list[dict[str, list[str]]]:
    """Completions of 10-70 words (some looping, some with an <answer> tag) and numeric references."""
    words = ["the", "answer", "is", "so", "we", "add", "then", "carry", "one", "step", "think", "and", "result"]
    batches = []
    for _ in range(4):
        completions, references = [], []
        for _ in range(n):
            body = " ".join(rng.choice(words, size=int(rng.integers(10, 70))))
            if rng.random() < 0.3:
                body += " " + " ".join(["the loop again"] * int(rng.integers(2, 6)))
            answer = int(rng.integers(0, 100))
            completions.append(f"{body} <answer>{answer}</answer>" if rng.random() < 0.6 else f"{body} {answer}.")
            references.append(str(answer if rng.random() < 0.7 else answer + 1))
        batches.append({"completion": completions, "reference": references})
    return batches


def text_hand(batches: list[dict[str, list[str]]]) -> Callable[[int], np.ndarray]:
    """Hand-written Python of TEXT: one loop over the completions, patterns compiled once."""
    import re

    answer = re.compile(ANSWER)
    number = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")

    def last_number(text: str) -> float | None:
        found = number.findall(text)
        return float(found[-1].replace(",", "")) if found else None

    def reward(completion: str, reference: str) -> float:
        words = completion.split()
        length = -0.01 * max(0, len(words) - 40)
        grams = len(words) - 2
        repeats = (grams - len(set(zip(words, words[1:], words[2:], strict=False)))) / grams if grams > 1 else 0.0
        got, want = last_number(completion), last_number(reference)
        correct = 1.0 if got is not None and want is not None and abs(got - want) <= 1e-6 else 0.0
        return (1.0 if answer.search(completion) else 0.0) + length + correct - repeats

    def run(n: int) -> np.ndarray:
        total = None
        for step in range(n):
            b = batches[step % len(batches)]
            total = np.array(list(map(reward, b["completion"], b["reference"])))
        return total

    return run


# ---- workload 4: vidur_hybrid on torch tensors ------------------------------------------------
def hybrid_hand_torch(batches: list[dict[str, Any]]) -> Callable[[int], Any]:
    """Hand-written torch of vidur_hybrid.yaml's maths over a batch of environments."""
    import torch

    def run(n: int) -> Any:
        mean = var = None
        total = None
        for step in range(n):
            b = batches[step % len(batches)]
            thr, lat, loads = b["throughput"], b["latency"], b["replica_loads"]
            absolute = (0.1 * torch.sigmoid((thr - 0.05) / 0.05) - 0.9 * torch.clamp(lat - 6.0, min=0.0)
                        - 0.5 * torch.sigmoid((lat - 6.0) / 2.0))
            if mean is None:
                mean, var, delta = thr.clone(), torch.zeros_like(thr), torch.zeros_like(thr)
            else:
                d = thr - mean
                std = torch.sqrt(var)
                delta = torch.where(std > 1e-8, d / (std + 1e-8), 0.0)
                mean = 0.9 * mean + 0.1 * thr
                var = 0.9 * var + 0.1 * d * d
            m = loads.mean(dim=1)
            cv = torch.where(m > 0, loads.std(dim=1, correction=0) / torch.where(m > 0, m, 1.0), 0.0)
            total = 0.8 * absolute + 0.2 * delta - 0.15 * cv
        _sync(total)
        return total

    return run


def hybrid_composer_torch(batches: list[dict[str, Any]]) -> Callable[[int], Any]:
    composer = rewardkit.RewardComposer.from_yaml(HYBRID)

    def run(n: int) -> Any:
        total = None
        for step in range(n):
            total = composer(batches[step % len(batches)]).total
        _sync(total)
        return total

    return run


def _sync(value: Any) -> None:
    """Wait for a GPU's queued work (timings of asynchronous devices end when the work does)."""
    if getattr(getattr(value, "device", None), "type", "cpu") == "cuda":
        import torch

        torch.cuda.synchronize()


def torch_batches(rng: np.random.Generator, n_envs: int, device: str) -> list[dict[str, Any]]:
    import torch

    return [{"throughput": torch.tensor(rng.uniform(0, 0.2, n_envs), dtype=torch.float32, device=device),
             "latency": torch.tensor(rng.uniform(0, 12, n_envs), dtype=torch.float32, device=device),
             "replica_loads": torch.tensor(rng.integers(0, 20, size=(n_envs, 4)), dtype=torch.float32, device=device)}
            for _ in range(8)]


def _host(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def rllama_rate(python: str | None, steps: int, repeats: int, own_schedules: bool = False) -> float | None:
    """RLlama 0.7.0's steps/s on workload 1 (``own_schedules``: each term on its own linear
    schedule), measured now under ``python`` (None: not measured)."""
    if not python:
        return None
    if not Path(python).exists():
        raise SystemExit(f"--rllama-python {python}: no such interpreter (make bench-env-rllama creates one)")
    clock_name = next(name for name, fn in CLOCKS.items() if fn is clock)
    done = subprocess.run([python, str(ROOT / "benchmarks" / "rllama_workload.py"), "--steps", str(steps),
                           "--repeats", str(repeats), "--clock", clock_name]
                          + (["--own-schedules"] if own_schedules else []),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"RLlama workload failed under {python}:\n{done.stderr.strip()}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["steps_per_s"])


Check = tuple[str, Workload, Workload, int, str, float]


def measure(checks: list[Check], rllama_python: str | None, repeats: int
            ) -> tuple[list[tuple], list[tuple[str, float, float]], dict[str, tuple[float, float | None]]]:
    """Table rows, env-steps/s of the batched rows, and per RLlama row (composer, RLlama) rates."""
    rows: list[tuple] = []
    env_rates: list[tuple[str, float, float]] = []
    rllama_rows: dict[str, tuple[float, float | None]] = {}
    for name, composer_work, hand_work, n, baseline, bound in checks:
        a, b = _host(composer_work()(300)), _host(hand_work()(300))
        tol = {"rtol": 1e-9, "atol": 1e-12} if a.dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-5}
        if not np.allclose(a, b, **tol):
            raise SystemExit(f"{name}: composer {a!r} != hand-written {b!r}; the comparison would be unfair")
        composer_once = functools.partial(best_rate, composer_work, n, 1)
        comp_rate, hand_rate = paired_rates(composer_once, functools.partial(best_rate, hand_work, n, 1), repeats)
        ratio = hand_rate / comp_rate
        target = "-" if bound == math.inf else f"<= {bound}x"
        met = "-" if bound == math.inf else ("yes" if ratio <= bound else "NO")
        rows.append((name, baseline, n, comp_rate, hand_rate, ratio, target, met))
        if name.startswith("RLlama") or name == OWN_NAME:
            measured = None
            if rllama_python:  # RLlama and the composer in alternation, best of each
                comp_rate, measured = paired_rates(  # the composer's rate from these pairs only
                    composer_once, functools.partial(rllama_rate, rllama_python, n, 1, name == OWN_NAME), repeats)
                rows.append((name, "RLlama 0.7.0 (measured now)", n, comp_rate, measured, measured / comp_rate,
                             "<= 0.2x (>= 5x RLlama)", "yes" if comp_rate >= 5 * measured else "NO"))
            rllama_rows[name] = (comp_rate, measured)
        if "envs" in name:
            envs = int(name.rsplit(", ", 1)[1].split()[0].replace(",", ""))
            env_rates.append((name, envs * comp_rate, envs * hand_rate))
    return rows, env_rates, rllama_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run, noisier figures)")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="measure only the workloads whose name contains TEXT (repeatable)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time (default) or this process's CPU time (a machine shared with other jobs; "
                             "the torch rows, which use several threads, are then left out)")
    default_rllama = ROOT / ".venv-rllama" / "bin" / "python"
    parser.add_argument("--rllama-python", default=os.environ.get("RLLAMA_PYTHON") or
                        (str(default_rllama) if default_rllama.exists() else None),
                        help="interpreter with rllama==0.7.0 installed (default .venv-rllama, made by "
                             "`make bench-env-rllama`): RLlama runs workload 1 in this same run")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    scale = 0.1 if args.quick else 1.0
    repeats = 5  # best of five for every side: this VM is noisy
    rng = np.random.default_rng(0)
    six_ctxs = [{f"s{i}": float(rng.normal()) for i in range(6)} for _ in range(1024)]
    hybrid_ctxs = [{"throughput": float(rng.uniform(0, 0.2)), "latency": float(rng.uniform(0, 12)),
                    "replica_loads": rng.integers(0, 20, size=4).astype(float)} for _ in range(1024)]
    batches = [{"throughput": rng.uniform(0, 0.2, 1024), "latency": rng.uniform(0, 12, 1024),
                "replica_loads": rng.integers(0, 20, size=(1024, 4)).astype(float)} for _ in range(8)]
    flat_batches = [{**b, "cache_hit_rate": rng.uniform(0, 1, 1024)} for b in batches]
    texts = text_batches(rng, 1024)

    # (name, composer workload, baseline workload, steps, baseline label, bound on the time ratio)
    checks: list[Check] = [
        ("RLlama workload: 6 info_value, linear weights", lambda: six_composer(six_ctxs),
         lambda: six_hand(six_ctxs), int(200_000 * scale), "hand-written loop", math.inf),
        ("vidur_hybrid.yaml scalar (4 replicas)", lambda: hybrid_composer_scalar(hybrid_ctxs),
         lambda: hybrid_hand_function(hybrid_ctxs), int(100_000 * scale), "hand-written reward function", 1.3),
        ("vidur_hybrid.yaml scalar (4 replicas)", lambda: hybrid_composer_scalar(hybrid_ctxs),
         lambda: hybrid_hand_scalar(hybrid_ctxs), int(100_000 * scale), "same maths inlined in the loop", math.inf),
        ("vidur_hybrid.yaml batched, 1,024 envs", lambda: hybrid_composer_batched(batches),
         lambda: hybrid_hand_numpy(batches), max(50, int(2_000 * scale)), "hand-written NumPy", 1.3),
        (OWN_NAME, lambda: composer_loop(SIX_OWN, six_ctxs), lambda: six_own_hand(six_ctxs), int(200_000 * scale),
         "hand-written loop", math.inf),
        (FLAT_NAME, lambda: composer_loop(HYBRID_FLAT, flat_batches),
         lambda: hybrid_flat_hand_numpy(flat_batches), max(50, int(2_000 * scale)), "hand-written NumPy", 1.3),
        ("4 text terms, 1,024 completions", lambda: composer_loop(TEXT, texts), lambda: text_hand(texts),
         max(10, int(100 * scale)), "hand-written Python", 1.3),
    ]
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed: the torch rows are left out")
    devices = [] if torch is None or args.clock == "cpu" else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        tb = torch_batches(rng, 4096, device)
        checks.append((f"vidur_hybrid.yaml torch {device.upper()} float32, 4,096 envs",
                       lambda tb=tb: hybrid_composer_torch(tb), lambda tb=tb: hybrid_hand_torch(tb),
                       max(50, int(1_000 * scale)), "hand-written torch", 1.3))
    if args.only:
        checks = [c for c in checks if any(text in c[0] for text in args.only)]
        if not checks:
            raise SystemExit(f"--only {' '.join(args.only)}: no workload's name contains that")
    rows, env_rates, rllama_rows = measure(checks, args.rllama_python, repeats)
    header = ("workload", "baseline", "steps", "composer steps/s", "baseline steps/s", "time ratio", "target", "met")
    widths = [max(len(str(r[i])) if not isinstance(r[i], float) else 12 for r in rows + [header])
              for i in range(len(header))]

    def cell(i: int, v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if i in (3, 4) else f"{v:.2f}x"
        return str(v)

    def fmt(r: tuple) -> str:
        return " | ".join(cell(i, v).ljust(widths[i]) for i, v in enumerate(r))

    print(f"time ratio = composer time / baseline time per step (below 1: the composer is faster); "
          f"{args.clock} clock")
    print(fmt(header))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(fmt(r))
    print()
    for name, (composed, measured) in rllama_rows.items():
        if measured is not None:
            print(f"{name}: {composed / measured:.2f}x RLlama 0.7.0 ({measured:,.0f} steps/s, measured in this run "
                  f"under {args.rllama_python})")
        elif not name.startswith("RLlama workload,"):
            print(f"{name}: {composed / RLLAMA_RATE:.2f}x RLlama 0.7.0's RECORDED rate ({RLLAMA_RATE:,.0f} steps/s; "
                  "not measured in this run: `make bench-env-rllama` or --rllama-python)")
    for name, composed, hand in env_rates:
        print(f"{name}: {composed:,.0f} env-steps/s composed, {hand:,.0f} hand-written")
    for row in rows:
        if row[0] == FLAT_NAME:
            print(f"{FLAT_NAME}: {row[5]:.2f}x the time of hand-written NumPy of the same maths (target <= 1.3x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
