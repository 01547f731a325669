"""``rewardkit train --from-log LOG --mode replay``: PPO in the simulator on a gateway's own traffic.

The log is prepared as ``rewardkit replay`` prepares it (:func:`schedulers.replay.pipeline.prepare`:
arrivals, lengths and shared prefixes as logged, each replica at its fitted speed), and the training
config's PPO, reward and seeds train on it: each training episode is the logged workload with its
arrival times jittered by the episode seed (seed 0, the log exactly, is kept for judging), so the
router learns the traffic's shape, not one sequence. The operator's loop is: log, replay, train
(this), replay the new router on a held-out log, deploy.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

from .pipeline import prepare
from .workload import DEFAULT_BASE_ENV


def train_on_log(logs: Sequence[str], config: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 profile: str | None = None, base_env: str = DEFAULT_BASE_ENV, resume: bool = True,
                 log: Callable[[str], None] | None = None) -> Any:
    """Train ``config``'s PPO router on the replayed workload of ``logs``; returns the :class:`TrainResult`."""
    from ..paths import resolve_path
    from ..sim.env import VidurRoutingEnv
    from ..train.config import load_config
    from ..train.trainer import train

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    cfg, source = load_config(config)
    prep = prepare(list(logs), base_env=base_env, profile=profile, log=log)
    reward = str(resolve_path(cfg["reward"], source)) if cfg.get("reward") else None
    env_config = prep.fit.env_config

    def make() -> Any:
        return VidurRoutingEnv(env_config, reward_composer=reward, arrivals_source=prep.workload.arrivals)

    log(f"[train] on the replayed workload of {', '.join(map(str, logs))}: {prep.workload.num_requests} requests "
        f"per episode, fitted speeds {', '.join(f'{s:.3g}' for s in prep.fit.speeds)}")
    return train(config, out, env_factory=make, resume=resume)
