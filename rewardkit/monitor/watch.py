"""The terms a ``rewardkit stress --json`` report says to watch, read for the monitor.

A stress report's ``watch`` lists the terms that pay its loopholes' exploits (and its inversions' wrong
replies), gold aside. The monitor watches them on a run's completions
(:class:`~rewardkit.monitor.detectors.WatchedSpread`): ``rewardkit audit --stress REPORT``,
``Monitor.from_config(config, stress=REPORT)``, or the same list in the config's ``monitor.watch``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import RewardKitError


class StressReportError(RewardKitError):
    """A stress report is missing, malformed, or names terms the config does not have."""


def read_stress_watch(path: str | os.PathLike[str], terms: tuple[str, ...], gold: str | None) -> tuple[str, ...]:
    """The ``watch`` terms of a ``rewardkit stress --json`` report, each checked against the config's
    ``terms`` (a report of another config is refused, located at the key), gold left out."""
    where = Path(path)
    try:
        report = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StressReportError(f"{where}: expected the JSON that `rewardkit stress --json` printed, got a missing "
                                f"path") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StressReportError(f"{where}: expected the JSON that `rewardkit stress --json` printed: {exc}") from None
    watch = report.get("watch") if isinstance(report, dict) else None
    if not isinstance(watch, list) or not all(isinstance(t, str) for t in watch):
        raise StressReportError(f"{where}: watch: expected a list of term names (a `rewardkit stress --json` "
                                f"report), got {json.dumps(watch)[:60]}")
    for i, term in enumerate(watch):
        if term not in terms:
            raise StressReportError(f"{where}: watch[{i}]: expected a term of the config ({', '.join(terms)}), got "
                                    f"{term!r} (a report of another config?)")
    return tuple(t for t in watch if t != gold)
