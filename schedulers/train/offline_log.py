"""Reading gateway decision logs for learning: streamed, every value checked, every error located.

A log is read line by line (a 300 MB log is never held whole): each usable decision's observation
rows go straight into one float32 buffer, its action and reward into two more, so memory is the
numbers learned from, not the text. What learning cannot use is refused with ``file:line: key:
expected ..., got ...`` before any training: rewards that are not finite numbers or are too large
to standardize, observation rows narrower or wider than the header's features, ragged rows,
headers whose observation settings a policy could not load (``count_scale: "abc"`` or ``0``), lines
nested too deeply or too long, a folder named as a log. A torn last line (a crash mid-write) is
skipped with a warning, as :func:`schedulers.live.decision_log.read_decision_log` does.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from rewardkit.config import require_path
from rewardkit.errors import ConfigError

from ..live.decision_log import KINDS, STATUSES, VERSION, Decision
from ..rl.ppo_router import parse_observation_config
from ..routing.observation import feature_names
from ..shared.observation_config import ObservationConfig

#: the longest line read (a decision of 64 replicas x 21 features is about 40 KB)
MAX_LINE_BYTES = 4 << 20
#: rewards are standardized in float64: beyond this their squares overflow
MAX_ABS_REWARD = 1e150
#: observations are learned from in float32
MAX_ABS_OBSERVATION = float(np.finfo(np.float32).max)
DECISION_KEYS = {f.name for f in dataclasses.fields(Decision)}


@dataclass
class LoggedBatch:
    """The usable decisions of a log: observations ``(N, replicas, features)``, actions, rewards."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor | None
    observation: ObservationConfig
    skipped: int


def log_records(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` for each non-blank line of a decision log, read one line at a time;
    ``where`` is ``file:line``."""
    require_path(path, "log_records")
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: expected a decision log file, got a folder")
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such decision log") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the decision log ({exc.strerror or exc})") from None
    with fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            where = f"{path}:{number}"
            if len(raw) > MAX_LINE_BYTES:
                raise ConfigError(f"{where}: expected a line of at most {MAX_LINE_BYTES} bytes, got a longer one")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{where}: expected a UTF-8 JSON Lines decision log, got binary data") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if not raw.endswith(b"\n") and not fh.read(1):  # torn by a crash mid-write: the last line only
                    print(f"warning: {where}: skipped a torn last line ({exc.msg})", file=sys.stderr)
                    return
                raise ConfigError(f"{where}: expected a JSON object per line, got invalid JSON ({exc.msg})") from None
            except RecursionError:
                raise ConfigError(f"{where}: expected a decision record, got JSON nested too deeply to read") from None
            if not isinstance(record, dict) or record.get("kind") not in KINDS:
                raise ConfigError(f"{where}: kind: expected 'header', 'decision' or 'engines'")
            if record.get("v") != VERSION:
                raise ConfigError(f"{where}: v: expected {VERSION}, got {_show(record.get('v'))}")
            yield where, record


class _Collector:
    """The usable decisions of one or more logs, packed as they are read."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.obs = array("f")
        self.actions = array("q")
        self.rewards = array("d")
        self.replicas: tuple[int, str] | None = None  # (count, where first seen)
        self.total = 0
        self.observation: tuple[ObservationConfig, str] | None = None

    def header(self, record: dict[str, Any], where: str) -> tuple[int, int]:
        """Check a header; return (replicas, features) of the decisions after it."""
        saved = record.get("observation")
        if not isinstance(saved, dict):
            raise ConfigError(f"{where}: observation: expected the observation settings of a gateway header, "
                              f"got {_show(saved)}")
        try:
            config = parse_observation_config(saved)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if self.observation is not None and config != self.observation[0]:
            raise ConfigError(f"{where}: observation: expected the settings of {self.observation[1]} "
                              f"({dataclasses.asdict(self.observation[0])}), got {saved}")
        self.observation = self.observation or (config, where)
        names = list(feature_names(config))
        if list(record.get("features") or []) != names:
            raise ConfigError(f"{where}: features: expected {names}, got {_show(record.get('features'))}")
        replicas = record.get("replicas")
        if not isinstance(replicas, list) or not replicas:
            raise ConfigError(f"{where}: replicas: expected a non-empty list of backend URLs, got {_show(replicas)}")
        return len(replicas), len(names)

    def decision(self, record: dict[str, Any], where: str, replicas: int, n_features: int) -> None:
        self.total += 1
        unknown = sorted(set(record) - DECISION_KEYS - {"kind", "v"})
        if unknown:
            raise ConfigError(f"{where}: {unknown[0]}: unknown key; expected the decision keys of docs/serving.md")
        action, status, reward = record.get("action"), record.get("status", "ok"), record.get("reward")
        if isinstance(action, bool) or not isinstance(action, int) or not 0 <= action < replicas:
            raise ConfigError(f"{where}: action: expected a replica index below {replicas}, got {_show(action)}")
        if status not in STATUSES:
            raise ConfigError(f"{where}: status: expected one of {', '.join(STATUSES)}, got {_show(status)}")
        if reward is not None and not _number_within(reward, MAX_ABS_REWARD):
            raise ConfigError(f"{where}: reward: expected a finite number of magnitude at most {MAX_ABS_REWARD:g} or "
                              f"null, got {_show(reward)}")
        rows = _rows(record.get("observation"), where, replicas, n_features)
        if status != "ok" or (self.mode == "reward" and reward is None):
            return
        if self.replicas is None:
            self.replicas = (replicas, where)
        elif replicas != self.replicas[0]:
            raise ConfigError(f"{where}: observation: expected {self.replicas[0]} replicas like {self.replicas[1]} "
                              f"(one replica count per training set), got {replicas}")
        self.obs.extend(rows)
        self.actions.append(action)
        if self.mode == "reward":
            self.rewards.append(float(reward))

    def batch(self, where: str) -> LoggedBatch:
        n = len(self.actions)
        if not n:
            raise ConfigError(f"{where}: expected decisions to learn from (status ok"
                              f"{' with a reward' if self.mode == 'reward' else ''}), got none of {self.total}")
        assert self.replicas is not None and self.observation is not None
        # no copies: the tensors share the packed buffers (which they keep alive)
        obs = torch.from_numpy(np.frombuffer(self.obs, dtype=np.float32)).reshape(n, self.replicas[0], -1)
        actions = torch.from_numpy(np.frombuffer(self.actions, dtype=np.int64))
        rewards = None
        if self.mode == "reward":
            rewards = torch.from_numpy(np.frombuffer(self.rewards, dtype=np.float64))
        return LoggedBatch(obs, actions, rewards, self.observation[0], self.total - n)


def read_logged(paths: list[str | Path], mode: str) -> LoggedBatch:
    """The decisions of ``paths`` (same observation settings) that ``mode`` can learn from, streamed."""
    collect = _Collector(mode)
    for path in paths:
        shape: tuple[int, int] | None = None
        for where, record in log_records(path):
            if record["kind"] == "header":
                shape = collect.header(record, where)
            elif record["kind"] == "engines":
                continue  # what the engines reported of themselves: nothing to learn from
            elif shape is None:
                raise ConfigError(f"{where}: expected a header line before the first decision")
            else:
                collect.decision(record, where, *shape)
        if shape is None:
            raise ConfigError(f"{path}: expected a decision log with a header line, got an empty file")
    return collect.batch(str(paths[0]) if len(paths) == 1 else f"{len(paths)} logs")


def _rows(rows: Any, where: str, replicas: int, n_features: int) -> list[float]:
    """The observation rows flattened, checked: ``replicas`` rows of ``n_features`` finite numbers."""
    if not isinstance(rows, list) or len(rows) != replicas:
        raise ConfigError(f"{where}: observation: expected {replicas} rows (one per replica), got "
                          f"{len(rows) if isinstance(rows, list) else _show(rows)}")
    flat: list[float] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n_features:
            raise ConfigError(f"{where}: observation[{i}]: expected {n_features} numbers (the header's features), got "
                              f"{len(row) if isinstance(row, list) else _show(row)}")
        for j, x in enumerate(row):
            if not _number_within(x, MAX_ABS_OBSERVATION):
                raise ConfigError(f"{where}: observation[{i}][{j}]: expected a finite number within float32's range, "
                                  f"got {_show(x)}")
        flat.extend(row)
    return flat


def _number_within(x: Any, limit: float) -> bool:
    """A JSON number (not a bool), finite, of magnitude at most ``limit`` (huge ints included)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x) and abs(float(x)) <= limit
    except OverflowError:
        return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
