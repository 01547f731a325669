"""The remote components' declared promises through ``rewardkit.testing.check_component``, as for
every built-in, against the stub servers (drawn parameters, except those that would make a
healthy server look faulty: a timeout of 1e-300 s, a budget of one request)."""

from __future__ import annotations

from rewardkit.components import Judge, RemoteScore
from rewardkit.testing import check_component

HEALTHY = {"timeout_s": 10.0, "max_call_s": None, "max_requests": None, "backoff_s": 0.0}


def test_remote_score_keeps_every_declared_promise(scorer) -> None:
    _, url = scorer
    checked = check_component(RemoteScore, params={"url": url, **HEALTHY}, examples=4, shrink=False)
    assert "finite outputs within output_range" in checked and "deep copies are independent" in checked


def test_judge_keeps_every_declared_promise(judge_server) -> None:
    _, base = judge_server
    params = {"url": base + "/v1/chat/completions", "model": "stub", "rubric": "Rate: {completion}", "batch_size": 1,
              "system": None, **HEALTHY}
    checked = check_component(Judge, params=params, examples=4, shrink=False)
    assert "finite outputs within output_range" in checked
