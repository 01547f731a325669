"""The parameters every remote term shares, and the check of a scorer's URL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ..params import Param


def url_param(doc: str) -> Param:
    """A required ``http://`` or ``https://`` URL with a host (no spaces)."""
    expected = "an http:// or https:// URL with a host"

    def check(value: Any) -> str:
        if not isinstance(value, str) or not value or any(c.isspace() for c in value):
            raise ValueError(expected)
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError:
            raise ValueError(expected) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(expected)
        return value

    return replace(Param.string(doc=doc), expected=expected, check=check)


#: shared by ``remote_score`` and ``judge`` (each adds its own ``url`` and the rest).
REMOTE_PARAMS: dict[str, Param] = {
    "batch_size": Param.integer(16, "items per request", minimum=1),
    "max_concurrency": Param.integer(8, "requests in flight at once, at most", minimum=1),
    "timeout_s": Param.positive(30.0, "seconds one request may take (connect, send, answer)"),
    "retries": Param.integer(2, "further tries of a request after a transient failure (timeout, refused, 5xx, 429)",
                             minimum=0, maximum=10),
    "backoff_s": Param.non_negative(0.2, "wait before the first retry; doubles at each further one"),
    "cache_size": Param.integer(4096, "scores kept by content (prompt and completion), least recently used out "
                                      "first; 0 turns the cache off", minimum=0),
    "max_requests": Param.integer(doc="requests the term may send over its life (retries included); null: no "
                                      "limit", minimum=1).or_null(),
    "max_call_s": Param.positive(doc="wall-time budget of one call in seconds: batches still running then "
                                     "fail; null: no limit").or_null(),
    "on_failure": Param.choice(("raise", "default"), "raise", "what an item that could not be scored gets: "
                                                              "'raise' a RemoteScoreError, or the 'default' value"),
    "default": Param.number(0.0, "value of an item that could not be scored, with on_failure: default"),
    "api_key_env": Param.string(doc="environment variable holding a bearer token sent as Authorization; "
                                    "null: none").or_null(),
}
