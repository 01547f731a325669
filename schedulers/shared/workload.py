"""``Workload``: the simulator-free part of an env YAML, read the same from any env file, simulated or live.

Which requests arrive and how they are judged: the trace (``trace_file``), the Poisson rate
(``qps``), the requests per episode, the length bounds (``max_tokens``, ``length_scale``), the
observation settings (``observation``: :class:`~schedulers.shared.observation_config.ObservationConfig`)
and the per-request reward (``reward_config``). :func:`load_workload` reads these keys from any env YAML and leaves the rest
(a simulated cluster, a ``live`` section) to the code that owns it; the simulator's ``EnvConfig``
checks the same keys with the same :data:`WORKLOAD_CHECKS`. Errors name the file, the key path and
what was expected (``env.yaml: qps: expected a number from 0.001 to 100000, got -1``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rewardkit.config import load_yaml
from rewardkit.errors import ConfigError
from rewardkit.params import Param, describe, validate_schema

from ..bounds import (MAX_LENGTH_SCALE, MAX_PREFIX_EPISODE_TOKENS, MAX_PREFIX_GROUPS, MAX_PREFIX_SESSIONS,
                      MAX_PREFIX_TOKENS, MAX_PREFIX_TOTAL_TOKENS, MAX_QPS, MIN_LENGTH_SCALE, MIN_QPS)
from .observation_config import OBSERVATION_CHECKS, ObservationConfig
from .requests import SharedPrefix


@dataclass(frozen=True)
class Workload:
    """Arrivals, lengths, observation settings and reward of an env YAML (see the module doc)."""

    trace_file: str = "../shared/vidur/traces/splitwise_conv.csv"
    #: Poisson arrival rate (requests per second).
    qps: float = 12.5
    requests_per_episode: int = 1000
    #: requests longer than this (prompt + output) are shortened, as Vidur's trace generator does.
    max_tokens: int = 4096
    #: the trace's prompt and output lengths are multiplied by this (then shortened to ``max_tokens``).
    length_scale: float = 1.0
    reward_config: str = "configs/rewards/vidur_hybrid.yaml"
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    #: a shared-prefix workload (``groups`` system prompts of ``prefix_tokens``, ``sessions``
    #: multi-turn conversations; the load generator's ``--shared-prefix G:T --sessions S``): the
    #: simulator then gives each replica a prefix cache (:mod:`schedulers.sim.prefix_cache`), and
    #: ``rewardkit loadgen --env`` sends the same prompts; ``None``: unique prompts.
    shared_prefix: SharedPrefix | None = None
    #: file the workload was read from (for messages); not a YAML key.
    source: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """Stem of the source file, or ``"env"``."""
        return Path(self.source).stem if self.source else "env"


_SHARED_PREFIX_SCHEMA = {
    "groups": Param.integer(doc="system prompts requests draw from", minimum=1, maximum=MAX_PREFIX_GROUPS),
    "prefix_tokens": Param.integer(doc="tokens of each system prompt", minimum=1, maximum=MAX_PREFIX_TOKENS),
    "sessions": Param.integer(0, "multi-turn conversations (0: single turns)", minimum=0, maximum=MAX_PREFIX_SESSIONS),
}


def _check_shared_prefix(v: Any) -> SharedPrefix | None:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise ValueError("a mapping {groups: G, prefix_tokens: T, sessions: S} or null")
    return SharedPrefix(**validate_schema(_SHARED_PREFIX_SCHEMA, v))


def shared_prefix_fit_errors(shared: SharedPrefix | None, max_tokens: int, source: str | None,
                             requests_per_episode: int | None = None) -> list[ConfigError]:
    """Located errors when the system prompt leaves no room for a question and an answer in
    ``max_tokens``, when the system prompts hold more than ``MAX_PREFIX_TOTAL_TOKENS`` tokens in
    all (groups x prefix_tokens), or when an episode's prompts could hold more than
    ``MAX_PREFIX_EPISODE_TOKENS`` (requests_per_episode x max_tokens): each value within its own
    bound can still ask for gigabytes of prompts together."""
    if shared is None:
        return []
    errors = []
    if shared.prefix_tokens + 2 > max_tokens:
        errors.append(ConfigError(f"expected at most {max_tokens - 2} (max_tokens {max_tokens} less room for a 1-token "
                                  f"question and answer), got {shared.prefix_tokens}", source=source,
                                  path="shared_prefix.prefix_tokens"))
    total = shared.groups * shared.prefix_tokens
    if total > MAX_PREFIX_TOTAL_TOKENS:
        errors.append(ConfigError(f"expected at most {MAX_PREFIX_TOTAL_TOKENS:,} system-prompt tokens in all (groups x "
                                  f"prefix_tokens), got {shared.groups:,} x {shared.prefix_tokens:,} = {total:,}",
                                  source=source, path="shared_prefix"))
    if requests_per_episode is not None and requests_per_episode * max_tokens > MAX_PREFIX_EPISODE_TOKENS:
        errors.append(ConfigError(
            f"expected at most {MAX_PREFIX_EPISODE_TOKENS:,} prompt tokens per episode in a shared-prefix workload "
            f"(requests_per_episode x max_tokens), got {requests_per_episode:,} x {max_tokens:,} = "
            f"{requests_per_episode * max_tokens:,}", source=source, path="requests_per_episode"))
    return errors


#: the checks of the workload's top-level keys (the simulator's env schema includes them).
WORKLOAD_CHECKS = {
    "trace_file": Param.string(doc="request-length trace CSV"),
    "qps": Param.between(MIN_QPS, MAX_QPS, doc="Poisson arrival rate (requests per simulated second)"),
    "requests_per_episode": Param.integer(doc="", minimum=1),
    "max_tokens": Param.integer(doc="", minimum=1),
    "length_scale": Param.between(MIN_LENGTH_SCALE, MAX_LENGTH_SCALE, doc="trace lengths are multiplied by this"),
    "reward_config": Param.string(doc="rewardkit reward YAML"),
    "shared_prefix": Param(None, "shared-prefix workload", "a mapping {groups: G, prefix_tokens: T, sessions: S} or null",
                           _check_shared_prefix),
}
def section_schema(checks: Mapping[str, Param], base: Any) -> dict[str, Param]:
    """``checks`` with the defaults taken from ``base`` (a dataclass instance)."""
    return {k: dataclasses.replace(p, default=getattr(base, k)) for k, p in checks.items()}


def workload_from_dict(data: Any, *, source: str | None = None, base: Workload | None = None,
                       others: frozenset[str] | None = None) -> Workload:
    """The workload keys of an env mapping, checked; ``base`` gives defaults.

    ``others``: the keys another part of the file owns (left to it); ``None`` leaves every other
    key alone (reading the workload of any env file).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of env settings, got {describe(data)}", source=source)
    base = base or Workload()
    mine = set(WORKLOAD_CHECKS) | {"observation"}
    if others is not None:
        unknown = sorted(set(data) - mine - others)
        if unknown:
            raise ConfigError(f"unknown key; expected one of: {', '.join(sorted(mine | others))}", source=source,
                              path=unknown[0])
    schema: dict[str, Any] = section_schema(WORKLOAD_CHECKS, base)
    schema["observation"] = section_schema(OBSERVATION_CHECKS, base.observation)
    values = validate_schema(schema, {k: v for k, v in data.items() if k in mine}, source=source)
    values["observation"] = ObservationConfig(**values["observation"])
    out = dataclasses.replace(base, source=source if source is not None else base.source, **values)
    errors = shared_prefix_fit_errors(out.shared_prefix, out.max_tokens, source, out.requests_per_episode)
    if errors:
        raise ConfigError.combine(errors)
    return out


def workload_with_overrides(workload: Workload, overrides: Mapping[str, Any] | None) -> Workload:
    """A copy with keys replaced (``{"qps": 10, "observation.token_scale": 2048}``; ``None`` values ignored)."""
    nested: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        head, _, rest = key.partition(".")
        if rest:
            if head != "observation":
                raise ConfigError("unknown section; expected observation", source="override", path=key)
            nested.setdefault(head, {})[rest] = value
        else:
            nested[head] = value
    if not nested:
        return workload
    out = workload_from_dict(nested, source="override", base=workload, others=frozenset())
    return dataclasses.replace(out, source=workload.source)


def load_workload(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> Workload:
    """The workload of the env YAML at ``path`` (simulated or live), then ``overrides``."""
    data = load_yaml(path)
    workload = workload_from_dict({} if data is None else data, source=str(path))
    return workload_with_overrides(workload, overrides)
