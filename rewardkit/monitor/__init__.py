"""A reward-hacking monitor that reads the reward's declared structure (docs/monitor.md).

Detectors (one class each, thresholds documented on the class) run over per-step training
records: TRL's log keys, or rewardkit's breakdown CSV translated into them. The config's
``monitor:`` section names the gold term, the terms that should agree and the thresholds.
``MonitorCallback`` runs it during TRL training; ``rewardkit audit LOG --config CONFIG`` after.
With the run's sampled completions (``MonitorCallback(..., completions=PATH)``, ``rewardkit audit
... --completions FILE``; :mod:`rewardkit.monitor.completions`) content detectors run too and every
alert shows the completions behind it; with a ``rewardkit stress`` report (``--stress REPORT``,
``Monitor.from_config(config, stress=REPORT)``, :mod:`rewardkit.monitor.watch`) the terms it found
paying a loophole are watched on them.
"""

from ..monitor_spec import MonitorSettings, parse_monitor
from .completions import CompletionWriter, ContentReader, read_completions
from .detectors import (DETECTORS, Detector, Disagreement, DiversityCollapse, ExploitSpread, Finding, GoldDivergence,
                        GroupCollapse, LengthDrift, PinnedAtBound, TemplateConvergence, VarianceShare, WatchedSpread)
from .history import History
from .monitor import Alert, Monitor
from .structure import RewardStructure
from .watch import StressReportError, read_stress_watch

__all__ = ["Alert", "CompletionWriter", "ContentReader", "DETECTORS", "Detector", "Disagreement", "DiversityCollapse",
           "ExploitSpread", "Finding", "GoldDivergence", "GroupCollapse", "History", "LengthDrift", "Monitor",
           "MonitorSettings", "PinnedAtBound", "RewardStructure", "StressReportError", "TemplateConvergence",
           "VarianceShare", "WatchedSpread", "parse_monitor", "read_completions", "read_stress_watch"]
