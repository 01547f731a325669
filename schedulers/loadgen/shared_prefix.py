"""``SharedPrefix``: the shape of a shared-prefix workload (system prompts, multi-turn sessions).

Its own module so that an env YAML's ``shared_prefix`` key (read by :mod:`schedulers.sim.env_config`)
and the load generator's ``--shared-prefix G:T --sessions S`` build the same object without the
simulator importing the load generator's workload code.
"""

from __future__ import annotations

from dataclasses import dataclass


class WorkloadError(ValueError):
    """A workload option or file is wrong; the message names the file or option and what was expected."""


@dataclass(frozen=True)
class SharedPrefix:
    """``groups`` system prompts of ``prefix_tokens`` each; with ``sessions`` > 0, multi-turn conversations too."""

    groups: int = 4
    prefix_tokens: int = 128
    #: conversations requests are spread over (each request continues one drawn at random); 0: single turns.
    sessions: int = 0

    def __post_init__(self) -> None:
        if self.groups < 1 or self.prefix_tokens < 1 or self.sessions < 0:
            raise WorkloadError(f"shared prefix: expected groups >= 1, prefix_tokens >= 1, sessions >= 0, got {self}")

    @classmethod
    def parse(cls, spec: str, sessions: int = 0) -> "SharedPrefix":
        """``"G:P"`` -> G system prompts of P tokens."""
        try:
            groups, tokens = (int(x) for x in spec.split(":"))
        except ValueError:
            raise WorkloadError(f"--shared-prefix: expected GROUPS:TOKENS such as 4:128, got {spec!r}") from None
        return cls(groups, tokens, sessions)
