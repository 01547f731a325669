"""The completions a run sampled, read beside its log: what each alert was paid for.

**The file.** JSONL, one object per sampled completion::

    {"step": 3, "prompt": "What is 29 + 23?", "completion": "0 + 0 = 52", "terms": {"format": 1.0,
     "correct": 1.0, "strict": 0.0}, "total": 2.0}

``step`` is the trainer's ``global_step`` when the completion was sampled (TRL logs that batch's
metrics at the next step, so a row of step ``k`` belongs to the first logged step ``>= k + 1``);
``prompt`` (or ``question``, as ``examples/monitor/train.py`` writes) is the prompt's text; ``terms``
holds each top-level term's raw value (``null`` where the term did not apply); ``total`` is the
reward paid (optional: without it the audit uses the weighted sum of the raw terms at the step,
which is the reward only for configs without normalizers). :class:`CompletionWriter` writes it
(``MonitorCallback(..., completions=PATH)``); a restarted run appends to it, and rows whose step
goes back (a run resumed from a checkpoint) replace the earlier attempt's rows from that step on.

**What is read from it** (:class:`ContentReader`, decided on the design runs of
``benchmarks/data/monitor/``, docs/results/monitor.md):

- a completion is *paid* when its total is above the median total of the first logged step that
  has completions (where training started), and *rejected* when the gold term's value is below the
  middle of gold's declared output range (0 or less when the range is not finite);
- per logged step, ``monitor/exploit_frac``: the share of the step's completions that are paid and
  rejected (the exploit spreads), and ``monitor/template_frac``: the share that are paid, rejected
  and written to the most common *template* among those (the text case-folded, each run of digits
  replaced by ``#``, whitespace collapsed: ``"26 + 30 = 90."`` and ``"13 + 4 = 99."`` are both
  ``"# + # = #."``), which the :class:`~rewardkit.monitor.detectors.ExploitSpread` and
  :class:`~rewardkit.monitor.detectors.TemplateConvergence` detectors read;
- per logged step and *watched* term ``t`` (``monitor.watch``: the terms ``rewardkit stress`` found
  paying a loophole), ``monitor/watched/<t>``: the share of the step's completions that gold rejects
  and ``t`` pays (a positive weighted value), whatever their total, which
  :class:`~rewardkit.monitor.detectors.WatchedSpread` reads: a policy can learn a hole that pays less
  than where it started (it gives up right answers for the partial credit a form term still pays),
  and then no rejected completion is paid above the start's median;
- an alert's *evidence*: the highest-paid rejected completions of the logged steps its window
  covers (paid above the start's median, or paid by a watched term), with their per-term breakdown.

Only the last few logged steps' completions are kept, so a step costs the same however long the run.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

from ..errors import RewardKitError
from .structure import RewardStructure

#: the per-step keys the content detectors read
EXPLOIT = "monitor/exploit_frac"
TEMPLATE = "monitor/template_frac"
#: per watched term ``t``, ``WATCHED + t``: the share of a step's completions that gold rejects and ``t`` pays
WATCHED = "monitor/watched/"
#: the most evidence an alert carries
EVIDENCE = 3
#: a demoted alert's reason says the run is losing what gold accepts when gold rejects this share of
#: its steps' completions or more, and that share rose by ``LOSS_RISE`` or more since the start
LOSS_LEVEL = 0.5
LOSS_RISE = 0.25

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


class CompletionsError(RewardKitError):
    """A completions file is missing or malformed, or does not hold the config's terms."""


def template(text: str) -> str:
    """The completion's shape: case-folded, digit runs as ``#``, whitespace collapsed."""
    return _SPACE.sub(" ", _DIGITS.sub("#", text.casefold())).strip()


# ---- writing ------------------------------------------------------------------------------------
class CompletionWriter:
    """Appends completion rows to a JSONL file, flushed after every batch.

    Opening an existing file appends to it (a restarted run keeps what the first attempt wrote);
    a last line cut short by a crash (no final newline) is dropped first, so the next row starts
    on its own line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _drop_partial_last_line(self.path)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self.rows = 0

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Write ``rows`` (``step``, ``prompt``, ``completion``, ``terms``, ``total``) and flush."""
        if self._file is None:
            raise ValueError(f"{self.path}: the completions file is closed")
        for row in rows:
            self._file.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
            self.rows += 1
        self._file.flush()

    def close(self) -> None:
        """Close the file (further writes raise)."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _drop_partial_last_line(path: Path) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("r+b") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        end = size
        while end > 0:  # back to the last newline, a block at a time
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return
            end = start
        f.truncate(0)


def clean_value(value: Any) -> float | None:
    """A term value for the file: a finite float, or None (the term did not apply, or NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ---- reading ------------------------------------------------------------------------------------
@dataclass
class CompletionsRead:
    """The rows of a completions file by sampling step, and what reading them changed."""

    by_step: dict[int, list[dict[str, Any]]]
    rows: int = 0
    #: rows of an earlier attempt that a restarted run's rows replaced
    superseded: int = 0
    #: rows sampled after the log's last step (their metrics were never logged)
    unlogged: int = 0

    def notes(self) -> list[str]:
        """One line per change, for the audit's output."""
        out = []
        if self.superseded:
            out.append(f"{self.superseded} completions of an earlier attempt were replaced by a restarted run's")
        if self.unlogged:
            out.append(f"{self.unlogged} completions were sampled after the log's last step (not read)")
        return out


def read_completions(path: str | os.PathLike[str], terms: Sequence[str]) -> CompletionsRead:
    """The rows of a completions JSONL file (module doc), each checked: a located
    :class:`CompletionsError` names the line and the key. ``terms`` are the config's top-level
    terms, which every row's ``terms`` must name (``null`` allowed)."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise CompletionsError(f"{path}: expected an existing completions file (JSONL), got a missing path") from None
    except OSError as exc:
        raise CompletionsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    read = CompletionsRead({})
    order: list[int] = []  # the steps in by_step, ascending
    with handle:
        try:
            for n, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                row = _row(path, n, line, terms)
                step = row["step"]
                if order and order[-1] > step:  # a restarted run: its rows replace the earlier ones from here on
                    while order and order[-1] >= step:
                        read.superseded += len(read.by_step.pop(order.pop()))
                if not order or order[-1] != step:
                    order.append(step)
                    read.by_step[step] = []
                read.by_step[step].append(row)
                read.rows += 1
        except UnicodeDecodeError as exc:
            raise CompletionsError(f"{path}: expected a UTF-8 file: {exc}") from None
    if not read.by_step:
        raise CompletionsError(f"{path}: expected completion rows (JSONL), found none")
    return read


def _row(path: Path, n: int, line: str, terms: Sequence[str]) -> dict[str, Any]:
    where = f"{path}: line {n}"
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise CompletionsError(f"{where}: expected one JSON object per line: {exc}") from None
    if not isinstance(row, dict):
        raise CompletionsError(f"{where}: expected a JSON object, got {type(row).__name__}")
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CompletionsError(f"{where}: step: expected the trainer's global_step (an integer >= 0), "
                               f"got {json.dumps(step)}")
    prompt = row.get("prompt", row.get("question"))
    if not isinstance(prompt, str):
        raise CompletionsError(f"{where}: expected 'prompt' (or 'question'), a string, got {json.dumps(prompt)[:60]}")
    completion = row.get("completion")
    if not isinstance(completion, str):
        raise CompletionsError(f"{where}: completion: expected a string, got {json.dumps(completion)[:60]}")
    values = row.get("terms")
    if not isinstance(values, dict):
        raise CompletionsError(f"{where}: terms: expected an object of term values, got {json.dumps(values)[:60]}")
    missing = [t for t in terms if t not in values]
    if missing:
        raise CompletionsError(f"{where}: terms: expected a value (or null) for every term of the config, missing "
                               f"{', '.join(map(repr, missing))} (the row has {', '.join(map(repr, values)) or 'none'})")
    clean: dict[str, float | None] = {}
    for name in terms:
        value = values[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise CompletionsError(f"{where}: terms.{name}: expected a number or null, got {json.dumps(value)[:60]}")
        clean[name] = clean_value(value)
    total = row.get("total")
    if total is not None and (isinstance(total, bool) or not isinstance(total, (int, float))):
        raise CompletionsError(f"{where}: total: expected a number or null, got {json.dumps(total)[:60]}")
    return {"step": step, "prompt": prompt, "completion": completion, "terms": clean,
            "total": clean_value(total)}


def by_log_step(read: CompletionsRead, log_steps: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """Rows grouped by the logged step that reports them: a row sampled at step ``k`` belongs to
    the first logged step ``>= k + 1`` (``log_steps`` ascending). Counts the rows after the last."""
    out: dict[int, list[dict[str, Any]]] = {}
    i = 0
    for step in sorted(read.by_step):
        while i < len(log_steps) and log_steps[i] < step + 1:
            i += 1
        if i == len(log_steps):
            read.unlogged += len(read.by_step[step])
            continue
        out.setdefault(log_steps[i], []).extend(read.by_step[step])
    return out


# ---- what the content detectors read -----------------------------------------------------------
@dataclass
class _Step:
    step: int
    rows: list[dict[str, Any]]
    top_template: str | None = None


@dataclass
class ContentReader:
    """Per-step content statistics of a run's completions, and each alert's evidence (module doc)."""

    reward: RewardStructure
    keep: int = 8
    #: the median total of the first logged step with completions (None before it)
    paid_above: float | None = None
    recent: deque = field(default_factory=deque)
    steps_read: int = 0
    #: the share of the start's completions that gold rejects (None before it, or without gold)
    start_rejected: float | None = None

    def __post_init__(self) -> None:
        self.recent = deque(maxlen=max(1, self.keep))

    def total(self, row: Mapping[str, Any], step: int) -> float:
        """The row's total, or the weighted sum of its raw terms at ``step`` (a term that did not apply: 0)."""
        if row.get("total") is not None:
            return float(row["total"])
        return math.fsum(self.reward.weight(t, step) * v for t, v in row["terms"].items()
                         if v is not None and t in self.reward.terms)

    def rejects(self, term: str, value: float | None) -> bool | None:
        """Whether ``term`` rejects a completion it scored ``value`` (None: it gave no value)."""
        if value is None:
            return None
        bounds = self.reward.bounded_range(term)
        return value < (bounds[0] + bounds[1]) / 2.0 if bounds is not None else value <= 0.0

    def pays(self, term: str, row: Mapping[str, Any], step: int) -> bool:
        """Whether ``term`` adds a positive amount to the row's total at ``step``."""
        value = row["terms"].get(term)
        return value is not None and self.reward.weight(term, step) * value > 0.0

    def _watched_paid(self, row: Mapping[str, Any], step: int) -> bool:
        return any(self.pays(t, row, step) for t in self.reward.watch)

    def observe(self, step: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Read one logged step's completions; return the keys to add to its record."""
        scored = [{**row, "_total": self.total(row, step)} for row in rows]
        if not scored:
            return {}
        start = self.paid_above is None
        if start:
            self.paid_above = statistics.median(r["_total"] for r in scored)
        entry = _Step(step, scored)
        self.recent.append(entry)
        self.steps_read += 1
        gold = self.reward.gold
        if gold is None:
            return {}
        judged = [r for r in scored if r["terms"].get(gold) is not None]
        if not judged:
            return {}
        rejected = [r for r in judged if self.rejects(gold, r["terms"][gold])]
        if start:
            self.start_rejected = len(rejected) / len(judged)
        exploits = [r for r in rejected if r["_total"] > self.paid_above]
        shapes = Counter(template(r["completion"]) for r in exploits)
        top, count = shapes.most_common(1)[0] if shapes else (None, 0)
        entry.top_template = top
        out = {EXPLOIT: len(exploits) / len(judged), TEMPLATE: count / len(judged)}
        for term in self.reward.watch:
            out[WATCHED + term] = sum(self.pays(term, r, step) for r in rejected) / len(judged)
        return out

    def template_at(self, step: int) -> str | None:
        """The most common template of the paid, rejected completions at ``step`` (if still kept)."""
        return next((e.top_template for e in self.recent if e.step == step), None)

    def _kept(self, steps: Sequence[int]) -> list[_Step]:
        """The kept steps among ``steps``."""
        wanted = set(steps)
        return [e for e in self.recent if e.step in wanted]

    def rejected_in(self, steps: Sequence[int], referee: str) -> tuple[float, float | None]:
        """Of the kept completions of ``steps`` that ``referee`` scored: the share it rejects, and the
        highest total among those (None: it rejected none). A demoted alert's reason quotes both."""
        verdicts = [(r["_total"], self.rejects(referee, r["terms"].get(referee)))
                    for e in self._kept(steps) for r in e.rows]
        judged = [(total, rejected) for total, rejected in verdicts if rejected is not None]
        refused = [total for total, rejected in judged if rejected]
        return (len(refused) / len(judged) if judged else 0.0), (max(refused) if refused else None)

    def evidence(self, steps: Sequence[int], referee: str | None,
                 paid_by: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        """The highest-paid completions of ``steps`` that ``referee`` rejects and that are paid (above
        the start's median, or by a watched term; with ``paid_by``, by that term), at most
        :data:`EVIDENCE`, each with its breakdown, and whether any of those steps had completions."""
        kept = self._kept(steps)
        if referee is None or not kept or self.paid_above is None:
            return [], bool(kept)
        paid_above = self.paid_above

        def paid(row: Mapping[str, Any], step: int) -> bool:
            if paid_by is not None:
                return self.pays(paid_by, row, step)
            return row["_total"] > paid_above or self._watched_paid(row, step)

        found = [(r["_total"], e.step, r) for e in kept for r in e.rows
                 if paid(r, e.step) and self.rejects(referee, r["terms"].get(referee))]
        found.sort(key=lambda item: (-item[0], item[1]))
        return [{"step": step, "prompt": r["prompt"], "completion": r["completion"], "terms": dict(r["terms"]),
                 "total": round(total, 6)} for total, step, r in found[:EVIDENCE]], True
