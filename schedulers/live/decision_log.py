"""The decision log: every request a gateway routed, with what the router saw and what came of it.

JSON Lines, UTF-8, one object per line, appended and flushed per record. A header line
(``"kind": "header"``) names the router, the replicas, the observation settings and feature names
and the reward config; a gateway restarted on the same file appends a new header. Then one
``"kind": "decision"`` line per routed request: its time, id, router, ``action`` (replica index),
``observation`` (the rows :func:`schedulers.routing.observation.build_observation` gave, whatever
router decided), prompt and output tokens, TTFT and e2e (s), ``status`` (``ok``, ``error``,
``cancelled``, ``retried``: a first attempt that was retried elsewhere), ``error`` (why it did not
end ``ok``; absent in older logs), the per-request ``reward`` with its ``reward_terms``, and
``prompt_blocks``: the prompt as chained BLAKE2b block names
(:func:`schedulers.shared.block_hashes.stable_block_hashes`, blocks of the header's
``prompt_block_tokens``), never its text; absent in older logs and for text prompts. An
``"kind": "engines"`` line records what the engines reported of themselves when the gateway learns
it or it changes: ``kv_tokens``, each replica's KV-cache capacity in tokens (``vllm:cache_config_info``;
null while unknown), which a replay needs to size each replica's prefix cache; absent in older logs.
:func:`read_decision_log` reads it back with located errors; a torn last line (a crash mid-write) is skipped with a warning.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from rewardkit.errors import ConfigError

VERSION = 1
STATUSES = ("ok", "error", "cancelled", "retried")
#: the kinds of line a decision log holds
KINDS = ("header", "decision", "engines")


@dataclass
class Decision:
    """One routed request (a ``"kind": "decision"`` line)."""

    request_id: str
    router: str
    action: int
    observation: list[list[float]]
    prompt_tokens: int
    output_tokens: int = 0
    ttft_s: float | None = None
    e2e_s: float | None = None
    status: str = "ok"
    reward: float | None = None
    reward_terms: dict[str, float] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    #: why a request did not end ``ok`` (a deadline, a backend failure, the drain, the client leaving)
    error: str | None = None
    #: the prompt's chained block names (hex), blocks of the header's ``prompt_block_tokens``; None: not logged
    prompt_blocks: list[str] | None = None

    def to_json(self) -> str:
        return json.dumps({"kind": "decision", "v": VERSION, **asdict(self)}, allow_nan=False)


class DecisionLogWriter:
    """Appends a header, then one line per decision, flushed at once (a crash loses at most one line)."""

    def __init__(self, path: str | os.PathLike[str], *, router: str, replicas: list[str],
                 observation: dict[str, Any], features: list[str], reward: str | None,
                 prompt_block_tokens: int | None = None, checkpoint: str | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        header = {"kind": "header", "v": VERSION, "started": time.time(), "router": router, "replicas": replicas,
                  "observation": observation, "features": features, "reward": reward}
        if prompt_block_tokens is not None:
            header["prompt_block_tokens"] = int(prompt_block_tokens)
        if checkpoint is not None:
            header["checkpoint"] = checkpoint
        self._write(json.dumps(header))

    def _write(self, line: str) -> None:
        self._fh.write(line + "\n")
        self._fh.flush()

    def write(self, decision: Decision) -> None:
        self._write(decision.to_json())

    def write_engines(self, kv_tokens: list[int | None]) -> None:
        """Record each replica's KV-cache capacity in tokens as its engine reported it (None: unknown)."""
        self._write(json.dumps({"kind": "engines", "v": VERSION, "time": time.time(),
                                "kv_tokens": [None if t is None else int(t) for t in kv_tokens]}))

    def close(self) -> None:
        self._fh.close()


@dataclass
class DecisionLog:
    """A log read back: its (last) header and every decision, in order."""

    header: dict[str, Any]
    decisions: list[Decision]
    #: each replica's KV-cache capacity in tokens, the last the engines reported (None: never reported)
    kv_tokens: list[int | None] = field(default_factory=list)


def read_decision_log(path: str | os.PathLike[str]) -> DecisionLog:
    """Read a decision log; errors name ``file:line: key`` and what was expected."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such decision log") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: expected a UTF-8 JSON Lines decision log, got binary data") from None
    header: dict[str, Any] | None = None
    decisions: list[Decision] = []
    kv_tokens: list[int | None] = []
    for number, line in _numbered(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # torn by a crash mid-write: the only line that may be lost
                print(f"warning: {path}:{number}: skipped a torn last line ({exc.msg})", file=sys.stderr)
                break
            raise ConfigError(f"{path}:{number}: expected a JSON object per line, got invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or record.get("kind") not in KINDS:
            raise ConfigError(f"{path}:{number}: kind: expected 'header', 'decision' or 'engines'")
        if record.get("v") != VERSION:
            raise ConfigError(f"{path}:{number}: v: expected {VERSION}, got {record.get('v')!r}")
        if record["kind"] == "header":
            header = record
            kv_tokens = [None] * len(header.get("replicas") or [])
            continue
        if header is None:
            raise ConfigError(f"{path}:{number}: expected a header line before the first {record['kind']} line")
        if record["kind"] == "engines":
            reported = engines_kv_tokens(record, f"{path}:{number}", len(kv_tokens))
            kv_tokens = [old if new is None else new for old, new in zip(kv_tokens, reported, strict=True)]
            continue
        decisions.append(_decision(record, f"{path}:{number}", len(header.get("replicas") or [])))
    if header is None:
        raise ConfigError(f"{path}: expected a decision log with a header line, got an empty file")
    return DecisionLog(header, decisions, kv_tokens)


def engines_kv_tokens(record: dict[str, Any], where: str, replicas: int) -> list[int | None]:
    """An ``engines`` line's ``kv_tokens``, checked: one positive integer or null per replica of the header."""
    value = record.get("kv_tokens")
    if (not isinstance(value, list) or len(value) != replicas
            or any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1) for v in value)):
        raise ConfigError(f"{where}: kv_tokens: expected a list of {replicas} positive integers or nulls "
                          f"(one per replica of the header), got {value!r}")
    return list(value)


def _numbered(lines: list[str]) -> Iterator[tuple[int, str]]:
    for i, line in enumerate(lines, start=1):
        if line.strip():
            yield i, line


def _decision(record: dict[str, Any], where: str, replicas: int) -> Decision:
    fields = {k: v for k, v in record.items() if k not in ("kind", "v")}
    try:
        decision = Decision(**fields)
    except TypeError as exc:
        raise ConfigError(f"{where}: expected the decision keys of docs/serving.md ({exc})") from None
    if not isinstance(decision.action, int) or not 0 <= decision.action < max(replicas, 1):
        raise ConfigError(f"{where}: action: expected a replica index below {replicas}, got {decision.action!r}")
    if decision.status not in STATUSES:
        raise ConfigError(f"{where}: status: expected one of {', '.join(STATUSES)}, got {decision.status!r}")
    rows = decision.observation
    if (not isinstance(rows, list) or len(rows) != replicas
            or not all(isinstance(r, list) and all(isinstance(x, (int, float)) for x in r) for r in rows)):
        raise ConfigError(f"{where}: observation: expected {replicas} rows of numbers, one per replica")
    blocks = decision.prompt_blocks
    if blocks is not None and (not isinstance(blocks, list) or not all(isinstance(b, str) and b for b in blocks)):
        raise ConfigError(f"{where}: prompt_blocks: expected a list of hex block names or null")
    return decision
