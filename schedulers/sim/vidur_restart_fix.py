"""Vidur 0.0.26 cannot restart a preempted request: ``Request.restart`` resets the processed-token
count but not the pipeline-stage count, so the restarted prefill overshoots and Vidur asserts
(``_num_stage_processed_tokens <= total_tokens`` in ``on_batch_stage_end``). This wraps ``restart``
to reset the stage count and the stage's prefill flag too, the way ``restart`` resets their
batch-level twins; applied once, by the Vidur env, before any simulation runs.
"""

from __future__ import annotations

from typing import Any


def apply_restart_fix() -> None:
    """Make ``vidur.entities.Request.restart`` reset the pipeline-stage progress (idempotent)."""
    from vidur.entities.request import Request

    original = Request.restart
    if getattr(original, "_resets_stage_progress", False):
        return

    def restart(self: Any) -> None:
        original(self)
        self._num_stage_processed_tokens = 0
        self._is_prefill_stage_complete = False

    restart._resets_stage_progress = True  # type: ignore[attr-defined]
    Request.restart = restart
