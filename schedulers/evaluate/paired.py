"""Compare routers on the same arrivals: every router on every seed, drained episodes.

:func:`evaluate_policies` runs every router on every seed through one routing env (a
:class:`~schedulers.sim.env.VidurRoutingEnv` in ``evaluate`` mode, or a live
:class:`~schedulers.live.env.LiveRoutingEnv` over real engines; each episode drained to the end),
so all routers see identical arrivals per seed, and returns
:class:`~schedulers.evaluate.evaluation_results.EvaluationResults` (tables, ratios, paired wins, plots).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..routing.policy import Policy, is_heuristic, make_policy
from ..environments import AnyEnvConfig, load_any_env_config, make_env, policy_action
from .evaluation_results import EvaluationResults

def evaluate_policies(
    env_config: AnyEnvConfig | str | Path,
    routers: Mapping[str, Policy],
    seeds: Sequence[int],
    *,
    out_dir: str | Path | None = None,
    baseline: str = "round_robin",
    reward_composer: Any = None,
    compute_reward: bool = False,
    log: Callable[[str], None] | None = None,
) -> EvaluationResults:
    """Run every router on every seed (same arrivals per seed) and summarise; see the module doc.

    ``routers`` maps display names to routers. The ``baseline`` heuristic is added when missing.
    A router counts as a heuristic for "best heuristic" when it is not learned and runs without the
    true speeds (:func:`~schedulers.routing.policy.is_heuristic`). With ``compute_reward=True`` the episode return
    under ``reward_composer`` (default: the env config's reward) is recorded too. Progress lines go
    to ``log`` (stderr by default); with ``out_dir`` the CSV/JSON/PNG files are written there.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if not routers:
        raise ValueError("evaluate_policies needs at least one router")
    if not seeds:
        raise ValueError("evaluate_policies needs at least one seed")
    routers = dict(routers)
    if baseline not in routers:
        try:
            routers = {baseline: make_policy(baseline), **routers}
        except ValueError as exc:
            raise ValueError(f"baseline {baseline!r} is not among the routers: {exc}") from None
        log(f"[evaluate] added baseline router {baseline!r}")
    cfg = env_config if not isinstance(env_config, (str, Path)) else load_any_env_config(env_config)
    env = make_env(cfg, reward_composer, evaluate=True, compute_reward=compute_reward)
    # the oracle knows hidden speeds: a reference ceiling, never the "best heuristic" to beat
    heuristics = [name for name, r in routers.items() if is_heuristic(r)]
    results = EvaluationResults(cfg.name, [int(s) for s in seeds], list(routers), heuristics, baseline)
    pooled: dict[str, dict[str, list]] = {name: {"e2e": [], "ttft": []} for name in routers}
    total, done = len(routers) * len(seeds), 0
    for seed in results.seeds:
        for name, router in routers.items():
            start = time.perf_counter()
            obs, _ = env.reset(seed=seed)
            router.reset(seed)
            episode_return, steps = 0.0, 0
            while True:
                obs, reward, terminated, truncated, _ = env.step(policy_action(router, env, obs))
                episode_return += reward
                steps += 1
                if terminated or truncated:
                    break
            metrics = env.episode_metrics()
            wall = time.perf_counter() - start
            row: dict[str, Any] = {"router": name, "seed": seed, **metrics.summary(), "wall_s": wall}
            row["decisions_per_s"] = steps / wall if wall > 0 else math.nan
            if compute_reward:
                row["episode_return"] = episode_return
            results.episodes.append(row)
            pooled[name]["e2e"].append(metrics.e2e)
            pooled[name]["ttft"].append(metrics.ttft)
            done += 1
            log(
                f"[evaluate {done}/{total}] seed {seed} {name}: e2e mean {row['e2e_mean']:.3f} s, "
                f"TTFT p99 {row['ttft_p99']:.3f} s, {metrics.num_completed}/{metrics.num_requests} done "
                f"({wall:.1f} s wall)"
            )
    env.close()
    results.samples = {n: {k: np.concatenate(v) if v else np.zeros(0) for k, v in d.items()} for n, d in pooled.items()}
    if out_dir is not None:
        paths = results.save(out_dir)
        log("[evaluate] wrote " + ", ".join(str(p) for p in paths.values()))
    return results
