"""A decision log written by the simulator: a router run on an env's workload, logged as the gateway logs it.

The header and lines are the gateway's (:mod:`schedulers.live.decision_log`): arrival times, the
replica each request went to, prompt and output tokens, TTFT and e2e, and the prompt as stable block
names (:func:`~schedulers.shared.block_hashes.stable_block_hashes` of the prompt ids the simulator and
``rewardkit loadgen --env`` build for the seed). Replaying such a log of router X as X must give back
its own figures: the check of the replay path that needs no live engine.
"""

from __future__ import annotations

import os
from typing import Any

from ..live.decision_log import Decision, DecisionLogWriter
from ..routing.policy import make_policy
from ..shared.block_hashes import stable_block_hashes
from ..shared.requests import shared_prefix_requests
from .runner import run_episode

#: the Unix time a simulated log's first request is written at (any fixed epoch)
EPOCH = 1_800_000_000.0


def write_simulated_log(env_config: Any, router: str, seed: int, path: str | os.PathLike[str],
                        block_tokens: int = 16) -> int:
    """Run ``router`` on ``env_config``'s workload for ``seed`` in Vidur and log every request; returns the count."""
    from ..sim.env import VidurRoutingEnv

    env = VidurRoutingEnv(env_config, evaluate=True, compute_reward=False)
    result = run_episode(env, router, make_policy(router, simulated=True), seed)
    requests = env._ep.requests
    placed = env._ep.placed
    specs = shared_prefix_requests(env_config, seed) if env_config.shared_prefix is not None else None
    writer = DecisionLogWriter(path, router=router, replicas=[f"sim://replica-{i}" for i in range(env_config.num_replicas)],
                               observation={}, features=[], reward=None, prompt_block_tokens=block_tokens)
    rows = [[0.0] for _ in range(env_config.num_replicas)]  # the gateway logs observation rows; a replay reads none
    try:
        for i, request in enumerate(requests):
            blocks = stable_block_hashes(specs[i].prompt_ids, block_tokens) if specs is not None else None
            prompt = specs[i].prompt_tokens if specs is not None else int(request.num_prefill_tokens)
            writer.write(Decision(f"sim-{i}", router, placed[request.id][0], rows, prompt,
                                  int(request.num_decode_tokens), float(result.ttft[i]), float(result.e2e[i]),
                                  time=EPOCH + float(request.arrived_at), prompt_blocks=blocks))
    finally:
        writer.close()
    env.close()
    return len(requests)
