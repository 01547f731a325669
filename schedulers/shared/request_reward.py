"""The per-request reward: one context builder, the crediting of each request to its decision, and
loading the reward config. Shared by the simulator, the live env and the gateway.

A reward reading only :data:`REQUEST_CONTEXT_KEYS` is evaluated once per request when it completes
and credited to the decision that routed it (low-variance credit: each decision is judged by its
own request's outcome).

========================  ===============================================================
ttft                      time to first token (s): arrival to end of prefill
e2e                       end-to-end latency (s): arrival to completion
prompt_tokens             prompt length (tokens)
decode_tokens             output length (tokens), known only once the request completed
delay_caused              prefill wait (s) it added to the requests routed after it to the
                          same replica (the simulator computes it; 0 on a live cluster)
========================  ===============================================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from rewardkit.errors import ConfigError

from ..paths import resolve_path

#: the keys of a per-request context, in the order :func:`request_context` takes them.
REQUEST_CONTEXT_KEYS = ("ttft", "e2e", "prompt_tokens", "decode_tokens", "delay_caused")


def request_context(ttft: float, e2e: float, prompt_tokens: float, decode_tokens: float,
                    delay_caused: float = 0.0) -> dict[str, float]:
    """What one finished request tells the reward (see the module doc), as floats."""
    values = (ttft, e2e, prompt_tokens, decode_tokens, delay_caused)
    return {key: float(value) for key, value in zip(REQUEST_CONTEXT_KEYS, values, strict=True)}


def reads_request_keys_only(keys: Iterable[str] | None) -> bool:
    """Whether a reward reading ``keys`` is a per-request reward (some keys, all of them per-request)."""
    keys = set(keys or ())
    return bool(keys) and keys <= set(REQUEST_CONTEXT_KEYS)


def credit_requests(composer: Any, contexts: Iterable[tuple[int, Mapping[str, float]]],
                    info: dict[str, Any]) -> float:
    """Reward each finished request's context and credit it to its routing decision.

    ``contexts`` yields ``(decision index, request context)``. Sets ``info["credits"]`` (the
    ``(decision, reward)`` pairs) and, when any, ``info["reward_terms"]`` (each breakdown entry
    averaged over the requests); returns the rewards' sum.
    """
    credits: list[tuple[int, float]] = []
    sums: dict[str, float] = {}
    for decision, ctx in contexts:
        out = composer(ctx, terminated=False, truncated=False)
        credits.append((decision, float(out.total)))
        for key, value in out.as_dict().items():
            sums[key] = sums.get(key, 0.0) + float(value)
    info["credits"] = credits
    if credits:
        info["reward_terms"] = {key: value / len(credits) for key, value in sums.items()}
    return float(sum(r for _, r in credits))


def load_reward_composer(reward_composer: Any, workload: Any) -> tuple[Any, str]:
    """The composer (a callable, a rewardkit YAML path, or ``None`` for the workload's ``reward_config``)
    and where it came from."""
    if callable(reward_composer) and not isinstance(reward_composer, (str, os.PathLike)):
        return reward_composer, type(reward_composer).__name__
    if reward_composer is None:
        path, label = resolve_path(workload.reward_config, workload.source), workload.reward_config
    else:
        given = Path(reward_composer)
        path = given if given.is_file() else resolve_path(given, None)
        label = str(reward_composer)
    if not path.is_file():
        raise ConfigError(f"expected a rewardkit reward YAML file, got {label!r} (resolved to {path}, which does not "
                          f"exist)", source=workload.source, path="reward_config")
    from rewardkit import RewardComposer

    return RewardComposer.from_yaml(path), str(path)
