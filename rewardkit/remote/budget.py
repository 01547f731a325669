"""``RequestBudget``: how many HTTP requests a remote term may send over its life."""

from __future__ import annotations


class RequestBudget:
    """At most ``max_requests`` requests (retries included) over the term's life; ``None`` is no limit.

    The count is of requests actually sent, so a call that fails or raises still spends what it
    sent: the budget guards money and load on the scorer, not the composer's state.
    """

    def __init__(self, max_requests: int | None) -> None:
        if max_requests is not None and max_requests < 1:
            raise ValueError(f"max_requests must be >= 1 or None, got {max_requests}")
        self.max_requests = max_requests
        self.spent = 0

    @property
    def exhausted(self) -> bool:
        return self.max_requests is not None and self.spent >= self.max_requests

    def take(self) -> bool:
        """Spend one request if the budget allows it; ``False`` (nothing spent) when it is gone."""
        if self.exhausted:
            return False
        self.spent += 1
        return True

    def describe(self) -> str:
        return "no request budget" if self.max_requests is None else f"{self.spent} of {self.max_requests} requests spent"
