"""``CallStats``: what one call of a remote term did, for the composer's breakdown (``TermOutput.info``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CallStats:
    """Counters of one call; :meth:`as_info` is what ``last_call_info()`` returns.

    ``requests`` counts HTTP requests sent in the call (retries included), ``failures`` the
    requests (or items, for answers without a usable score) that failed, ``cache_hits`` the items
    served without a request (from the cache or a duplicate in the same call), ``defaults_used``
    the items that got the declared default, ``spend_requests`` the requests spent over the term's
    life (its budget's count). ``extra`` holds counters of one kind of term (the judge's
    ``text_answers``).
    """

    latency_s: float = 0.0
    requests: int = 0
    failures: int = 0
    cache_hits: int = 0
    defaults_used: int = 0
    spend_requests: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def count(self, name: str, n: float = 1.0) -> None:
        """Add ``n`` to the term-specific counter ``name``."""
        self.extra[name] = self.extra.get(name, 0.0) + n

    def as_info(self) -> dict[str, float]:
        info = {"latency_s": float(self.latency_s), "requests": float(self.requests), "failures": float(self.failures),
                "cache_hits": float(self.cache_hits), "defaults_used": float(self.defaults_used),
                "spend_requests": float(self.spend_requests)}
        info.update({k: float(v) for k, v in self.extra.items()})
        return info
