"""``rewardkit serve-reward``: a reward config as an HTTP reward server (OpenRLHF's remote protocol).

``RewardServer`` (in :mod:`.app`, which imports Starlette and prometheus-client) is imported on
first use, so ``import rewardkit.serve_reward`` needs only rewardkit's core.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RewardServer"]


def __getattr__(name: str) -> Any:
    if name == "RewardServer":
        from .app import RewardServer

        return RewardServer
    raise AttributeError(name)
