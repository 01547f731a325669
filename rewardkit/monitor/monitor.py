"""``Monitor``: runs detectors over per-step records and raises an alert when one's condition holds.

Feed it one record per logged step (:meth:`Monitor.update`, as the TRL callback does during
training) or a whole log at once (:meth:`Monitor.run`, as ``rewardkit audit`` does after the
fact): both give the same alerts, since each step sees only the records before it. An alert fires
once per detector and subject (a term, a pair) when the condition has held for the detector's
``patience`` consecutive records; ``began`` is the step where that streak started.

    monitor = Monitor.from_config("reward.yaml")     # the default detectors, the config's thresholds
    monitor = Monitor([GoldDivergence(min_rise=0.2), GroupCollapse()], RewardStructure(("a", "b"), gold="b"))
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .detectors import DETECTORS, Detector
from .history import History
from .structure import RewardStructure


@dataclass(frozen=True)
class Alert:
    """One detector's alert: the terms concerned, the step the trouble began and the step it fired."""

    detector: str
    terms: tuple[str, ...]
    began: int
    fired: int
    message: str
    values: dict[str, float] = field(default_factory=dict)
    #: ``hacking`` or ``health`` (see :mod:`rewardkit.monitor.detectors`)
    kind: str = "hacking"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (``rewardkit audit --json``)."""
        out = asdict(self)
        out["terms"] = list(self.terms)
        return out

    def __str__(self) -> str:
        terms = f" [{', '.join(self.terms)}]" if self.terms else ""
        return (f"{self.kind}: {self.detector}{terms}: began at step {self.began} (alert at step {self.fired}): "
                f"{self.message}")


class Monitor:
    """Detectors over a growing :class:`History`; see the module docstring."""

    def __init__(self, detectors: Sequence[Detector], reward: RewardStructure) -> None:
        self.detectors = list(detectors)
        self.reward = reward
        self.history = History()
        self.alerts: list[Alert] = []
        self._streaks: dict[tuple[str, tuple[str, ...]], int] = {}  # (detector, subject) -> index where it began
        self._fired: set[tuple[str, tuple[str, ...]]] = set()

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: Any) -> "Monitor":
        """Every detector the config's ``monitor:`` section leaves on, with its thresholds
        (defaults without the section); ``spec`` is a validated ``rewardkit.config.RewardSpec``."""
        settings = getattr(spec, "monitor", None)
        chosen = {} if settings is None else settings.detectors
        detectors = [kind(**(chosen.get(name) or {})) for name, kind in DETECTORS.items()
                     if name not in chosen or chosen[name] is not None]
        return cls(detectors, RewardStructure.from_spec(spec))

    @classmethod
    def from_config(cls, path: str | Path) -> "Monitor":
        """:meth:`from_spec` of a reward config file (validated; errors are located ``ConfigError``)."""
        from ..config import parse_config, read_yaml

        doc = read_yaml(path)
        return cls.from_spec(parse_config(doc.data, source=doc.source))

    # ---- running ----------------------------------------------------------------------------
    def update(self, record: Mapping[str, Any]) -> list[Alert]:
        """Add one step's record; return the alerts that fire at it."""
        self.history.append(record)
        new: list[Alert] = []
        index = len(self.history) - 1
        for detector in self.detectors:
            if not detector.ready(self.history) or detector.applicable(self.reward, self.history) is not None:
                continue
            for subject in detector.subjects(self.reward):
                key = (detector.name, subject)
                finding = detector.check(self.reward, self.history, subject)
                if finding is None:
                    self._streaks.pop(key, None)
                    continue
                start = self._streaks.setdefault(key, index)
                if key in self._fired or index - start + 1 < detector.patience:
                    continue
                self._fired.add(key)
                new.append(Alert(detector.name, finding.terms, self.history.step_at(start), self.history.step,
                                 finding.message, {k: round(v, 6) for k, v in finding.values.items()}, finding.kind))
        self.alerts += new
        return new

    def run(self, records: Iterable[Mapping[str, Any]]) -> list[Alert]:
        """Feed every record in order; return all alerts (also kept in ``alerts``)."""
        for record in records:
            self.update(record)
        return list(self.alerts)

    def not_applicable(self) -> dict[str, str]:
        """Detector name -> why it cannot run on this reward and the records seen so far."""
        out = {}
        for detector in self.detectors:
            reason = detector.applicable(self.reward, self.history)
            if reason is not None:
                out[detector.name] = reason
        return out
