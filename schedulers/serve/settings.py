"""What a gateway routes over and how (``rewardkit gateway`` flags), checked before anything starts.

Every value that would break every request, busy-loop or fail later is refused here with a
one-line message naming the flag and the range: speeds outside what the live YAML
accepts, NaN or non-positive seconds, intervals short enough to spin, body bounds below one byte,
backend URLs that are not a bare ``http(s)://host:port``, a decision log that cannot be a file, and
a checkpoint given to a router that would ignore it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..bounds import MAX_REPLICAS, MAX_SPEED, MAX_TORCH_THREADS, MIN_SPEED

#: bounds of one request (docs/configuration.md, "Limits").
MAX_BODY_BYTES = 1 << 20
MAX_BODY_BYTES_LIMIT = 1 << 30
#: the shortest interval of a background loop (shorter ones spin on the event loop)
MIN_INTERVAL_S = 0.01
#: the longest any timeout, interval or drain may be (a day: longer is a typo, and inf is not a bound)
MAX_SECONDS = 86_400.0
MAX_CONNECTIONS_LIMIT = 1_000_000


def seconds(value: float, flag: str, low: float = MIN_INTERVAL_S, allow_zero: bool = False) -> float:
    """``value`` when it is a finite number of seconds in ``[low, MAX_SECONDS]`` (or 0 when allowed)."""
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (
        low <= value <= MAX_SECONDS or (allow_zero and value == 0))
    if not ok:
        zero = "0 or " if allow_zero else ""
        raise ValueError(f"{flag}: expected {zero}seconds from {low:g} to {MAX_SECONDS:g}, got {value}")
    return float(value)


def integer(value: int, flag: str, low: int, high: int) -> int:
    """``value`` when it is an integer in ``[low, high]``."""
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise ValueError(f"{flag}: expected an integer from {low} to {high}, got {value!r}")
    return value


def backend_url(url: object) -> str:
    """``url`` when it is ``http(s)://host[:port]`` (no path, query or fragment), without a trailing slash."""
    expected = f"--backend: expected an http(s) URL such as http://127.0.0.1:8001 (no path or query), got {url!r}"
    if not isinstance(url, str):
        raise ValueError(expected)
    try:
        parsed = urlsplit(url)
        port = parsed.port
    except ValueError as exc:  # an unclosed IPv6 bracket, a port past 65535 or not a number
        if "port" in str(exc).lower():
            raise ValueError(f"--backend: expected a port from 1 to 65535 in {url!r}") from None
        raise ValueError(expected) from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(expected)
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"--backend: expected a port from 1 to 65535, got {port} in {url!r}")
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
        raise ValueError(expected)
    return url.rstrip("/")


def speeds(values: list[float] | None, replicas: int) -> list[float] | None:
    """Declared speeds: one per backend, each finite in the live YAML's range."""
    if values is None:
        return None
    if len(values) != replicas:
        raise ValueError(f"--speeds: expected {replicas} speeds, one per backend, got {len(values)}")
    for value in values:
        if not (math.isfinite(value) and MIN_SPEED <= value <= MAX_SPEED):
            raise ValueError(f"--speeds: expected speeds from {MIN_SPEED:g} to {MAX_SPEED:g}, got {value}")
    return [float(v) for v in values]


def decision_log_path(path: str | None) -> str | None:
    """A decision log path that can be a file (not a folder, under a folder or a creatable one)."""
    if path is None:
        return None
    target = Path(path)
    if not str(path).strip():
        raise ValueError("--decision-log: expected a file path, got ''")
    if target.is_dir():
        raise ValueError(f"--decision-log {path}: expected a file, got a folder")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"--decision-log {path}: {parent} is a file, not a folder")
            break
    return path


@dataclass
class GatewaySettings:
    """What a gateway routes over and how (``rewardkit gateway`` flags)."""

    backends: list[str]
    router: str = "least_prefill"
    checkpoint: str | None = None
    decision_log: str | None = None
    reward: str | None = None
    declared_speeds: list[float] | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    #: seconds to open a connection to a backend (then it is down: unhealthy, the request moves)
    connect_timeout_s: float = 2.0
    #: seconds an attempt may wait for its response headers (then it moves once); None: ``request_timeout_s``
    first_byte_timeout_s: float | None = None
    #: seconds a whole request may take, retries and streaming included (then 504 or an error event)
    request_timeout_s: float = 300.0
    health_interval_s: float = 1.0
    #: seconds between scrapes of every backend's /metrics (load and KV use of vLLM engines); 0: none
    scrape_interval_s: float = 0.25
    kv_capacity_blocks: float = 1024.0
    #: threads of the PPO policy's forward pass. 1: a decision is a few small matrix products, and
    #: a pool of more threads spins on cores the engines of the same machine need (it tripled the
    #: engines' TTFT p50 on the 2-core benchmark machine, docs/serving.md).
    torch_threads: int = 1
    seed: int = 0
    #: headers sent with every backend request (``--backend-api-key``, ``--backend-header``)
    extra_headers: dict[str, str] = field(default_factory=dict)
    #: clients must send this key (None: no authentication)
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("--backend: expected at least one backend URL")
        if len(self.backends) > MAX_REPLICAS:
            raise ValueError(f"--backend: expected at most {MAX_REPLICAS} backends, got {len(self.backends)}")
        self.backends = [backend_url(url) for url in self.backends]
        integer(self.torch_threads, "--torch-threads", 1, MAX_TORCH_THREADS)
        self.declared_speeds = speeds(self.declared_speeds, len(self.backends))
        integer(self.max_body_bytes, "--max-body-bytes", 1, MAX_BODY_BYTES_LIMIT)
        seconds(self.connect_timeout_s, "--connect-timeout")
        if self.first_byte_timeout_s is not None:
            seconds(self.first_byte_timeout_s, "--first-byte-timeout")
        seconds(self.request_timeout_s, "--timeout")
        seconds(self.health_interval_s, "--health-interval")
        seconds(self.scrape_interval_s, "--scrape-interval", allow_zero=True)
        self.decision_log = decision_log_path(self.decision_log)
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("--api-key: expected a non-empty key")
