"""A logged run as the simulator's input: per-seed arrivals with prompt blocks, and the cluster.

Arrivals are the logged ones (seed 0 exactly; other seeds with each time moved by a uniform jitter,
kept in order: Vidur is deterministic given its arrivals, so the seeds' randomness is that timing
noise and the routers' own tie-breaks). Prompt and output lengths are the logged tokens. Shared
prefixes come from the logged block names: the simulator's blocks (16 tokens) are named by the
logged block that ends at or after them, so two prompts share simulated blocks exactly as far as
they share logged ones. The cluster is an env YAML's (model profile, batch cap, KV cache) with one
replica group per logged replica at its fitted speed (:mod:`schedulers.replay.fit`) and, when the log
has the engines' reports (its ``engines`` lines), a prefix cache as large as that replica's engine.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rewardkit.errors import ConfigError

from ..shared.arrivals import Arrivals
from ..shared.observation_config import OBSERVATION_CHECKS, ObservationConfig
from .logged import LoggedRun

#: the env YAML whose simulated cluster a replay starts from (the shared-prefix live shape)
DEFAULT_BASE_ENV = "configs/envs/prefix_live_shape.yaml"
#: default arrival jitter of seeds other than 0 (ms, each way)
DEFAULT_JITTER_MS = 5.0


def simulated_block_names(blocks: Sequence[str], logged_tokens: int, sim_tokens: int) -> tuple[tuple[str, int], ...]:
    """Names of the simulator's ``sim_tokens``-token blocks covered by ``blocks`` of ``logged_tokens`` tokens each."""
    covered = len(blocks) * logged_tokens
    out = []
    for m in range(covered // sim_tokens):
        last_token = (m + 1) * sim_tokens - 1
        out.append((blocks[last_token // logged_tokens], m))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class ReplayWorkload:
    """The logged requests in the simulator's terms; :meth:`arrivals` gives one seed's."""

    arrived_at: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    block_names: tuple[tuple[Any, ...], ...]
    jitter_s: float = DEFAULT_JITTER_MS / 1000.0

    @property
    def num_requests(self) -> int:
        """Requests per replay."""
        return len(self.arrived_at)

    @property
    def has_prompts(self) -> bool:
        """Whether any request has prompt blocks (else no prefix can be shared)."""
        return any(self.block_names)

    def arrivals(self, seed: int) -> Any:
        """Seed ``seed``'s :class:`~schedulers.sim.prefix_cache.PromptedArrivals` (seed 0: exactly as logged)."""
        from ..sim.prefix_cache import PromptedArrivals

        return PromptedArrivals(Arrivals(self._times(int(seed)), self.prompt_tokens, self.output_tokens),
                                self.block_names, np.zeros(self.num_requests, dtype=np.int64))

    def _times(self, seed: int) -> np.ndarray:
        return _jittered(self.arrived_at.tobytes(), seed, self.jitter_s).copy()


@lru_cache(maxsize=64)
def _jittered(times: bytes, seed: int, jitter_s: float) -> np.ndarray:
    t = np.frombuffer(times, dtype=np.float64)
    if seed == 0 or jitter_s <= 0:
        return t.copy()
    moved = t + np.random.default_rng(seed).uniform(-jitter_s, jitter_s, size=t.size)
    return np.maximum.accumulate(np.maximum(moved, 0.0))


def build_workload(run: LoggedRun, sim_block_tokens: int, max_tokens: int,
                   jitter_ms: float = DEFAULT_JITTER_MS) -> ReplayWorkload:
    """The logged requests as simulator arrivals: lengths fitted into ``max_tokens`` (prompt first kept)."""
    prompt = np.array([r.prompt_tokens for r in run.requests], dtype=np.int64)
    output = np.array([r.output_tokens for r in run.requests], dtype=np.int64)
    prompt = np.minimum(prompt, max_tokens - 1)
    output = np.maximum(np.minimum(output, max_tokens - prompt), 1)
    logged = run.block_tokens
    names = tuple(simulated_block_names(r.prompt_blocks, logged, sim_block_tokens) if logged else ()
                  for r in run.requests)
    # a prompt shortened to fit keeps only the blocks it still holds
    names = tuple(n[: int(p) // sim_block_tokens] for n, p in zip(names, prompt, strict=True))
    times = np.array([r.arrived_at for r in run.requests], dtype=np.float64)
    return ReplayWorkload(times, prompt, output, names, jitter_s=max(float(jitter_ms), 0.0) / 1000.0)


def header_observation(run: LoggedRun, base: ObservationConfig) -> ObservationConfig:
    """The observation settings the logged gateway used (its header's), else ``base``'s."""
    given = run.header.get("observation")
    if not isinstance(given, dict):
        return base
    known = {k: v for k, v in given.items() if k in OBSERVATION_CHECKS}
    try:
        return dataclasses.replace(base, **known)
    except TypeError:
        return base


def replica_kv_blocks(run: LoggedRun) -> list[int | None]:
    """Each logged replica's KV capacity in the simulator's blocks (its engine's report, rounded down; None: unknown)."""
    from ..bounds import MAX_KV_BLOCKS
    from ..sim.env_config import VIDUR_BLOCK_TOKENS

    tokens = run.kv_tokens or [None] * run.num_replicas
    return [None if t is None else max(1, min(int(t) // VIDUR_BLOCK_TOKENS, MAX_KV_BLOCKS)) for t in tokens]


def replay_env_config(run: LoggedRun, speeds: Sequence[float], *, base_env: str | Path = DEFAULT_BASE_ENV,
                      profile: str | None = None, slowdowns: Sequence[dict[str, float]] = ()) -> Any:
    """The simulated cluster of a replay: ``base_env``'s, one replica per logged one at ``speeds``, slowed by
    ``slowdowns`` (explicit events ``{replica, start_s, duration_s, factor}``, as fitted per time window), each
    replica's prefix cache as large as its engine reported (the log's ``engines`` lines; else ``base_env``'s).

    ``profile`` is a Vidur profile folder (``profiles_dir``); the header's ``profile`` (a dataset id
    such as ``local/vidur-a100-codellama-34b``) names the compute profile when given.
    """
    from ..sim.env_config import env_config_from_dict, load_env_config

    base = load_env_config(base_env)
    blocks = replica_kv_blocks(run)
    groups = [{"count": 1, "speed": float(s), "name": str(name)} for s, name in zip(speeds, run.replicas, strict=True)]
    for group, own in zip(groups, blocks, strict=True):
        if own is not None:
            group["kv_blocks"] = own
    overrides: dict[str, Any] = {
        "replicas": groups,
        "requests_per_episode": len(run.requests),
        "shared_prefix": None,
        "slowdowns": {"events": [dict(e) for e in slowdowns]} if slowdowns else None,
    }
    if profile is not None:
        if not Path(profile).is_dir():
            raise ConfigError(f"--profile {profile}: expected a Vidur profile folder (such as ../shared/vidur/profiles), "
                              "got no such folder")
        overrides["profiles_dir"] = str(Path(profile).resolve())
    header_profile = run.header.get("profile")
    if isinstance(header_profile, str) and header_profile:
        overrides["compute_profile"] = header_profile
    if any(b is not None for b in blocks):
        # Vidur's KV memory is one figure for every replica: the largest engine's, so none is starved
        # below its engine (each prefix cache is bounded by its own engine's capacity, above)
        overrides["kv_blocks"] = max(b for b in blocks if b is not None)
    data = base.to_dict()
    data.pop("num_replicas", None)
    data.update(overrides)
    cfg = env_config_from_dict(data, source=str(base_env))
    return dataclasses.replace(cfg, observation=header_observation(run, cfg.observation))
