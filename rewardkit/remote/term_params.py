"""The parameters every remote term shares, and the check of a scorer's URL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..params import Param, describe

#: Longest time setting accepted, in seconds (an hour per request; a day per call).
MAX_REQUEST_S = 3600.0
MAX_CALL_S = 86400.0
#: Largest answer read by default (a judge's batch with 20 logprobs a token is tens of kB).
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024


def url_param(doc: str) -> Param:
    """A required ``http://`` or ``https://`` URL with a host (no spaces)."""
    expected = "an http:// or https:// URL with a host"

    def refuse(value: Any) -> ConfigError:  # the value shown with its credentials as ***
        shown = redacted(value) if isinstance(value, str) else value
        return ConfigError(f"expected {expected}, got {describe(shown)}")

    def check(value: Any) -> str:
        if not isinstance(value, str) or not value or any(c.isspace() for c in value):
            raise refuse(value)
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError:
            raise refuse(value) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise refuse(value)
        return value

    return replace(Param.string(doc=doc), expected=expected, check=check)


def redacted(url: str) -> str:
    """``url`` fit for a message or a log: a password written as ``***``, and a user part given
    alone (often a token: ``http://TOKEN@host``) as well."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    shown = f"{userinfo.split(':', 1)[0]}:***" if ":" in userinfo else "***"
    return parts._replace(netloc=f"{shown}@{host}").geturl()


def secrets_of(url: str) -> list[str]:
    """The credentials in ``url`` (to be written as ``***`` wherever they would appear)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    userinfo = parts.netloc.rsplit("@", 1)[0]
    user, _, password = userinfo.partition(":")
    return [s for s in (password if password else user, userinfo) if s]


#: what a remote term's state fingerprint leaves out: where the scorer lives and how it is reached,
#: not what it is asked (changing them between a save and a restore keeps the saved statistics)
TRANSPORT_PARAMS = frozenset({"url", "batch_size", "max_concurrency", "timeout_s", "retries", "backoff_s",
                              "cache_size", "max_requests", "max_call_s", "api_key_env", "max_answer_bytes"})

#: shared by ``remote_score`` and ``judge`` (each adds its own ``url`` and the rest).
REMOTE_PARAMS: dict[str, Param] = {
    "batch_size": Param.integer(16, "items per request", minimum=1),
    "max_concurrency": Param.integer(8, "requests in flight at once, at most", minimum=1),
    "timeout_s": Param.between(0.001, MAX_REQUEST_S, 30.0, "seconds one request may take (connect, send, answer)"),
    "retries": Param.integer(2, "further tries of a request after a transient failure (timeout, refused, 5xx, 429)",
                             minimum=0, maximum=10),
    "backoff_s": Param.between(0.0, MAX_REQUEST_S, 0.2, "wait before the first retry; doubles at each further one"),
    "cache_size": Param.integer(4096, "scores kept by content (prompt and completion), least recently used out "
                                      "first; 0 turns the cache off", minimum=0),
    "max_requests": Param.integer(doc="requests the term may send over its life (retries included); null: no "
                                      "limit", minimum=1).or_null(),
    "max_call_s": Param.between(0.001, MAX_CALL_S, doc="wall-time budget of one call in seconds: batches still "
                                                       "running then fail; null: no limit").or_null(),
    "max_answer_bytes": Param.integer(DEFAULT_MAX_ANSWER_BYTES, "largest answer read from the scorer; a larger one "
                                                                "is a failed request", minimum=1024),
    "on_failure": Param.choice(("raise", "default"), "raise", "what an item that could not be scored gets: "
                                                              "'raise' a RemoteScoreError, or the 'default' value"),
    "default": Param.number(0.0, "value of an item that could not be scored, with on_failure: default"),
    "api_key_env": Param.string(doc="environment variable holding a bearer token sent as Authorization; "
                                    "null: none").or_null(),
}
