"""What the load generator sends: arrival times, prompt and output lengths, and the prompts themselves.

Arrivals and lengths come from an env YAML (``configs/envs``: the same Poisson arrivals and trace
lengths :func:`schedulers.sim.arrivals.sample_arrivals` gives the simulator for a seed) or from a
trace CSV (Vidur's columns ``num_prefill_tokens``, ``num_decode_tokens``, and optionally
``arrived_at`` in seconds). Lengths are scaled and shortened to fit a small engine the way Vidur
shortens long requests (both parts in proportion). Prompts are token-id lists (exact lengths;
vLLM's completions API takes them) or the same ids spelled as words. A shared-prefix workload
prepends one of G system prompts and, with sessions, each conversation's earlier turns, so that
an engine's prefix cache can reuse them.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .shared_prefix import SharedPrefix, WorkloadError

#: token ids below this are left out of prompts (the tiny tokenizer's special tokens are 0-2).
FIRST_ID = 3
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


@dataclass(frozen=True)
class RequestSpec:
    """One request: when it is sent (s after the start), its prompt as token ids, and its output length."""

    index: int
    arrival_s: float
    prompt_ids: tuple[int, ...]
    output_tokens: int
    #: system-prompt group and conversation of a shared-prefix workload (else None).
    group: int | None = None
    session: int | None = None
    #: leading tokens this prompt shares with an earlier request's prompt.
    shared_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    def prompt_text(self) -> str:
        """The ids spelled as pseudo-words, one word per id (shared id prefixes give shared text prefixes)."""
        return " ".join(word(i) for i in self.prompt_ids)


def word(token_id: int) -> str:
    """A pronounceable pseudo-word for ``token_id`` (distinct ids, distinct words)."""
    n = len(_SYLLABLES)
    out = []
    value = int(token_id)
    while True:
        out.append(_SYLLABLES[value % n])
        value //= n
        if value == 0:
            return "".join(out)


@dataclass(frozen=True)
class Lengths:
    """Arrival times (s) and prompt/output lengths of a workload, before prompts are made."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = field(default="", compare=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def fitted(self, scale: float = 1.0, max_model_len: int | None = None) -> "Lengths":
        """Lengths times ``scale``, then shortened in proportion (as Vidur does) so prompt + output <= ``max_model_len``."""
        if not (scale > 0 and math.isfinite(scale)):
            raise WorkloadError(f"--length-scale: expected a positive number, got {scale}")
        prompt = np.maximum(np.rint(self.prompt_tokens * scale), 1).astype(np.int64)
        output = np.maximum(np.rint(self.output_tokens * scale), 1).astype(np.int64)
        if max_model_len is not None:
            if max_model_len < 2:
                raise WorkloadError(f"--max-model-len: expected at least 2, got {max_model_len}")
            total = prompt + output
            excess = np.maximum(total - max_model_len, 0)
            prompt = np.maximum(prompt - np.ceil(excess * prompt / total).astype(np.int64), 1)
            output = np.maximum(output - np.ceil(excess * output / total).astype(np.int64), 1)
        return Lengths(self.arrival_s, prompt, output, self.source)


def lengths_from_env(env_path: str, seed: int, qps: float | None = None, requests: int | None = None) -> Lengths:
    """The arrivals and lengths the simulator draws for ``seed`` from env YAML ``env_path``."""
    from ..live.config import is_live_env_file, load_live_env_config  # the router extras (pandas, Vidur's package)
    from ..sim.env_config import load_env_config

    overrides: dict[str, Any] = {}
    if qps is not None:
        overrides["qps"] = qps
    if requests is not None:
        overrides["requests_per_episode"] = requests
    if is_live_env_file(env_path):  # a live env's workload part
        return lengths_from_config(load_live_env_config(env_path, overrides).env, seed)
    return lengths_from_config(load_env_config(env_path, overrides), seed)


def lengths_from_config(cfg: Any, seed: int) -> Lengths:
    """The arrivals and lengths the simulator draws for ``seed`` from a loaded ``EnvConfig``."""
    from ..sim.arrivals import sample_arrivals

    arrivals = sample_arrivals(cfg, seed)
    return Lengths(arrivals.arrived_at - arrivals.arrived_at[0], arrivals.prefill_tokens, arrivals.decode_tokens,
                   source=str(cfg.source))


def lengths_from_trace(path: str, seed: int, qps: float | None = None, requests: int | None = None) -> Lengths:
    """A trace CSV's lengths (``num_prefill_tokens``, ``num_decode_tokens``) in file order, with its
    ``arrived_at`` column, or Poisson arrivals at ``qps`` when it has none."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: expected a UTF-8 CSV text file of request lengths, got bytes that are not "
                            f"UTF-8 ({exc.reason})") from None
    except csv.Error as exc:
        raise WorkloadError(f"{path}: expected a CSV text file of request lengths, got one that cannot be read as "
                            f"CSV ({exc})") from None
    if not rows:
        raise WorkloadError(f"{path}: expected a CSV with a header and at least one request, got none")
    for col in ("num_prefill_tokens", "num_decode_tokens"):
        if col not in rows[0]:
            raise WorkloadError(f"{path}: expected a column {col!r}, got columns {list(rows[0])}")
    rows = rows[:requests] if requests is not None else rows
    values: dict[str, list[float]] = {"num_prefill_tokens": [], "num_decode_tokens": [], "arrived_at": []}
    has_times = "arrived_at" in rows[0] and qps is None
    for line, row in enumerate(rows, start=2):
        for col in ("num_prefill_tokens", "num_decode_tokens") + (("arrived_at",) if has_times else ()):
            try:
                value = float(row[col])
            except (TypeError, ValueError):
                raise WorkloadError(f"{path}:{line}: {col}: expected a number, got {row[col]!r}") from None
            if not math.isfinite(value) or value < (0 if col == "arrived_at" else 1):
                raise WorkloadError(f"{path}:{line}: {col}: expected a {'non-negative' if col == 'arrived_at' else 'positive'}"
                                    f" finite number, got {row[col]!r}")
            values[col].append(value)
    if has_times:
        times = np.asarray(values["arrived_at"])
        if np.any(np.diff(times) < 0):
            raise WorkloadError(f"{path}: arrived_at: expected non-decreasing times")
        times = times - times[0]
    else:
        if qps is None:
            raise WorkloadError(f"{path}: the trace has no arrived_at column; give --qps")
        times = poisson_times(len(rows), qps, seed)
    return Lengths(times, np.asarray(values["num_prefill_tokens"], dtype=np.int64),
                   np.asarray(values["num_decode_tokens"], dtype=np.int64), source=str(path))


def poisson_times(n: int, qps: float, seed: int) -> np.ndarray:
    """``n`` Poisson arrival times at ``qps`` (capped at 3/qps apart, like the simulator), the first at 0."""
    if not (qps > 0 and math.isfinite(qps)):
        raise WorkloadError(f"--qps: expected a positive number, got {qps}")
    rng = random.Random(seed)
    times = np.empty(n)
    now = 0.0
    for i in range(n):
        times[i] = now
        now += min(-math.log(1.0 - rng.random()) / qps, 3.0 / qps)
    return times


def build_requests(
    lengths: Lengths,
    seed: int = 0,
    vocab_size: int = 2000,
    shared: SharedPrefix | None = None,
    max_model_len: int | None = None,
) -> list[RequestSpec]:
    """Prompts for every request (random ids in ``[3, vocab_size)``, seeded), with shared prefixes if asked.

    In a shared-prefix workload the request's own prompt length is what follows the system prompt
    and history; conversations that would outgrow ``max_model_len`` start over.
    """
    if vocab_size <= FIRST_ID + 1:
        raise WorkloadError(f"--vocab-size: expected more than {FIRST_ID + 1}, got {vocab_size}")
    rng = np.random.default_rng(seed)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(int(x) for x in rng.integers(FIRST_ID, vocab_size, size=int(n)))

    if shared is None:
        return [RequestSpec(i, float(lengths.arrival_s[i]), ids(lengths.prompt_tokens[i]), int(lengths.output_tokens[i]))
                for i in range(len(lengths))]
    systems = [ids(shared.prefix_tokens) for _ in range(shared.groups)]
    histories: dict[int, tuple[int, ...]] = {}
    session_group: dict[int, int] = {}
    specs = []
    for i in range(len(lengths)):
        own, out = int(lengths.prompt_tokens[i]), int(lengths.output_tokens[i])
        session = int(rng.integers(shared.sessions)) if shared.sessions else None
        if session is None:
            group = int(rng.integers(shared.groups))
            history: tuple[int, ...] = ()
        else:
            group = session_group.setdefault(session, int(rng.integers(shared.groups)))
            history = histories.get(session, ())
        system = systems[group]
        if max_model_len is not None and len(system) + len(history) + own + out > max_model_len:
            history = ()  # the conversation starts over
            if len(system) + own + out > max_model_len:
                own = max(max_model_len - len(system) - out, 1)
                if len(system) + own + out > max_model_len:
                    raise WorkloadError(f"--shared-prefix: a {len(system)}-token system prompt leaves no room for "
                                        f"request {i} ({out} output tokens) within --max-model-len {max_model_len}")
        user = ids(own)
        prompt = system + history + user
        specs.append(RequestSpec(i, float(lengths.arrival_s[i]), prompt, out, group=group, session=session,
                                 shared_tokens=len(system) + len(history)))
        if session is not None:
            histories[session] = history + user + ids(out)  # the next turn repeats this one (with a stand-in answer)
    return specs


def summarize_workload(specs: Sequence[RequestSpec]) -> dict[str, float]:
    """Counts and means of a workload, for the report."""
    if not specs:
        return {"requests": 0}
    prompt = np.array([s.prompt_tokens for s in specs])
    out = np.array([s.output_tokens for s in specs])
    shared = np.array([s.shared_tokens for s in specs])
    span = specs[-1].arrival_s - specs[0].arrival_s
    return {
        "requests": len(specs),
        "span_s": float(span),
        "offered_qps": float((len(specs) - 1) / span) if span > 0 else float("inf"),
        "mean_prompt_tokens": float(prompt.mean()),
        "mean_output_tokens": float(out.mean()),
        "shared_token_fraction": float(shared.sum() / prompt.sum()),
    }


def load_path_check(path: str | None, option: str) -> None:
    """A located error when a file option names no file."""
    if path is not None and not Path(path).is_file():
        raise WorkloadError(f"{option} {path}: no such file")
