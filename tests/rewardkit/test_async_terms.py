"""The composer's asynchronous seam (docs/REMOTE_SEAM): ``asynchronous = True`` terms run
concurrently, cheap terms are unaffected, ``acall`` on the caller's loop, ``TermOutput.info``,
and a call that raises changes nothing."""

from __future__ import annotations

import asyncio
import copy
import math
import pickle
from typing import Any, Mapping

import numpy as np
import pytest

from rewardkit import BaseReward, Param, RewardComposer
from rewardkit.errors import RemoteScoreError


class SleepyScore(BaseReward):
    """Waits ``delay`` seconds on the event loop, then returns ``scale * value`` (an I/O-bound term)."""

    asynchronous = True
    inputs = {"value": 0}
    params = {"delay": Param.non_negative(0.2, "seconds to wait"),
              "scale": Param.number(1.0, "factor"),
              "fail": Param.number(0.0, "raise when nonzero")}

    active = 0  # terms of this class waiting right now, over all instances
    most_active = 0  # the most that waited at once since the last reset_counts()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    @classmethod
    def reset_counts(cls) -> None:
        cls.active = cls.most_active = 0

    async def compute_async(self, x: Mapping[str, Any], terminated: Any, truncated: Any) -> Any:
        cls = type(self)
        cls.active += 1
        cls.most_active = max(cls.most_active, cls.active)
        try:
            await asyncio.sleep(self.delay)
        finally:
            cls.active -= 1
        self.calls += 1
        if self.fail:
            raise RemoteScoreError(f"{self.name}: http://127.0.0.1:9/score failed (test)")
        return self.scale * np.asarray(x["value"], dtype=np.float64)

    def last_call_info(self) -> dict[str, float]:
        return {"requests": float(self.calls), "latency_s": self.delay}


TEST_COMPONENTS = {"test_sleepy_score": SleepyScore}


def config(**extra: Any) -> dict[str, Any]:
    return {"version": 1, "components": {
        "slow_a": {"type": "test_sleepy_score", "params": {"delay": 0.2}, "inputs": {"value": "a"}},
        "slow_b": {"type": "test_sleepy_score", "params": {"delay": 0.2, "scale": 2.0, **extra},
                   "inputs": {"value": "b"}},
        "cheap": {"type": "threshold_penalty", "params": {"threshold": 1.0}, "weight": -1.0,
                  "normalize": {"type": "running_zscore"}},
    }}


def test_two_slow_terms_run_concurrently_and_the_cheap_term_is_unaffected() -> None:
    with RewardComposer.from_dict(config()) as composer:
        composer({"a": 1.0, "b": 1.0, "latency": 2.0})  # starts the background loop
        reference = RewardComposer.from_dict({"version": 1, "components": {"cheap": config()["components"]["cheap"]}})
        reference({"a": 1.0, "b": 1.0, "latency": 2.0})
        SleepyScore.reset_counts()
        out = composer({"a": 3.0, "b": 4.0, "latency": 5.0})
        expected = reference({"latency": 5.0})
    # both slow terms were waiting at the same moment (not one after the other), on any machine load
    assert SleepyScore.most_active == 2, "the two slow terms did not run concurrently"
    assert out.terms["slow_a"].raw == 3.0 and out.terms["slow_b"].raw == 8.0
    assert out.terms["cheap"].contribution == expected.terms["cheap"].contribution
    assert math.isclose(out.total, 3.0 + 8.0 + expected.total)
    assert out.terms["slow_b"].info == {"requests": 2.0, "latency_s": 0.2}
    assert out.terms["cheap"].info == {}


def test_batched_call_and_acall_on_the_callers_loop() -> None:
    composer = RewardComposer.from_dict(config())
    ctx = {"a": np.array([1.0, 2.0]), "b": np.array([0.5, 0.5]), "latency": np.array([0.0, 3.0])}

    async def observe(call: asyncio.Task) -> bool:
        """Whether this loop ran while acall's terms were waiting (it would not if acall blocked it)."""
        while not call.done():
            if SleepyScore.active:
                return True
            await asyncio.sleep(0.005)
        return False

    async def main() -> tuple[Any, bool]:
        # a running loop: the sync call still works (background loop), and acall uses this loop
        composer(ctx)
        SleepyScore.reset_counts()
        call = asyncio.ensure_future(composer.acall(ctx))
        ran_meanwhile = await observe(call)
        return await call, ran_meanwhile

    out, ran_meanwhile = asyncio.run(main())
    composer.close()
    np.testing.assert_allclose(out.terms["slow_a"].raw, [1.0, 2.0])
    np.testing.assert_allclose(out.terms["slow_b"].raw, [1.0, 1.0])
    assert ran_meanwhile  # acall yields to the caller's loop while its terms wait
    assert SleepyScore.most_active == 2
    assert composer.step == 4  # two batched calls of two environments


def test_a_failing_async_term_changes_nothing_and_names_the_term() -> None:
    composer = RewardComposer.from_dict(config(fail=1.0))
    good = RewardComposer.from_dict(config())
    state = composer.state_dict()
    with pytest.raises(RemoteScoreError, match="slow_b"):
        composer({"a": 1.0, "b": 1.0, "latency": 4.0})
    assert composer.state_dict() == state
    composer.close()
    assert state["normalizers"] == good.state_dict()["normalizers"]


def test_copies_and_pickles_get_their_own_loop() -> None:
    composer = RewardComposer.from_dict(config())
    composer({"a": 1.0, "b": 1.0, "latency": 2.0})
    for other in (copy.deepcopy(composer), pickle.loads(pickle.dumps(composer))):
        assert other({"a": 1.0, "b": 2.0, "latency": 2.0}).terms["slow_b"].raw == 4.0
        other.close()
    composer.close()
    # a closed composer starts a new loop at its next call
    assert composer({"a": 2.0, "b": 1.0, "latency": 2.0}).terms["slow_a"].raw == 2.0
    composer.close()


def test_info_reaches_the_breakdown_logger_and_explain(tmp_path) -> None:
    from rewardkit.breakdown_logger import BreakdownLogger
    from rewardkit.commands.explain import explain_table

    composer = RewardComposer.from_dict(config())
    with BreakdownLogger(tmp_path / "log.csv", every=2) as logger:
        for _ in range(2):
            logger.log(composer({"a": np.array([1.0, 2.0]), "b": np.array([1.0, 1.0]), "latency": np.array([1.0, 2.0])}))
    header, row = (tmp_path / "log.csv").read_text().splitlines()[:2]
    column = header.split(",").index("slow_b/info/requests/max")
    assert float(row.split(",")[column]) == 2.0
    table = explain_table(composer, composer({"a": 1.0, "b": 1.0, "latency": 1.0}))
    composer.close()
    assert "slow_b: requests=3, latency_s=0.2" in table
