"""The TRL callback with transformers' real TrainerState and TrainerControl (no model needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rewardkit.monitor import Monitor
from rewardkit.monitor.trl_callback import MonitorCallback, with_diversity

from monitor_support import hacked_history, honest_history

transformers = pytest.importorskip("transformers", reason="pip install 'rewardkit[trl]'")


def train_loop(callback: Any, history: list[dict[str, Any]]) -> tuple[Any, int]:
    """Log ``history`` as Trainer.log does (append to log_history, then on_log), stopping when told."""
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    handler = transformers.trainer_callback.CallbackHandler([callback], None, None, None, None)
    for entry in history:
        state.global_step = entry["step"]
        logs = {k: v for k, v in entry.items() if k != "step"}
        state.log_history.append({**logs, "step": state.global_step})
        control = handler.on_log(None, state, control, logs)
        if control.should_training_stop:
            break
    return state, state.global_step


def test_the_callback_is_a_trainer_callback_and_logs_each_alert_as_a_metric(reward_config: Path) -> None:
    callback = MonitorCallback(Monitor.from_config(reward_config))
    assert isinstance(callback, transformers.TrainerCallback)
    state, last = train_loop(callback, hacked_history())
    assert last == 20  # not asked to stop
    fired = [e for e in state.log_history if "monitor/alert/gold_divergence" in e]
    assert len(fired) == 1 and fired[0]["monitor/alert/gold_divergence"] == 1.0
    alert = next(a for a in callback.monitor.alerts if a.detector == "gold_divergence")
    assert fired[0]["step"] == alert.fired and fired[0]["monitor/alert/gold_divergence/began"] == alert.began
    assert state.log_history[-1]["monitor/alerts"] == len(callback.monitor.alerts) >= 1


def test_stop_on_stops_the_run_at_the_first_such_alert(reward_config: Path) -> None:
    callback = MonitorCallback(Monitor.from_config(reward_config), stop_on=["gold_divergence"])
    state, last = train_loop(callback, hacked_history())
    assert callback.stopped_by is not None and callback.stopped_by.detector == "gold_divergence"
    assert last == callback.stopped_by.fired < 20


def test_an_honest_run_is_neither_flagged_nor_stopped(reward_config: Path) -> None:
    callback = MonitorCallback(Monitor.from_config(reward_config), stop_on="any")
    state, last = train_loop(callback, honest_history())
    assert last == 20 and callback.monitor.alerts == [] and callback.stopped_by is None
    assert all(e.get("monitor/alerts") == 0.0 for e in state.log_history)


def test_logs_without_a_reward_are_ignored(reward_config: Path) -> None:
    callback = MonitorCallback(Monitor.from_config(reward_config))
    state, _ = train_loop(callback, [{"train_runtime": 3.0, "step": 1}])
    assert len(callback.monitor.history) == 0 and "monitor/alerts" not in state.log_history[0]


def test_stop_on_names_detectors() -> None:
    with pytest.raises(ValueError, match="stop_on: expected 'any', an alert kind"):
        MonitorCallback(Monitor([], None), stop_on=["gold"])  # type: ignore[arg-type]


def test_with_diversity_logs_the_distinct_fraction_and_keeps_the_rewards() -> None:
    logged: dict[str, float] = {}
    seen: list[int] = []

    def proxy(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        return [float(len(c)) for c in completions]

    funcs = with_diversity([proxy], 4, on_batch=lambda p, c, **kw: seen.append(len(c)))
    completions = ["a", "a", "a", "b", "x", "y", "z", "w"]
    values = funcs[0](["q"] * 8, completions, log_metric=logged.__setitem__)
    assert values == [1.0] * 8 and funcs[0].__name__ == "proxy" and seen == [8]
    assert logged == {"monitor/distinct_frac": pytest.approx((2 / 4 + 4 / 4) / 2)}


def test_with_diversity_wraps_async_reward_functions() -> None:
    import asyncio

    async def judge(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        return [1.0] * len(completions)

    logged: dict[str, float] = {}
    (wrapped,) = with_diversity([judge], 2)
    assert asyncio.run(wrapped(["q", "q"], ["same", "same"], log_metric=logged.__setitem__)) == [1.0, 1.0]
    assert logged["monitor/distinct_frac"] == 0.5 and wrapped.__name__ == "judge"
