"""``Monitor``: runs detectors over per-step records and raises an alert when one's condition holds.

Feed it one record per logged step (:meth:`Monitor.update`, as the TRL callback does during
training) or a whole log at once (:meth:`Monitor.run`, as ``rewardkit audit`` does after the
fact): both give the same alerts, since each step sees only the records before it. An alert fires
once per detector and subject (a term, a pair) when the condition has held at the detector's
``patience`` of its last ``within`` records (for the statistics detectors ``within`` is ``patience``:
in a row); ``began`` is the first step of those.

    monitor = Monitor.from_config("reward.yaml")     # the default detectors, the config's thresholds
    monitor = Monitor([GoldDivergence(min_rise=0.2), GroupCollapse()], RewardStructure(("a", "b"), gold="b"))

**With completions** (``update(record, completions=rows)``: the rows the step's metrics report, see
:mod:`rewardkit.monitor.completions`), the content detectors run too, and every alert carries its
evidence: the highest-paid completions of the steps its window covers that the gold term rejects
(for a ``disagreement`` without gold: the partner that moved less), among those paid above the
start's median or by a watched term (``monitor.watch``). A *statistics* alert of kind
hacking whose steps had completions but none paid and rejected is demoted to ``health``, with the
reason in ``demoted``: the means moved, but no sample shows the reward paying what gold refuses.
*Corroboration* (``monitor.corroborate``, on by default) goes further: while no content detector
has fired, a statistics hacking alert is demoted too, because paid completions that gold rejects
are in nearly every step of a real run (a run converging on its reward's own quirks has them), and
only their spread tells an exploit from noise. Where nothing can corroborate (the content detectors
turned off, or no gold term for them to read), statistics alerts keep their kind.
The monitor keeps only the last few steps' completions, and every step costs the same however long
the run (the history's window means are constant-time too).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..config import parse_config, read_yaml
from .completions import LOSS_LEVEL, LOSS_RISE, ContentReader
from .detectors import DETECTORS, HACKING, HEALTH, Detector, Finding
from .history import History
from .structure import RewardStructure
from .watch import read_stress_watch


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
    #: with completions: the highest-paid ones of the alert's steps that gold (or the partner) rejects
    completions: list[dict[str, Any]] = field(default_factory=list)
    #: why a statistics alert was demoted from hacking to health (None: it was not)
    demoted: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (``rewardkit audit --json``)."""
        out = asdict(self)
        out["terms"] = list(self.terms)
        return out

    def __str__(self) -> str:
        terms = f" [{', '.join(self.terms)}]" if self.terms else ""
        demoted = f" (demoted from hacking: {self.demoted})" if self.demoted else ""
        return (f"{self.kind}: {self.detector}{terms}: began at step {self.began} (alert at step {self.fired}): "
                f"{self.message}{demoted}")


class Monitor:
    """Detectors over a growing :class:`History`; see the module docstring."""

    def __init__(self, detectors: Sequence[Detector], reward: RewardStructure, *, corroborate: bool = True) -> None:
        self.detectors = list(detectors)
        self.reward = reward
        self.corroborate = corroborate
        #: a content detector's hacking alert has fired (statistics alerts are corroborated from then on)
        self.corroborated = False
        self.history = History()
        self.alerts: list[Alert] = []
        # (detector, subject) -> the latest record indices where its condition held (at most patience)
        self._held: dict[tuple[str, tuple[str, ...]], deque[int]] = {}
        self._fired: set[tuple[str, tuple[str, ...]]] = set()
        # what each detector watches depends on the reward alone: computed once, not at every step
        self._subjects: dict[Detector, list[tuple[str, ...]]] = {}
        self.content = ContentReader(reward, keep=max([d.window for d in self.detectors] or [1]))
        #: whether some step came with its completions
        self.reads_completions = False

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: Any) -> "Monitor":
        """Every detector the config's ``monitor:`` section leaves on, with its thresholds
        (defaults without the section); ``spec`` is a validated ``rewardkit.config.RewardSpec``."""
        settings = getattr(spec, "monitor", None)
        chosen = {} if settings is None else settings.detectors
        detectors = [kind(**(chosen.get(name) or {})) for name, kind in DETECTORS.items()
                     if name not in chosen or chosen[name] is not None]
        return cls(detectors, RewardStructure.from_spec(spec),
                   corroborate=True if settings is None else settings.corroborate)

    @classmethod
    def from_config(cls, path: str | Path, *, stress: str | Path | None = None) -> "Monitor":
        """:meth:`from_spec` of a reward config file (validated; errors are located ``ConfigError``);
        with ``stress``, a ``rewardkit stress --json`` report of that config whose ``watch`` terms are
        watched too (:mod:`rewardkit.monitor.watch`)."""
        doc = read_yaml(path)
        monitor = cls.from_spec(parse_config(doc.data, source=doc.source))
        if stress is None:
            return monitor
        return monitor.watching(read_stress_watch(stress, monitor.reward.terms, monitor.reward.gold))

    def watching(self, extra: Sequence[str]) -> "Monitor":
        """A fresh monitor with these detectors whose reward also watches ``extra`` (after its own
        ``monitor.watch``, each term once)."""
        watch = tuple(dict.fromkeys((*self.reward.watch, *extra)))
        return Monitor(self.detectors, replace(self.reward, watch=watch), corroborate=self.corroborate)

    # ---- running ----------------------------------------------------------------------------
    def update(self, record: Mapping[str, Any], completions: Sequence[Mapping[str, Any]] | None = None) -> list[Alert]:
        """Add one step's record (and the completions its metrics report, if known); return the
        alerts that fire at it."""
        if completions is not None:
            step = record.get("step")
            step = len(self.history) if not isinstance(step, (int, float)) or step != step else int(step)
            record = {**record, **self.content.observe(step, completions)}
            self.reads_completions = True
        self.history.append(record)
        new: list[Alert] = []
        index = len(self.history) - 1
        for detector in self.detectors:
            if not detector.ready(self.history) or detector.applicable(self.reward, self.history) is not None:
                continue
            subjects = self._subjects.get(detector)
            if subjects is None:
                subjects = self._subjects[detector] = detector.subjects(self.reward)
            for subject in subjects:
                key = (detector.name, subject)
                if key in self._fired:
                    continue
                finding = detector.check(self.reward, self.history, subject)
                if finding is None:
                    continue
                held = self._held.setdefault(key, deque(maxlen=detector.patience))
                held.append(index)
                start = held[0]
                if len(held) < detector.patience or index - start + 1 > detector.within:
                    continue
                self._fired.add(key)
                alert = Alert(detector.name, finding.terms, self.history.step_at(start), self.history.step,
                              finding.message, {k: round(v, 6) for k, v in finding.values.items()}, finding.kind)
                new.append(self._read_completions(alert, detector, finding) if self.reads_completions else alert)
        if self.reads_completions and self.corroborate:
            new = self._corroborate(new)
        self.alerts += new
        return new

    def _corroborate(self, new: list[Alert]) -> list[Alert]:
        """``new`` with its statistics hacking alerts demoted while no content detector has fired
        (module doc); unchanged when no content detector can run on this reward and history."""
        content = {d.name for d in self.detectors if d.content}
        self.corroborated = self.corroborated or any(a.kind == HACKING and a.detector in content for a in new)
        running = sorted(d.name for d in self.detectors if d.content and d.applicable(self.reward, self.history) is None)
        if self.corroborated or not running:
            return new
        names = ", ".join(running)
        reason = (f"no content detector ({names}) has seen paid completions that gold rejects spread "
                  f"by step {self.history.step}")
        return [replace(a, kind=HEALTH, demoted=reason) if a.kind == HACKING and a.detector not in content else a
                for a in new]

    def _read_completions(self, alert: Alert, detector: Detector, finding: Finding) -> Alert:
        """The alert with its evidence; a statistics hacking alert without any, demoted (module doc)."""
        n = len(self.history)
        steps = [self.history.step_at(i) for i in range(max(0, n - detector.window), n)]
        referee = self._referee(alert, finding)
        paid_by = finding.terms[0] if detector.name == "watched_spread" else None
        evidence, had_completions = self.content.evidence(steps, referee, paid_by)
        message = alert.message
        if detector.name == "template_convergence":
            shape = self.content.template_at(alert.fired)
            message = message if shape is None else f"{message}: {shape!r}"
        if detector.content or alert.kind != HACKING or evidence or not had_completions or referee is None:
            return replace(alert, message=message, completions=evidence)
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        paid = self.content.paid_above
        watched = f" or by a watched term ({', '.join(self.reward.watch)})" if self.reward.watch else ""
        reason = (f"no completion of {where} was paid above the start's median total ({paid:.3f}){watched} "
                  f"and rejected by {referee!r}")
        share, highest = self.content.rejected_in(steps, referee)
        before = self.content.start_rejected if referee == self.reward.gold else None
        if highest is not None and before is not None and share >= LOSS_LEVEL and share - before >= LOSS_RISE:
            # a run can lose what gold accepts while the reward falls with it: say so, not only "no evidence"
            reason += (f"; {referee!r} rejects {share:.0%} of them, paid at most {highest:.3f}: the run is losing "
                       f"what gold accepts ({before:.0%} rejected at the start) without being paid more for what "
                       f"it does instead")
        return replace(alert, message=message, kind=HEALTH, demoted=reason)

    def _referee(self, alert: Alert, finding: Finding) -> str | None:
        """The term whose rejection makes a completion evidence: gold; without it, for two terms that
        should agree, the one that moved less."""
        if self.reward.gold is not None:
            return self.reward.gold
        if alert.detector == "disagreement" and len(finding.terms) == 2:
            a, b = finding.terms
            moved = {t: finding.values.get(f"{t}_now", 0.0) - finding.values.get(f"{t}_start", 0.0) for t in (a, b)}
            return min((a, b), key=lambda t: moved[t])
        return None

    def run(self, records: Iterable[Mapping[str, Any]],
            completions: Mapping[int, Sequence[Mapping[str, Any]]] | None = None) -> list[Alert]:
        """Feed every record in order (with ``completions``: logged step -> the rows its metrics
        report, a step absent from it has none); return all alerts (also kept in ``alerts``)."""
        for record in records:
            rows = None if completions is None else completions.get(int(record["step"]), [])
            self.update(record, rows)
        return list(self.alerts)

    def not_applicable(self) -> dict[str, str]:
        """Detector name -> why it did not check this reward and the records seen so far (it cannot
        run on them, or the log is too short for it ever to fire)."""
        out = {}
        n = len(self.history)
        for detector in self.detectors:
            reason = detector.applicable(self.reward, self.history)
            need = 2 * detector.window + detector.patience - 1
            if reason is None and n < need:
                then = (f"{detector.patience} in a row" if detector.within == detector.patience
                        else f"{detector.patience} of {detector.within}")
                reason = (f"the log has {n} logged step{'s' if n != 1 else ''}; it needs {need} (twice its window "
                          f"of {detector.window}, then {then})")
            if reason is not None:
                out[detector.name] = reason
        return out
