"""The TRL callback with transformers' real TrainerState and TrainerControl (no model needed)."""

from __future__ import annotations

import json
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


def test_the_callback_writes_every_completion_and_the_monitor_reads_them(reward_config: Path, tmp_path: Path) -> None:
    """completions=PATH with rewards=: the batch's terms come from TRLRewardFunctions, each row is
    written (appended, flushed) and the logged step's completions reach the content detectors."""
    from rewardkit import RewardComposer
    from rewardkit.integrations.trl import TRLRewardFunctions
    from rewardkit.monitor.completions import read_completions

    composer = RewardComposer.from_yaml(reward_config)
    path = tmp_path / "run" / "completions.jsonl"

    def train(steps: range, callback: Any) -> Any:
        rewards = callback.rewards
        funcs = with_diversity(rewards.funcs, 2, on_batch=callback.on_batch)
        state, control = transformers.TrainerState(), transformers.TrainerControl()
        for step in steps:
            state.global_step = step - 1  # sampled before the optimizer step that logs it
            hacked = step >= 6
            completions = ["sure, no idea" if hacked else "it is 4", "sure thing" if hacked else "no", "4", "no"]
            values = [f(["What is 2 + 2?"] * 4, completions, reference=["4"] * 4, trainer_state=state) for f in funcs]
            state.global_step = step
            logs = {"reward": sum(values[0]) / 4, "rewards/proxy/mean": sum(values[0]) / 4,
                    "rewards/strict/mean": sum(values[1]) / 4}
            state.log_history.append({**logs, "step": step})
            callback.on_log(None, state, control, logs)
        callback.on_train_end(None, state, control)
        return state

    first = MonitorCallback(Monitor.from_spec(composer.spec), completions=path, rewards=TRLRewardFunctions(composer))
    state = train(range(1, 13), first)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    # what the callback raised live is what the audit finds in the log and the file afterwards
    log = tmp_path / "run" / "trainer_state.json"
    log.write_text(json.dumps({"log_history": state.log_history}), encoding="utf-8")
    after = Monitor.from_spec(composer.spec)
    sampled = read_completions(path, ["proxy", "strict"])
    from rewardkit.monitor.completions import by_log_step
    from rewardkit.monitor.logs import read_log

    records = read_log(log)
    assert [a.to_dict() for a in after.run(records, by_log_step(sampled, [int(r["step"]) for r in records]))] == \
        [a.to_dict() for a in first.monitor.alerts]
    assert len(rows) == 48 and set(rows[0]) == {"step", "prompt", "completion", "terms", "total"}
    assert rows[0] == {"step": 0, "prompt": "What is 2 + 2?", "completion": "it is 4",
                       "terms": {"proxy": 0.0, "strict": 1.0}, "total": 0.0}
    assert rows[-4]["terms"] == {"proxy": 1.0, "strict": 0.0} and rows[-4]["total"] == 1.0
    spread = next(a for a in first.monitor.alerts if a.detector == "exploit_spread")
    assert spread.kind == "hacking" and spread.completions[0]["completion"].startswith("sure")
    # a restarted run (resumed from the checkpoint at step 8) appends; the audit keeps the new attempt's rows
    again = MonitorCallback(Monitor.from_spec(composer.spec), completions=path, rewards=TRLRewardFunctions(composer))
    train(range(9, 15), again)
    read = read_completions(path, ["proxy", "strict"])
    assert read.rows == 48 + 24 and read.superseded == 16 and max(read.by_step) == 13


def test_on_batch_without_rewards_says_what_it_needs(reward_config: Path, tmp_path: Path) -> None:
    callback = MonitorCallback(Monitor.from_config(reward_config), completions=tmp_path / "c.jsonl")
    with pytest.raises(ValueError, match="needs rewards="):
        callback.on_batch(["q"], ["a"])
