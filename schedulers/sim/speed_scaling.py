"""Per-replica execution speed inside Vidur: each batch takes Vidur's predicted time divided by the speed.

Vidur 0.0.26's ``ReplicaStageScheduler.on_schedule`` asks its execution-time predictor for one
``ExecutionTime`` per batch stage (``get_execution_time(batch, stage)``), and the batch stage then
lasts ``execution_time.total_time``. :func:`install_replica_speeds` gives every replica's stage
schedulers a :class:`SpeedScaledPredictor` that returns the prediction with every kernel time
divided by ``declared_speed * slowdown_factor(batch.scheduled_at)``, so ``total_time`` (a sum of
those times) is divided by the same number. The batch's schedule time is set before its stages
are timed, so a slowdown applies to batches that start while it is active.

Each timed batch is also appended to a :class:`BatchLog` with its nominal (speed 1) and actual
durations; :class:`~schedulers.sim.tracker.ClusterTracker` reveals an entry to routers only once
the batch has ended, as a real router measures iteration times after the fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Sequence

from vidur._native.entities import ExecutionTime as NativeExecutionTime

#: ``ExecutionTime`` constructor arguments after the layer count, in order (all are seconds).
_TIME_FIELDS = (
    "attention_rope_execution_time",
    "attention_kv_cache_save_execution_time",
    "attention_decode_execution_time",
    "attention_prefill_execution_time",
    "attention_layer_pre_proj_execution_time",
    "attention_layer_post_proj_execution_time",
    "mlp_layer_up_proj_execution_time",
    "mlp_layer_down_proj_execution_time",
    "mlp_layer_act_execution_time",
    "attn_norm_time",
    "mlp_norm_time",
    "add_time",
    "tensor_parallel_communication_time",
    "pipeline_parallel_communication_time",
)


def scale_execution_time(execution_time: Any, speed: float) -> NativeExecutionTime:
    """A copy of a Vidur ``ExecutionTime`` with every kernel and communication time divided by ``speed``."""
    if not speed > 0:
        raise ValueError(f"speed must be positive, got {speed}")
    return NativeExecutionTime(
        execution_time.num_layers, *(getattr(execution_time, name) / speed for name in _TIME_FIELDS)
    )


@dataclass
class BatchRecord:
    """One timed batch stage: when it ends and how long it takes at speed 1 and really."""

    replica: int
    start: float
    end: float
    nominal_s: float
    actual_s: float
    tokens: int


@dataclass
class BatchLog:
    """Batch stages timed so far, in scheduling order (the tracker consumes them as they end)."""

    records: List[BatchRecord] = field(default_factory=list)

    def pop_ended(self, now: float) -> List[BatchRecord]:
        """Remove and return the records of batches that ended by ``now``."""
        ended = [r for r in self.records if r.end <= now]
        if ended:
            self.records[:] = [r for r in self.records if r.end > now]
        return ended


class SpeedScaledPredictor:
    """Wraps Vidur's execution-time predictor for one replica running at a (time-varying) speed."""

    def __init__(
        self, inner: Any, replica: int, declared_speed: float, slowdown: Callable[[int, float], float], log: BatchLog | None
    ) -> None:
        self.inner, self.replica, self.declared_speed = inner, int(replica), float(declared_speed)
        self.slowdown, self.log = slowdown, log

    def speed_at(self, t: float) -> float:
        """Declared speed times the slowdown factor at ``t``."""
        return self.declared_speed * self.slowdown(self.replica, t)

    def get_execution_time(self, batch: Any, pipeline_stage: int) -> NativeExecutionTime:
        nominal = self.inner.get_execution_time(batch, pipeline_stage)
        start = batch.scheduled_at if batch.scheduled_at is not None else 0.0
        scaled = scale_execution_time(nominal, self.speed_at(start))
        if self.log is not None:
            actual = scaled.total_time
            self.log.records.append(
                BatchRecord(self.replica, start, start + actual, nominal.total_time, actual, int(batch.total_num_q_tokens))
            )
        return scaled

    def __getattr__(self, name: str) -> Any:  # anything else Vidur may read from its predictor
        return getattr(self.inner, name)


def install_replica_speeds(
    replica_schedulers: Sequence[Any],
    declared_speeds: Sequence[float],
    slowdown: Callable[[int, float], float],
    log: BatchLog | None = None,
) -> None:
    """Give each replica's stage schedulers a :class:`SpeedScaledPredictor` (replica ``i`` at ``declared_speeds[i]``)."""
    if len(replica_schedulers) != len(declared_speeds):
        raise ValueError(f"{len(replica_schedulers)} replicas but {len(declared_speeds)} declared speeds")
    for i, (rs, speed) in enumerate(zip(replica_schedulers, declared_speeds, strict=True)):
        for stage in rs._replica_stage_schedulers.values():
            inner = stage._execution_time_predictor
            if isinstance(inner, SpeedScaledPredictor):
                inner = inner.inner
            stage._execution_time_predictor = SpeedScaledPredictor(inner, i, speed, slowdown, log)
