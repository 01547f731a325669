"""OpenRLHF's remote reward protocol: the request a trainer posts and the answer it reads.

OpenRLHF 0.11 (``--remote_rm_url``, ``openrlhf.utils.agent.SingleTurnAgentExecutor``) posts
``{"query": [prompt + response, ...], "prompts": [...], "labels": [...]}`` and reads ``rewards``,
``scores`` (``rewards`` when absent) and ``extra_logs`` (a mapping it logs). rewardkit adds an
optional ``"step"``: the training step the batch is evaluated at (schedules read it).

Each query is its prompt followed by the response; the completion the reward scores is what
follows the prompt. A query that does not start with its prompt (a tokenizer that does not
round-trip the prompt's text) is scored whole and counted in :attr:`RewardRequest.mismatched`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..integrations.text_scoring import ScoredBatch

#: the server's default bounds: request body bytes, requests admitted at once, completions per composer call,
#: seconds a client has to send its whole body
DEFAULT_MAX_BODY_BYTES = 64 * 2**20
DEFAULT_MAX_PENDING = 1024
DEFAULT_MAX_BATCH = 4096
DEFAULT_READ_TIMEOUT_S = 30.0
#: ``extra_logs`` keys: OpenRLHF logs them beside its own metrics (``reward``, ``kl``, ``response_length``)
LOG_PREFIX = "rewardkit/"


class RequestError(Exception):
    """A request the server cannot score: ``status`` (400, 401, 408, 413, 503) and a message saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class RewardRequest:
    """A checked request: one completion per query, with its prompt and label."""

    completions: list[str]
    prompts: list[str] | None
    labels: list[Any] | None
    step: int | None
    mismatched: int = 0

    def __len__(self) -> int:
        return len(self.completions)


def parse_request(body: bytes, strip_suffixes: Sequence[str] = ()) -> RewardRequest:
    """The request in ``body`` (JSON), checked; :class:`RequestError` 400 names the key and what was expected."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise RequestError(400, f"body: expected JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"body: expected a JSON object with 'query', got {type(data).__name__}")
    queries = _strings(data, "query", required=True)
    assert queries is not None
    n = len(queries)
    prompts = _strings(data, "prompts", required=False)
    labels = data.get("labels")
    if labels is not None:
        if not isinstance(labels, list):
            raise RequestError(400, f"labels: expected a list (one label per query), got {type(labels).__name__}")
        for i, label in enumerate(labels):
            if not (label is None or isinstance(label, (str, int, float)) and not isinstance(label, bool)):
                raise RequestError(400, f"labels[{i}]: expected a string, a number or null, got {type(label).__name__}")
    for key, values in (("prompts", prompts), ("labels", labels)):
        if values is not None and len(values) != n:
            raise RequestError(400, f"{key}: expected one per query ({n}), got {len(values)}")
    step = data.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise RequestError(400, f"step: expected a non-negative integer (the training step), got {step!r}")
    completions, mismatched = [], 0
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts is not None else ""
        if query.startswith(prompt):
            completion = query[len(prompt):]
        else:
            completion, mismatched = query, mismatched + 1
        for suffix in strip_suffixes:
            if suffix and completion.endswith(suffix):
                completion = completion[: -len(suffix)]
        completions.append(completion)
    return RewardRequest(completions, prompts, labels, step, mismatched)


def _no_constant(name: str) -> None:
    """``NaN``, ``Infinity`` and ``-Infinity``: Python's json reads them, JSON does not have them."""
    raise ValueError(f"{name} is not a JSON value (non-finite numbers are refused)")


def _strings(data: dict[str, Any], key: str, *, required: bool) -> list[str] | None:
    values = data.get(key)
    if values is None:
        if required:
            raise RequestError(400, f"{key}: expected a list of strings (prompt + response per sample), got nothing")
        return None
    if not isinstance(values, list):
        raise RequestError(400, f"{key}: expected a list of strings, got {type(values).__name__}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise RequestError(400, f"{key}[{i}]: expected a string, got {type(value).__name__}")
    return values


def answer(scored: ScoredBatch, start: int, stop: int, step: int) -> dict[str, Any]:
    """The answer to the request whose samples are ``start:stop`` of ``scored``: ``rewards`` and
    ``scores`` (the totals), ``extra_logs`` (each term's mean contribution over the request, named
    ``rewardkit/<term>`` so no term overwrites OpenRLHF's own ``reward``, ``kl``, ...), and
    rewardkit's ``terms`` (each term's contributions per sample) and ``step``."""
    totals = scored.totals[start:stop]
    terms = {name: values[start:stop] for name, values in scored.terms.items()}
    extra_logs = {f"{LOG_PREFIX}{name}": (math.fsum(values) / len(values) if values else 0.0)
                  for name, values in terms.items()}
    return {"rewards": totals, "scores": totals, "extra_logs": extra_logs, "terms": terms, "step": step}


def error_body(status: int, message: str) -> dict[str, Any]:
    """The JSON of an error answer (OpenAI's shape, which clients already print)."""
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             408: "timeout_error", 413: "request_too_large", 503: "overloaded_error"}
    return {"error": {"message": message, "type": kinds.get(status, "server_error"), "code": status}}


def api_key_bytes(key: str) -> bytes:
    """The key a client must send, as the UTF-8 bytes compared with its header's bytes.

    Whitespace at either end is dropped (a trailing newline from ``echo KEY > file`` or a secrets
    mount; an HTTP header cannot carry it anyway). ``ValueError`` for a key that is empty then, or
    that holds a control character (no header can carry a newline or a NUL)."""
    stripped = key.strip()
    if not stripped:
        raise ValueError("the key is empty" + (" (only whitespace)" if key else "")
                         + "; expected a non-empty key (serving without one would be open to anyone)")
    for i, char in enumerate(stripped):
        if (ord(char) < 32 and char != "\t") or ord(char) == 127:
            raise ValueError(f"the key holds a control character ({char!r} at position {i}), which no HTTP header "
                             "can carry; expected printable characters")
    return stripped.encode("utf-8")
