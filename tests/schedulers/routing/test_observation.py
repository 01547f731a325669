"""build_observation: rows equal to the features' definitions, feature by feature, to the bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulers.routing.observation import FEATURE_NAMES, SINCE_COMPLETION_CAP_WINDOWS, build_observation, feature_names
from schedulers.routing.snapshot import ReplicaSnapshot
from schedulers.routing.ties import argmin_random
from schedulers.shared.observation_config import ObservationConfig


def by_definition(s: ReplicaSnapshot, prompt: float, cfg: ObservationConfig, block_size: int = 16) -> np.ndarray:
    """Each column as FEATURE_NAMES defines it, one at a time."""
    cs, ts, window = cfg.count_scale, cfg.token_scale, cfg.recent_window_s
    wait = (s.prefill_tokens + float(prompt)) / np.maximum(s.measured_speed, 1e-3) / ts
    req, tok, kv = s.outstanding_requests, s.outstanding_tokens, s.kv_fraction
    columns = {
        "waiting": s.waiting / cs, "running": s.running / cs, "kv_used_frac": kv, "prefill_tokens": s.prefill_tokens / ts,
        "decoded_tokens": s.decoded_tokens / ts, "outstanding_tokens": tok / ts,
        "waiting_prefill_tokens": s.waiting_prefill_tokens / ts, "recent_completions": s.recent_completions / cs,
        "busy": s.busy, "rel_outstanding_requests": (req - req.mean()) / cs, "rel_outstanding_tokens": (tok - tok.mean()) / ts,
        "rel_kv_used_frac": kv - kv.mean(), "declared_speed": s.declared_speed, "measured_speed": s.measured_speed,
        "tokens_per_s": s.tokens_per_s / ts,
        "since_completion": np.minimum(s.since_completion, SINCE_COMPLETION_CAP_WINDOWS * window) / window,
        "expected_wait": wait, "rel_expected_wait": wait - wait.mean(),
        "req_prompt_tokens": np.full(s.num_replicas, prompt / ts),
        "req_prompt_kv_frac": math.ceil(prompt / block_size) / np.maximum(s.kv_capacity, 1.0),
        "prefix_match": np.clip(s.prefix_match, 0.0, 1.0)}
    return np.stack([columns[name] for name in feature_names(cfg)], axis=1).astype(np.float32)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 12), prefix=st.booleans())
def test_rows_equal_the_features_definitions_bit_for_bit(data, n, prefix):
    values = st.lists(st.floats(0, 5000, allow_subnormal=False), min_size=n, max_size=n)
    snap = ReplicaSnapshot(**{name: np.array(data.draw(values)) for name in ReplicaSnapshot.__dataclass_fields__})
    cfg = ObservationConfig(prefix_match=prefix, count_scale=data.draw(st.floats(0.5, 50)),
                            token_scale=data.draw(st.floats(10, 5000)))
    prompt = float(data.draw(st.integers(1, 4000)))
    rows = build_observation(snap, prompt, cfg)
    assert rows.dtype == np.float32 and rows.shape == (n, len(FEATURE_NAMES) + prefix)
    assert np.array_equal(rows, by_definition(snap, prompt, cfg))


def test_argmin_random_breaks_ties_uniformly_and_refuses_nan():
    rng = np.random.default_rng(0)
    picks = [argmin_random(np.array([3.0, 1.0, 1.0, 2.0, 1.0]), rng) for _ in range(3000)]
    assert set(picks) == {1, 2, 4} and all(abs(picks.count(i) / 3000 - 1 / 3) < 0.04 for i in (1, 2, 4))
    assert argmin_random([5, 4, 9], rng) == 1  # a list works as an array does
    with pytest.raises(ValueError, match="NaN"):
        argmin_random(np.array([1.0, np.nan]), rng)
