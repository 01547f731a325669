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

``MonitorCallback(monitor, completions=PATH, rewards=rewards)`` also writes every sampled
completion to ``PATH`` (JSONL: ``step``, ``prompt``, ``completion``, ``terms``, ``total``; appended
and flushed per batch, so a restarted run keeps the first attempt's rows; see
:mod:`rewardkit.monitor.completions`) and hands each logged step's completions to the monitor
(content detectors, evidence, demotion). It sees the batch through ``on_batch``:
``with_diversity(rewards.funcs, G, on_batch=callback.on_batch)``, which reads the terms from
``rewards`` (the ``TRLRewardFunctions``, whose batch is already computed); other trainers call
:meth:`MonitorCallback.record_batch` with the values themselves.

transformers is imported when a callback is built, not when this module is imported.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Collection, Sequence

import os
from pathlib import Path

from ..integrations.trl import completion_text, is_async_reward, prompt_text
from .completions import CompletionWriter, clean_value
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

    def __init__(self, monitor: Monitor, stop_on: str | Collection[str] | None = None, *,
                 completions: str | os.PathLike[str] | None = None, rewards: Any = None) -> None:
        self.monitor = monitor
        self.stop_on = _stop_set(stop_on)
        self.stopped_by: Alert | None = None
        #: the completions file's writer (None without ``completions=``)
        self.writer = None if completions is None else CompletionWriter(Path(completions))
        self.rewards = rewards
        self._pending: list[dict[str, Any]] = []  # rows sampled since the last training log

    def record_batch(self, step: int, prompts: Sequence[str], completions: Sequence[str],
                     terms: dict[str, Sequence[float | None]], totals: Sequence[float]) -> None:
        """Write one scored batch (``step``: the trainer's ``global_step`` when it was sampled;
        ``terms``: each top-level term's raw values, None where it did not apply) and keep it for
        the next training log."""
        n = len(completions)
        if len(prompts) != n or len(totals) != n or any(len(v) != n for v in terms.values()):
            raise ValueError(f"record_batch: expected {n} prompts, totals and values per term (one per completion), "
                             f"got {len(prompts)} prompts, {len(totals)} totals, "
                             f"{ {t: len(v) for t, v in terms.items()} }")
        rows = [{"step": int(step), "prompt": prompts[i], "completion": completions[i],
                 "terms": {t: clean_value(v[i]) for t, v in terms.items()}, "total": clean_value(totals[i])}
                for i in range(n)]
        if self.writer is not None:
            self.writer.write(rows)
        self._pending.extend(rows)

    def on_batch(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> None:
        """``with_diversity``'s ``on_batch``: read the batch's terms from ``rewards`` and record it."""
        import numpy as np

        if self.rewards is None:
            raise ValueError("MonitorCallback.on_batch needs rewards= (the TRLRewardFunctions that scored the batch)")
        out = self.rewards.evaluate(prompts, completions, **kwargs)
        terms: dict[str, list[float | None]] = {}
        for name in self.rewards.term_names:
            term = out.terms[name]
            raw = _floats(term.raw, len(completions))
            applies = None if term.applies is None else np.broadcast_to(np.asarray(_host(term.applies)),
                                                                          (len(completions),))
            terms[name] = [None if applies is not None and not applies[i] else raw[i] for i in range(len(raw))]
        state = kwargs.get("trainer_state")
        step = int(getattr(state, "global_step", 0) or 0)
        assistant = getattr(self.rewards, "assistant_message", "first")
        self.record_batch(step, [prompt_text(p) for p in prompts],
                          [completion_text(c, assistant) for c in completions], terms,
                          _floats(out.total, len(completions)))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Close the completions file."""
        if self.writer is not None:
            self.writer.close()
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Check a training log (one holding ``reward``); add the alerts' metrics; stop if asked."""
        if not logs or TOTAL not in logs:
            return control
        rows, self._pending = self._pending, []
        if not rows and self.writer is None and self.rewards is None:
            rows = None  # no completions path: the monitor reads the logged means only
        alerts = self.monitor.update({**logs, "step": state.global_step}, rows)
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


def _host(values: Any) -> Any:
    detach = getattr(values, "detach", None)
    return detach().cpu().numpy() if detach is not None else values


def _floats(values: Any, n: int) -> list[float]:
    import numpy as np

    return [float(v) for v in np.broadcast_to(np.asarray(_host(values), dtype=np.float64).reshape(-1), (n,))]


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
    if not funcs:
        raise ValueError("with_diversity: expected at least one reward function")
    first = funcs[0]

    def observe(prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]) -> None:
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric(DISTINCT, distinct_fraction([completion_text(c) for c in completions], group_size))
        if on_batch is not None:
            on_batch(prompts, completions, **kwargs)

    if is_async_reward(first):
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
