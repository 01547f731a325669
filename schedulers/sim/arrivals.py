"""One episode's arrivals, drawn exactly as Vidur's synthetic generator draws them for a seed."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rewardkit.errors import ConfigError

from .env_config import EnvConfig
from .simulation_config import resolved_trace_file


@lru_cache(maxsize=8)
def _trace_lengths(trace_file: str, max_tokens: int, length_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of a trace times ``length_scale`` (rounded, at least 1), then
    shortened to ``max_tokens`` as Vidur does."""
    import pandas as pd

    try:
        df = pd.read_csv(trace_file, encoding="utf-8")
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ConfigError(f"{trace_file}: expected a UTF-8 CSV text file of request lengths, got one that cannot be "
                          f"read as CSV ({reason})", path="trace_file") from None
    for col in ("num_prefill_tokens", "num_decode_tokens"):
        if col not in df.columns:
            shown = [str(c)[:40] for c in list(df.columns)[:10]]
            raise ConfigError(f"{trace_file}: expected a column {col!r}, got columns {shown}", path="trace_file")
    lengths = df[["num_prefill_tokens", "num_decode_tokens"]].apply(pd.to_numeric, errors="coerce")
    bad = (lengths.isna().any(axis=1) | (lengths < 0).any(axis=1) | (lengths % 1 != 0).any(axis=1)
           | (lengths.sum(axis=1) <= 0) | (lengths > 2**53).any(axis=1))
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        got = [str(v)[:40] for v in df.iloc[row][["num_prefill_tokens", "num_decode_tokens"]].tolist()]
        raise ConfigError(f"{trace_file}: line {row + 2}: expected whole token counts from 0 to 2^53 in "
                          f"num_prefill_tokens and num_decode_tokens, not both 0, got {got}", path="trace_file")
    prefill = lengths["num_prefill_tokens"].astype(int)
    decode = lengths["num_decode_tokens"].astype(int)
    if length_scale != 1.0:
        prefill = (prefill * length_scale).round().clip(lower=1).astype(int)
        decode = (decode * length_scale).round().clip(lower=1).astype(int)
    total = prefill + decode
    diff = (total - max_tokens).clip(lower=0)
    prefill = prefill - np.ceil(diff * (prefill / total)).astype(int)
    decode = decode - np.ceil(diff * (decode / total)).astype(int)
    return prefill.clip(lower=1).to_numpy(), decode.clip(lower=1).to_numpy()


@lru_cache(maxsize=64)
def _shuffle(n: int, seed: int) -> np.ndarray:
    import pandas as pd

    return pd.Series(np.arange(n)).sample(frac=1, random_state=seed).to_numpy()


@dataclass(frozen=True)
class Arrivals:
    """One episode's arrivals: times (s) and prompt/output lengths (the latter hidden from routers)."""

    arrived_at: np.ndarray
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray


def sample_arrivals(cfg: EnvConfig, seed: int) -> Arrivals:
    """Vidur's synthetic generator (trace lengths times ``cfg.length_scale``, Poisson intervals capped at
    3/qps) for ``seed``."""
    try:
        prefill, decode = _trace_lengths(str(resolved_trace_file(cfg)), cfg.max_tokens, cfg.length_scale)
    except ConfigError as exc:  # located in the env YAML too: "env.yaml: trace_file: trace.csv: line 3: ..."
        raise exc.within(cfg.source) from None
    n = cfg.requests_per_episode
    if n > len(prefill):
        raise ConfigError(
            f"expected at most {len(prefill)} (the trace's length), got {n}", source=cfg.source, path="requests_per_episode"
        )
    order = _shuffle(len(prefill), seed)[:n]
    rng = random.Random(seed)
    cap = 3.0 / cfg.qps
    times = np.empty(n)
    now = 0.0
    for i in range(n):
        now += min(-math.log(1.0 - rng.random()) / cfg.qps, cap)
        times[i] = now
    return Arrivals(times, prefill[order].astype(np.int64), decode[order].astype(np.int64))
