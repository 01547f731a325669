"""The monitor during TRL training: a ``TrainerCallback`` that checks each logged step.

``MonitorCallback(monitor, stop_on=...)`` feeds every training log TRL's ``GRPOTrainer`` writes
(``reward``, ``rewards/<term>/mean``, ``completions/mean_length``, ``frac_reward_zero_std``...)
to the :class:`~rewardkit.monitor.Monitor`. Each alert becomes metrics of that step,
``monitor/alert/<detector>`` (1.0) and ``monitor/alert/<detector>/began`` (the step it began), in
the logs the reporting callbacks see and in ``trainer_state.json``; ``monitor/alerts`` counts the
alerts so far at every step (``monitor/hacking_alerts`` those of kind ``hacking``). ``stop_on="any"``,
``"hacking"`` (alerts of that kind only) or a list of detector names stops training at the first
such alert. ``with_diversity`` wraps the reward functions so that the batch's fraction of
distinct completions per group is logged too (TRL does not log it), for the diversity detector.

transformers is imported when a callback is built, not when this module is imported.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Collection, Sequence

from .detectors import DETECTORS, HACKING, KINDS
from .history import DISTINCT, TOTAL
from .monitor import Alert, Monitor

PREFIX = "monitor/alert/"


def make_callback(monitor: Monitor, stop_on: str | Collection[str] | None = None) -> Any:
    """A ``transformers.TrainerCallback`` running ``monitor`` (see :class:`MonitorCallback`)."""
    return MonitorCallback(monitor, stop_on=stop_on)


def _stop_set(stop_on: str | Collection[str] | None) -> frozenset[str]:
    if stop_on is None:
        return frozenset()
    if stop_on == "any":
        return frozenset(DETECTORS)
    if isinstance(stop_on, str):
        stop_on = [stop_on]
    unknown = sorted(set(stop_on) - set(DETECTORS) - set(KINDS))
    if unknown:
        raise ValueError(f"stop_on: expected 'any', an alert kind ({', '.join(KINDS)}) or detector names "
                         f"({', '.join(DETECTORS)}), got {unknown}")
    return frozenset(stop_on)


def _callback_base() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("MonitorCallback needs transformers: pip install 'rewardkit[trl]'") from exc
    return TrainerCallback


class MonitorCallback:
    """Checks every training log with a :class:`Monitor`; logs alerts as metrics; may stop the run.

    An instance is a ``transformers.TrainerCallback`` (the class is made a subclass of it when
    first built, so importing this module needs no transformers).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> "MonitorCallback":
        base = _callback_base()
        if not issubclass(cls, base):
            cls = _with_base(cls, base)
        return object.__new__(cls)

    def __init__(self, monitor: Monitor, stop_on: str | Collection[str] | None = None) -> None:
        self.monitor = monitor
        self.stop_on = _stop_set(stop_on)
        self.stopped_by: Alert | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Check a training log (one holding ``reward``); add the alerts' metrics; stop if asked."""
        if not logs or TOTAL not in logs:
            return control
        alerts = self.monitor.update({**logs, "step": state.global_step})
        metrics: dict[str, float] = {"monitor/alerts": float(len(self.monitor.alerts)),
                                     "monitor/hacking_alerts": float(sum(a.kind == HACKING for a in self.monitor.alerts))}
        for alert in alerts:
            metrics[f"{PREFIX}{alert.detector}"] = 1.0
            metrics[f"{PREFIX}{alert.detector}/began"] = float(alert.began)
            if (alert.detector in self.stop_on or alert.kind in self.stop_on) and self.stopped_by is None:
                self.stopped_by = alert
                control.should_training_stop = True
        logs.update(metrics)  # the reporting callbacks after this one see them
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(metrics)  # and trainer_state.json keeps them
        return control


@functools.lru_cache(maxsize=None)
def _with_base(cls: type, base: type) -> type:
    return type(cls.__name__, (cls, base), {"__doc__": cls.__doc__, "__module__": cls.__module__})


def distinct_fraction(texts: Sequence[str], group_size: int) -> float:
    """Mean over consecutive groups of ``group_size`` of (distinct texts / texts); whitespace is
    collapsed first. TRL puts a prompt's ``num_generations`` completions next to each other."""
    if group_size < 1:
        raise ValueError(f"group_size: expected a positive integer, got {group_size}")
    groups = [texts[i:i + group_size] for i in range(0, len(texts), group_size)]
    fractions = [len({" ".join(t.split()) for t in g}) / len(g) for g in groups if g]
    return sum(fractions) / len(fractions) if fractions else float("nan")


def with_diversity(funcs: Sequence[Callable[..., Any]], group_size: int,
                   on_batch: Callable[..., None] | None = None) -> list[Callable[..., Any]]:
    """``funcs`` with the first wrapped to log ``monitor/distinct_frac`` through TRL's ``log_metric``
    (and to call ``on_batch(prompts, completions, **kwargs)`` after scoring, e.g. to keep samples).
    ``group_size`` is GRPO's ``num_generations``. Names and rewards are unchanged."""
    from ..integrations.trl import completion_text

    if not funcs:
        raise ValueError("with_diversity: expected at least one reward function")
    first = funcs[0]

    def observe(prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]) -> None:
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric(DISTINCT, distinct_fraction([completion_text(c) for c in completions], group_size))
        if on_batch is not None:
            on_batch(prompts, completions, **kwargs)

    if inspect.iscoroutinefunction(first):
        async def wrapped_async(prompts: list[Any], completions: list[Any], **kwargs: Any) -> Any:
            values = await first(prompts, completions, **kwargs)
            observe(prompts, completions, kwargs)
            return values

        wrapped: Callable[..., Any] = wrapped_async
    else:
        def wrapped_sync(prompts: list[Any], completions: list[Any], **kwargs: Any) -> Any:
            values = first(prompts, completions, **kwargs)
            observe(prompts, completions, kwargs)
            return values

        wrapped = wrapped_sync
    wrapped.__name__ = wrapped.__qualname__ = first.__name__  # TRL names its logs after __name__
    return [wrapped, *funcs[1:]]
