"""Observation rows a router sees: per-replica load features plus the arriving request's, NumPy only.

Row ``i`` is replica ``i``'s features followed by the request's features (the same on every row),
so a scorer applied to each row is permutation-equivariant. See ``FEATURE_NAMES`` and
:mod:`schedulers.sim.env` for what each feature means.
"""

from __future__ import annotations

import math

import numpy as np

from ..shared.observation_config import ObservationConfig
from .snapshot import ReplicaSnapshot

__all__ = ["FEATURE_NAMES", "PREFIX_FEATURES", "build_observation", "feature_names",
           "observation_bounds"]


REPLICA_FEATURES = (
    "waiting",
    "running",
    "kv_used_frac",
    "prefill_tokens",
    "decoded_tokens",
    "outstanding_tokens",
    "waiting_prefill_tokens",
    "recent_completions",
    "busy",
    "rel_outstanding_requests",
    "rel_outstanding_tokens",
    "rel_kv_used_frac",
    "declared_speed",
    "measured_speed",
    "tokens_per_s",
    "since_completion",
    "expected_wait",
    "rel_expected_wait",
)
REQUEST_FEATURES = ("req_prompt_tokens", "req_prompt_kv_frac")
FEATURE_NAMES = REPLICA_FEATURES + REQUEST_FEATURES
#: appended after ``FEATURE_NAMES`` when ``ObservationConfig.prefix_match`` is on: the share of the
#: arriving request's prompt each replica's prefix cache likely holds (``ReplicaSnapshot.prefix_match``).
PREFIX_FEATURES = ("prefix_match",)


def feature_names(obs_config: ObservationConfig | None = None) -> tuple[str, ...]:
    """Column names of the observation rows ``obs_config`` gives."""
    return FEATURE_NAMES + (PREFIX_FEATURES if obs_config is not None and obs_config.prefix_match else ())


DEFAULT_BLOCK_SIZE = 16
#: ``since_completion`` is capped at this many recent windows.
SINCE_COMPLETION_CAP_WINDOWS = 6.0
#: speeds (declared or measured) above this are outside the observation space's bounds.
MAX_SPEED = 8.0


def build_observation(
    snapshot: ReplicaSnapshot,
    prompt_tokens: float,
    obs_config: ObservationConfig,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> np.ndarray:
    """Observation rows ``(num_replicas, len(FEATURE_NAMES))`` for a request of ``prompt_tokens``.

    Built from three blocks of columns (counts over ``count_scale``, tokens over ``token_scale``, the
    rest as they are) put in ``FEATURE_NAMES`` order at the end: a dozen array operations rather than
    one per feature, which is most of a learned router's decision time on a handful of replicas.
    """
    if snapshot.num_replicas < SMALL_CLUSTER:
        return _small_cluster_rows(snapshot, prompt_tokens, obs_config, block_size)
    cs, ts = obs_config.count_scale, obs_config.token_scale
    waiting, running = snapshot.waiting, snapshot.running
    prefill, decoded = snapshot.prefill_tokens, snapshot.decoded_tokens
    outstanding_req = waiting + running
    outstanding_tok = prefill + decoded
    kv = snapshot.kv_blocks / np.maximum(snapshot.kv_capacity, 1.0)
    wait = (prefill + float(prompt_tokens)) / np.maximum(snapshot.measured_speed, 1e-3) / ts
    counts = np.array([waiting, running, snapshot.recent_completions, outstanding_req - outstanding_req.mean()]) / cs
    tokens = np.array([prefill, decoded, outstanding_tok, snapshot.waiting_prefill_tokens,
                       outstanding_tok - outstanding_tok.mean(), snapshot.tokens_per_s]) / ts
    window = obs_config.recent_window_s
    blocks = math.ceil(prompt_tokens / block_size)
    other = [kv, snapshot.busy, kv - kv.mean(), snapshot.declared_speed, snapshot.measured_speed,
             np.minimum(snapshot.since_completion, SINCE_COMPLETION_CAP_WINDOWS * window) / window,
             wait, wait - wait.mean(), np.full(len(kv), prompt_tokens / ts),
             blocks / np.maximum(snapshot.kv_capacity, 1.0)]
    if obs_config.prefix_match:
        other.append(np.clip(np.asarray(snapshot.prefix_match, dtype=np.float64), 0.0, 1.0))
    columns = np.concatenate([counts, tokens, np.array(other, dtype=np.float64)])
    order = _COLUMN_ORDER if obs_config.prefix_match else _COLUMN_ORDER[:-1]
    return columns[order].T.astype(np.float32)


#: below this many replicas the rows are computed in plain Python (NumPy's mean sums fewer than 8
#: values one after another, as Python's sum does, so both give the same bits)
SMALL_CLUSTER = 8


def _small_cluster_rows(snapshot: ReplicaSnapshot, prompt_tokens: float, obs_config: ObservationConfig,
                        block_size: int) -> np.ndarray:
    """:func:`build_observation` for a handful of replicas, feature by feature over Python floats: the same
    values to the bit, without the two dozen NumPy calls that dominate a live decision on a cold CPU."""
    cs, ts = obs_config.count_scale, obs_config.token_scale
    window = obs_config.recent_window_s
    cap = SINCE_COMPLETION_CAP_WINDOWS * window
    prompt = float(prompt_tokens)
    waiting, running = snapshot.waiting.tolist(), snapshot.running.tolist()
    prefill, decoded = snapshot.prefill_tokens.tolist(), snapshot.decoded_tokens.tolist()
    kv_blocks, capacity = snapshot.kv_blocks.tolist(), snapshot.kv_capacity.tolist()
    measured = snapshot.measured_speed.tolist()
    n = len(waiting)
    out_req = [w + r for w, r in zip(waiting, running, strict=True)]
    out_tok = [p + d for p, d in zip(prefill, decoded, strict=True)]
    kv = [b / max(c, 1.0) for b, c in zip(kv_blocks, capacity, strict=True)]
    wait = [(p + prompt) / max(m, 1e-3) / ts for p, m in zip(prefill, measured, strict=True)]
    mean_req, mean_tok, mean_kv, mean_wait = (sum(v) / n for v in (out_req, out_tok, kv, wait))
    request_tokens = prompt_tokens / ts
    blocks = math.ceil(prompt_tokens / block_size)
    columns = [
        [w / cs for w in waiting], [r / cs for r in running], kv, [p / ts for p in prefill],
        [d / ts for d in decoded], [t / ts for t in out_tok],
        [p / ts for p in snapshot.waiting_prefill_tokens.tolist()],
        [c / cs for c in snapshot.recent_completions.tolist()], snapshot.busy.tolist(),
        [(q - mean_req) / cs for q in out_req], [(t - mean_tok) / ts for t in out_tok], [k - mean_kv for k in kv],
        snapshot.declared_speed.tolist(), measured, [t / ts for t in snapshot.tokens_per_s.tolist()],
        [min(c, cap) / window for c in snapshot.since_completion.tolist()],
        wait, [w - mean_wait for w in wait], [request_tokens] * n, [blocks / max(c, 1.0) for c in capacity]]
    if obs_config.prefix_match:
        columns.append([min(max(m, 0.0), 1.0) for m in np.asarray(snapshot.prefix_match, dtype=np.float64).tolist()])
    return np.array(list(zip(*columns, strict=True)), dtype=np.float32).reshape(n, len(columns))


# where each feature of FEATURE_NAMES + PREFIX_FEATURES sits in build_observation's stacked columns
_STACKED = (("waiting", "running", "recent_completions", "rel_outstanding_requests")
            + ("prefill_tokens", "decoded_tokens", "outstanding_tokens", "waiting_prefill_tokens",
               "rel_outstanding_tokens", "tokens_per_s")
            + ("kv_used_frac", "busy", "rel_kv_used_frac", "declared_speed", "measured_speed", "since_completion",
               "expected_wait", "rel_expected_wait", "req_prompt_tokens", "req_prompt_kv_frac", "prefix_match"))
_COLUMN_ORDER = np.array([_STACKED.index(name) for name in FEATURE_NAMES + PREFIX_FEATURES])


def observation_bounds(
    obs: ObservationConfig, max_in_flight: int, max_tokens: int, min_speed: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds when at most ``max_in_flight`` requests of ``max_tokens`` each are in flight."""
    counts = max_in_flight / obs.count_scale
    tokens = max_in_flight * max_tokens / obs.token_scale
    waits = (max_in_flight + 1) * max_tokens / obs.token_scale / max(min_speed, 1e-3)
    high = {
        "waiting": counts,
        "running": counts,
        "kv_used_frac": 1.0,
        "prefill_tokens": tokens,
        "decoded_tokens": tokens,
        "outstanding_tokens": tokens,
        "waiting_prefill_tokens": tokens,
        "recent_completions": counts,
        "busy": 1.0,
        "rel_outstanding_requests": counts,
        "rel_outstanding_tokens": tokens,
        "rel_kv_used_frac": 1.0,
        "declared_speed": MAX_SPEED,
        "measured_speed": MAX_SPEED,
        "tokens_per_s": 1e6 / obs.token_scale,
        "since_completion": SINCE_COMPLETION_CAP_WINDOWS,
        "expected_wait": waits,
        "rel_expected_wait": waits,
        "req_prompt_tokens": max_tokens / obs.token_scale,
        "req_prompt_kv_frac": 1.0,
        "prefix_match": 1.0,
    }
    names = feature_names(obs)
    high_arr = np.array([high[name] for name in names], dtype=np.float32)
    low_arr = np.array([-high[name] if name.startswith("rel_") else 0.0 for name in names], dtype=np.float32)
    return low_arr, high_arr
