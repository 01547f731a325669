"""Who may use the gateway, what it sends backends, and what of a client or a backend reaches its logs.

Clients: with an API key set (``--api-key`` or ``REWARDKIT_GATEWAY_API_KEY``) every route but
``/health`` wants ``Authorization: Bearer KEY`` (or ``x-api-key``), else a 401 in OpenAI's shape.
Backends: ``--backend-api-key`` and ``--backend-header`` go with every request to an engine (vLLM
started with ``--api-key`` wants the bearer token); no client header is forwarded. Logs: a client's
``x-request-id`` is kept only when short and plain, and a password in a backend URL (or a token given
as its user part alone) is written as ``***`` (the decision log is a file meant to be shared).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import re
import uuid
from urllib.parse import unquote, urlsplit

from starlette.types import Receive, Scope, Send

from ..shared.engine_requests import GATEWAY_KEY_ENV
from .attempt import openai_error

#: environment variables read when the flags are not given (a flag's value is visible to ``ps``)
CLIENT_KEY_ENV = GATEWAY_KEY_ENV
BACKEND_KEY_ENV = "REWARDKIT_BACKEND_API_KEY"
#: a client's request id is kept when it matches this, else replaced by a fresh one
REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: paths open without a key (load balancers probe them)
OPEN_PATHS = frozenset({"/health"})


def request_id(header: str | None) -> str:
    """The id a request is logged under: the client's when at most 128 plain characters, else a new one."""
    if header is not None and REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def redact_url(url: str) -> str:
    """``url`` with its secret written as ``***``: the password of ``user:password@``, or the whole user
    part when it comes alone (``http://TOKEN@host``: a token passed as the user name)."""
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    shown = f"{username}:***" if password and username else "***"
    return parts._replace(netloc=f"{shown}@{host}").geturl()


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its ``user:password@`` and the ``Authorization: Basic`` header that carries them."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, {}
    token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
    bare = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()
    return bare, {"Authorization": f"Basic {token}"}


def backend_headers(api_key: str | None, headers: list[str] | None) -> dict[str, str]:
    """Headers for every backend request: ``Authorization: Bearer`` with ``api_key``, and each ``Name: value``."""
    out: dict[str, str] = {}
    for line in headers or []:
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"--backend-header: expected 'Name: value' (a header name, one line), got {line[:80]!r}")
        out[name] = value
    if api_key:
        if any(c in api_key for c in "\r\n\0 "):
            raise ValueError("--backend-api-key: expected a key without spaces or line breaks")
        out["Authorization"] = f"Bearer {api_key}"
    return out


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the gateway on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed(scope: Scope, key: bytes) -> bool:
    """Whether a request may pass: an open path, or the key as ``Authorization: Bearer`` or ``x-api-key``."""
    if scope.get("path") in OPEN_PATHS:
        return True
    for name, value in scope["headers"]:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return hmac.compare_digest(value[7:].strip(), key)
        if name == b"x-api-key":
            return hmac.compare_digest(value.strip(), key)
    return False


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """The 401 for a request without the key, in OpenAI's shape."""
    response = openai_error(401, "expected an API key: Authorization: Bearer KEY", "authentication_error",
                            headers={"www-authenticate": "Bearer"})
    await response(scope, receive, send)
