"""``rewardkit stress``: find a reward config's loopholes before training, with the exploit shown.

- :mod:`.rows`: the rows file (JSONL or CSV); each row's ``completion`` is its *control*.
- :mod:`.probes`, :mod:`.families`: what a probe is, and the families that build them.
- :mod:`.search`: the adaptive search of edits.
- :mod:`.runner`: :func:`stress`, the oracle, loopholes and unpaid controls.
- :mod:`.command`: the subcommand. docs/stress.md walks through a session.
"""

from .families import FAMILIES, Family
from .rows import Row, RowsError, read_rows
from .runner import Loophole, StressReport, UnpaidControl, stress

__all__ = ["FAMILIES", "Family", "Loophole", "Row", "RowsError", "StressReport", "UnpaidControl", "read_rows", "stress"]
