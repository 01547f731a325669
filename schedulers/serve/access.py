"""Who may use the gateway, what it sends backends, and what of a client or a backend reaches its logs.

Clients: with an API key set (``--api-key`` or ``REWARDKIT_GATEWAY_API_KEY``) every route but
``/health`` wants ``Authorization: Bearer KEY`` (or ``x-api-key``), else a 401 in OpenAI's shape.
Backends: ``--backend-api-key`` and ``--backend-header`` go with every request to an engine (vLLM
started with ``--api-key`` wants the bearer token); no client header is forwarded. Logs: a client's
``x-request-id`` is kept only when short and plain, and a password in a backend URL is written as
``***`` (the decision log is a file meant to be shared).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import uuid

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from .attempt import openai_error

#: environment variables read when the flags are not given (a flag's value is visible to ``ps``)
CLIENT_KEY_ENV = "REWARDKIT_GATEWAY_API_KEY"
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
    """``url`` with any password written as ``***``."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<unparseable URL>"
    if not parsed.password:
        return url
    netloc = parsed.netloc.decode("ascii", "replace").rsplit("@", 1)[-1]
    return f"{parsed.scheme}://{parsed.username}:***@{netloc}{parsed.raw_path.decode('ascii', 'replace').rstrip('/')}"


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


class RequireApiKey:
    """ASGI middleware: a request to any path but :data:`OPEN_PATHS` needs the key (a 401 otherwise)."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app, self._key = app, key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        response = openai_error(401, "expected an API key: Authorization: Bearer KEY", "authentication_error",
                                headers={"www-authenticate": "Bearer"})
        await response(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self._key)
            if name == b"x-api-key":
                return hmac.compare_digest(value.strip(), self._key)
        return False
