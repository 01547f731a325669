"""A replay from start to end: logs read, workload built, cluster fitted, the logged router then each candidate run.

:func:`prepare` does the first three (what ``rewardkit train --from-log`` trains on too);
:func:`replay_logs` runs the logged router (calibration) and the candidates on the same seeds and
returns :func:`~schedulers.replay.report.summarize`'s findings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..routing.policy import Policy, make_policy
from .fit import ClusterFit, fit_cluster
from .logged import MIN_REQUESTS, LoggedRun, read_logged_run
from .report import summarize
from .runner import EpisodeResult, LoggedActions, run_routers
from .workload import DEFAULT_BASE_ENV, DEFAULT_JITTER_MS, ReplayWorkload, build_workload

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Prepared:
    """A log ready to replay: its requests, the simulator's workload, the fitted cluster."""

    run: LoggedRun
    workload: ReplayWorkload
    fit: ClusterFit


def prepare(paths: Sequence[str], *, base_env: str = DEFAULT_BASE_ENV, profile: str | None = None,
            jitter_ms: float = DEFAULT_JITTER_MS, min_requests: int = MIN_REQUESTS, windows: int = 1,
            log: Log | None = _stderr) -> Prepared:
    """Read ``paths``, build the workload and fit each replica's speed (per time window too with ``windows`` > 1;
    progress to ``log``)."""
    from ..sim.env_config import VIDUR_BLOCK_TOKENS, load_env_config

    run = read_logged_run(paths, min_requests)
    base = load_env_config(base_env)
    workload = build_workload(run, VIDUR_BLOCK_TOKENS, base.max_tokens, jitter_ms)
    if log is not None and not workload.has_prompts:
        log("[replay] the log has no prompt blocks (an older gateway, or text prompts): no prefix is shared in the replay")
    fit = fit_cluster(run, workload, base_env=base_env, profile=profile, windows=windows, log=log)
    return Prepared(run, workload, fit)


def router_from_spec(spec: str) -> tuple[str, Policy]:
    """``name`` (a registered router, parameters allowed), ``NAME=PATH.pt`` or ``PATH.pt`` (a learned router)."""
    spec = spec.strip()
    name, path = spec, None
    if spec.endswith(".pt"):
        name, _, path = spec.rpartition("=") if "=" in spec else ("ppo", "", spec)
        if not Path(path).is_file():
            raise ValueError(f"--routers: {spec}: expected an existing checkpoint file, got no such file")
        return name, make_policy("ppo", path, threads=1)
    try:
        return name, make_policy(name, simulated=True)
    except ValueError as exc:
        raise ValueError(f"--routers: {exc}") from None


def logged_router(run: LoggedRun) -> tuple[str, Policy, str]:
    """The logged router rebuilt (name, policy, how), or the logged decisions themselves when it cannot be."""
    name = run.router or "logged"
    checkpoint = run.header.get("checkpoint")
    try:
        if checkpoint:
            return name, make_policy(name, checkpoint, threads=1), "its own rule"
        return name, make_policy(name, simulated=True), "its own rule"
    except (ValueError, OSError, RuntimeError) as exc:
        why = str(exc).split(";")[0]
        return f"{name} (logged decisions)", LoggedActions([r.replica for r in run.requests]), \
            f"the logged decisions, as the router could not be rebuilt ({why})"


def replay_logs(paths: Sequence[str], routers: Sequence[str], *, seeds: int = 5, base_env: str = DEFAULT_BASE_ENV,
                profile: str | None = None, jitter_ms: float = DEFAULT_JITTER_MS, windows: int = 1,
                log: Log | None = _stderr, prepared: Prepared | None = None,
                ) -> tuple[dict[str, Any], dict[str, list[EpisodeResult]], Prepared]:
    """Replay the logged router, then ``routers``, on ``seeds`` seeds (0, 1, ...); the findings, the episodes, the setup."""
    if seeds < 1:
        raise ValueError(f"--seeds: expected a count of at least 1, got {seeds}")
    built = dict(router_from_spec(s) for s in routers if s.strip())
    if not built:
        raise ValueError("--routers: expected at least one router name")
    prep = prepared or prepare(paths, base_env=base_env, profile=profile, jitter_ms=jitter_ms, windows=windows, log=log)
    reference, policy, how = logged_router(prep.run)
    chosen: dict[str, Policy] = {reference: policy, **{n: p for n, p in built.items() if n != reference}}
    if log is not None:
        log(f"[replay] calibrating on {reference} ({how}), then {len(chosen) - 1} candidate(s) on {seeds} seed(s)")
    results = run_routers(prep.fit.env, chosen, list(range(seeds)), log)
    summary = summarize(prep.run, results, prep.fit.overhead_s, reference, speeds=prep.fit.speeds,
                        fit_gaps=prep.fit.gaps, calibrated_by=how)
    summary["fitted_slowdowns"] = prep.fit.slowdowns
    return summary, results, prep
