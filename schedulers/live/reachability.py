"""Whether a live cluster's engines answer at all, checked before an evaluation spends its episodes.

With every backend down, each episode's requests fail and ``rewardkit evaluate`` printed a table of
NaN and exited 0. An engine that answers anything over HTTP counts as reachable (a 503
from a loading engine too); one that refuses, resets or times out does not.
"""

from __future__ import annotations

from typing import Sequence

import httpx

from ..shared.engine_requests import base_url


def unreachable_backends(backends: Sequence[str], timeout_s: float = 3.0) -> dict[str, str]:
    """Each backend that gives no HTTP answer to ``GET /health`` within ``timeout_s``, with why."""
    failed: dict[str, str] = {}
    for url in backends:
        try:
            httpx.get(base_url(url) + "/health", timeout=timeout_s)
        except httpx.HTTPError as exc:
            failed[url] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return failed
