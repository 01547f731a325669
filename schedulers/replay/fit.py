"""Each replica's speed fitted to its logged requests, and the per-request time the simulator does not see.

The logged decisions are replayed as they were (:class:`~schedulers.replay.runner.LoggedActions`,
seed 0: the arrivals exactly as logged), so each replica gets the requests it really got; its speed
is then scaled by how far its simulated median e2e falls from its logged one, a few times over
(e2e grows as the speed falls, so the ratio converges). What remains of TTFT is per request and not
compute (HTTP, tokenization, the gateway, the engine's own scheduling): ``overhead_s``, the median of
logged minus simulated TTFT once the speeds fit, added to every router's simulated TTFT and e2e.
The fit reads only the logged router's own requests; how well the rest then matches (TTFT p50/p99,
e2e p99 of the logged router replayed as a policy) is the calibration error.

With ``windows`` > 1 (``rewardkit replay --fit windowed``) each replica's speed is then fitted per
time window too, the same way on the requests that arrived in it (at least three per window, else
the window keeps its speed): the windows slower than the replica's fastest become slowdown events
(:mod:`schedulers.sim.slowdowns`) every router then meets. A live replica that slowed for a while
(a noisy neighbour, a busy core) is replayed slowed where it was, which a single speed averages away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..bounds import MAX_SPEED, MIN_SLOWDOWN_DURATION_S, MIN_SPEED
from .logged import LoggedRun
from .runner import LoggedActions, make_replay_env, run_episode
from .workload import ReplayWorkload, replay_env_config

#: passes of the speed fit
FIT_ROUNDS = 4


@dataclass
class ClusterFit:
    """Fitted speeds (one per replica), the TTFT overhead (s), and the env config and env they give."""

    speeds: list[float]
    overhead_s: float
    env_config: Any
    env: Any
    #: per pass, the largest relative gap between a replica's simulated and logged median e2e
    gaps: list[float]
    #: slowdown events fitted per time window (``windows`` > 1), as the env YAML writes them
    slowdowns: list[dict[str, float]] = field(default_factory=list)


def fit_cluster(run: LoggedRun, workload: ReplayWorkload, *, base_env: str, profile: str | None,
                rounds: int = FIT_ROUNDS, windows: int = 1, log: Callable[[str], None] | None = None) -> ClusterFit:
    """Fit every replica's speed to its logged median e2e, then the TTFT overhead (see the module doc)."""
    actions = [r.replica for r in run.requests]
    logged_e2e = np.array([r.e2e_s for r in run.requests])
    logged_ttft = np.array([r.ttft_s for r in run.requests])
    on = [np.array([a == i for a in actions]) for i in range(run.num_replicas)]
    speeds = [1.0] * run.num_replicas
    gaps: list[float] = []
    env = None
    cfg = None
    for round_ in range(rounds + 1):
        cfg = replay_env_config(run, speeds, base_env=base_env, profile=profile)
        if env is None:
            env = make_replay_env(cfg, workload)
        else:
            env.env_config = cfg  # same cluster shape: the declared speeds are read at each episode start
        result = run_episode(env, "logged", LoggedActions(actions), 0)
        ratios = []
        for mask in on:
            if not mask.any():
                ratios.append(1.0)
                continue
            sim = float(np.nanmedian(result.e2e[mask]))
            real = float(np.median(logged_e2e[mask]))
            ratios.append(sim / real if real > 0 and sim > 0 else 1.0)
        gaps.append(max(abs(r - 1.0) for r in ratios))
        if log is not None:
            log(f"[replay fit {round_}/{rounds}] speeds {', '.join(f'{s:.3g}' for s in speeds)}: "
                f"largest median e2e gap {gaps[-1]:.1%}")
        if round_ == rounds or gaps[-1] < 0.01:
            break
        speeds = [float(np.clip(s * r, MIN_SPEED, MAX_SPEED)) for s, r in zip(speeds, ratios, strict=True)]
    events: list[dict[str, float]] = []
    if windows > 1:
        speeds, events, cfg, result = _fit_windows(run, env, speeds, actions, logged_e2e, on, windows, rounds,
                                                   base_env, profile, log)
    overhead = float(max(np.nanmedian(logged_ttft - result.ttft), 0.0))
    return ClusterFit(speeds, overhead, cfg, env, gaps, events)


def _fit_windows(run: LoggedRun, env: Any, speeds: list[float], actions: list[int], logged_e2e: np.ndarray,
                 on: list[np.ndarray], windows: int, rounds: int, base_env: str, profile: str | None,
                 log: Callable[[str], None] | None) -> tuple[list[float], list[dict[str, float]], Any, Any]:
    """Per-window speed multipliers of each replica (see the module doc): speeds, slowdown events, config, last run."""
    arrivals = np.array([r.arrived_at for r in run.requests])
    width = max(float(arrivals[-1]) / windows, MIN_SLOWDOWN_DURATION_S)
    window_of = np.minimum((arrivals // width).astype(int), windows - 1)
    mult = np.ones((run.num_replicas, windows))
    cfg, result = None, None
    for round_ in range(rounds + 1):
        base = mult.max(axis=1)
        fitted = [float(np.clip(s * b, MIN_SPEED, MAX_SPEED)) for s, b in zip(speeds, base, strict=True)]
        events = [{"replica": i, "start_s": w * width, "duration_s": width if w < windows - 1 else width * 1e3,
                   "factor": float(np.clip(mult[i, w] / base[i], MIN_SPEED, 1.0))}
                  for i in range(run.num_replicas) for w in range(windows) if mult[i, w] < base[i] * 0.995]
        cfg = replay_env_config(run, fitted, base_env=base_env, profile=profile, slowdowns=events)
        env.env_config = cfg
        result = run_episode(env, "logged", LoggedActions(actions), 0)
        worst = 0.0
        for i, mask in enumerate(on):
            for w in range(windows):
                sel = mask & (window_of == w)
                if sel.sum() < 3:
                    continue
                sim, real = float(np.nanmedian(result.e2e[sel])), float(np.median(logged_e2e[sel]))
                if sim > 0 and real > 0:
                    mult[i, w] *= sim / real
                    worst = max(worst, abs(sim / real - 1.0))
        if log is not None:
            log(f"[replay fit windows {round_}/{rounds}] {len(events)} slowdown windows; largest window gap {worst:.1%}")
        if round_ == rounds or worst < 0.02:
            break
    return fitted, events, cfg, result


def speeds_text(speeds: Sequence[float], replicas: Sequence[str]) -> str:
    """``replica a 0.84, replica b 0.31``."""
    return ", ".join(f"{name} {s:.3g}" for name, s in zip(replicas, speeds, strict=True))
