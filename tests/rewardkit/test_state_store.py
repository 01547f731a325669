"""``StateStore``: calls from several threads are each counted (its lock), and the state's
fingerprint holds what decides the reward's meaning, not where a remote scorer lives."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from rewardkit import ConfigError, RewardComposer

CHEAP = {"version": 1, "components": {
    "speed": {"type": "throughput_sigmoid", "params": {"target": 0.05, "scale": 0.05},
              "normalize": {"type": "running_zscore"}},
    "late": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "weight": -0.5,
             "normalize": {"type": "running_zscore"}},
}}


def hammer(call: Any, threads: int = 8, calls: int = 10) -> None:
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        for _ in range(calls):
            call()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)


@pytest.mark.parametrize("batched", [True, False])
def test_calls_from_several_threads_are_each_counted(batched: bool) -> None:
    composer = RewardComposer.from_dict(CHEAP)
    if batched:
        ctx = {"throughput": np.array([0.01, 0.09]), "latency": np.array([0.5, 2.0])}
        hammer(lambda: composer(ctx), calls=10)
        expected = 8 * 10 * 2
    else:
        ctx = {"throughput": 0.01, "latency": 2.0}
        hammer(lambda: composer(ctx), calls=2000)
        expected = 8 * 2000
    assert composer.step == expected
    state = composer.state_dict()
    assert state["normalizers"]["speed"]["count"] == expected
    assert state["normalizers"]["late"]["count"] == expected


def remote(**params: Any) -> dict[str, Any]:
    judge = {"url": "http://127.0.0.1:1/v1/completions", "model": "m", "rubric": "Rate: {completion}",
             "labels": ["no", "yes"], "batch_size": 4}
    return {"version": 1, "components": {
        "judge": {"type": "judge", "params": {**judge, **params}, "normalize": {"type": "running_zscore"}}}}


@pytest.mark.parametrize("moved", [
    {"url": "https://scorer.internal:9000/v1/completions"}, {"timeout_s": 120}, {"max_requests": 5000},
    {"max_concurrency": 2}, {"retries": 7}, {"backoff_s": 1.5}, {"batch_size": 16}, {"cache_size": 0},
    {"max_call_s": 60}, {"max_answer_bytes": 65536}])
def test_moving_the_scorer_keeps_the_saved_state(moved: dict[str, Any]) -> None:
    saved = RewardComposer.from_dict(remote())
    saved.step = 77
    state = saved.state_dict()
    resumed = RewardComposer.from_dict(remote(**moved))
    resumed.load_state_dict(state)  # where the scorer lives is not what the reward means
    assert resumed.step == 77


@pytest.mark.parametrize("changed", [{"model": "other"}, {"rubric": "Is it good? {completion}"},
                                     {"labels": ["bad", "good"]}, {"score_from": "text"}, {"default": 0.5},
                                     {"on_failure": "default"}])
def test_changing_what_the_reward_means_still_refuses_the_state(changed: dict[str, Any]) -> None:
    state = RewardComposer.from_dict(remote()).state_dict()
    with pytest.raises(ConfigError, match="state_dict: config: .*saved from a different reward config"):
        RewardComposer.from_dict(remote(**changed)).load_state_dict(state)


def test_requests_spent_are_saved_and_restored() -> None:
    composer = RewardComposer.from_dict(remote(max_requests=10))
    term = composer.spec.nodes[0].component
    term._budget.spent = 6  # as if six requests had been sent
    state = composer.state_dict()
    assert state["spent_requests"] == {"judge": 6}
    restored = RewardComposer.from_dict(remote(max_requests=10))
    restored.load_state_dict(state)
    assert restored.spec.nodes[0].component.spent_requests == 6
    older = {k: v for k, v in state.items() if k != "spent_requests"}  # saved before spend was recorded
    RewardComposer.from_dict(remote()).load_state_dict(older)
    for bad, where in [({"judge": -1}, "spent_requests.judge"), ({"judge": 1.5}, "spent_requests.judge"),
                       ({"other": 1}, "spent_requests.other")]:
        with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
            restored.load_state_dict({**state, "spent_requests": bad})
    assert restored.spec.nodes[0].component.spent_requests == 6  # a refused state changes nothing
