"""Remote terms through a real composer built from YAML: several run concurrently beside a cheap
term, their call info reaches the breakdown (and ``rewardkit explain``), a failure raises a
RemoteScoreError naming the term and the URL and changes nothing, ``acall`` works on the caller's
loop, budgets last over the composer's life, and copies get their own connections."""

from __future__ import annotations

import asyncio
import copy
import pickle
import time
from pathlib import Path

import numpy as np
import pytest

from rewardkit import RewardComposer
from rewardkit.commands.explain import explain_table
from rewardkit.errors import RemoteScoreError

CONFIG = """\
version: 1
components:
  helpful:
    type: remote_score
    params: {{url: "{scorer}", batch_size: 2, max_requests: {budget}, on_failure: {policy}, default: -1.0}}
  verbose:
    type: remote_score
    params: {{url: "{scorer}", batch_size: 4, cache_size: 0}}
    weight: -0.1
  judge:
    type: judge
    params:
      url: "{judge}/v1/completions"
      model: stub
      rubric: "Rate this answer from 0 to 9: {{completion}}"
      batch_size: 4
  format:
    type: regex_match
    params: {{pattern: "^[a-z]"}}
    normalize: {{type: running_zscore}}
"""
COMPLETIONS = ["a good answer", "bb", "Ccc", "good"]


def composer_from_yaml(tmp_path: Path, scorer: str, judge: str, budget: str = "null",
                       policy: str = "raise") -> RewardComposer:
    path = tmp_path / "remote.yaml"
    path.write_text(CONFIG.format(scorer=scorer, judge=judge, budget=budget, policy=policy))
    return RewardComposer.from_yaml(path)


def test_remote_terms_run_concurrently_beside_a_cheap_term_and_report_their_calls(tmp_path, scorer,
                                                                                  judge_server) -> None:
    stub, url = scorer
    judge_stub, judge_url = judge_server
    stub.delay_s = judge_stub.delay_s = 0.3
    with composer_from_yaml(tmp_path, url, judge_url) as composer:
        composer({"completion": ["warm-up"]})  # the loop, the clients, their connections
        stub.reset()
        out = composer({"completion": COMPLETIONS, "prompt": ["q"] * 4})
        # helpful's two batches and verbose's one were at the scorer at the same moment: the terms
        # ran concurrently (one after the other, at most helpful's two would be), whatever the load
        assert stub.peak_in_flight == 3, f"peak in flight {stub.peak_in_flight}: the remote terms did not overlap"
        np.testing.assert_array_equal(out.terms["helpful"].raw, [13.0, 2.0, 3.0, 4.0])
        np.testing.assert_allclose(out.terms["verbose"].contribution, [-1.3, -0.2, -0.3, -0.4])
        assert out.terms["judge"].raw[0] > 0.5 > out.terms["judge"].raw[1]
        np.testing.assert_array_equal(out.terms["format"].raw, [1.0, 1.0, 0.0, 1.0])
        helpful = out.terms["helpful"].info
        assert helpful["requests"] == 2 and helpful["cache_hits"] == 0 and helpful["latency_s"] >= 0.3
        assert out.terms["judge"].info["requests"] == 1 and "requests" not in out.terms["format"].info
        # the same completions again: the cached terms send nothing, the uncached one sends again
        again = composer({"completion": COMPLETIONS, "prompt": ["q"] * 4})
        assert again.terms["helpful"].info["cache_hits"] == 4 and again.terms["helpful"].info["requests"] == 0
        assert again.terms["verbose"].info["requests"] == 1
        # a single context (a str) is a batch of one for the remote terms
        single = composer({"completion": "abc"})
        assert single.terms["helpful"].raw == 3.0 and single.terms["helpful"].info["requests"] == 1
        table = explain_table(composer, single)
    assert "helpful: latency_s=" in table and "requests=1" in table


def test_a_failing_remote_term_raises_naming_term_and_url_and_changes_nothing(tmp_path, scorer, judge_server) -> None:
    stub, url = scorer
    _, judge_url = judge_server
    composer = composer_from_yaml(tmp_path, url, judge_url)
    composer({"completion": COMPLETIONS})
    state = composer.state_dict()
    stub.mode = "fail"
    with pytest.raises(RemoteScoreError, match=rf"helpful: {url}: 2 of 2 item\(s\) not scored: HTTP 500"):
        composer({"completion": ["new", "texts"]})
    after = composer.state_dict()
    # requests sent stay spent (the budget guards money, not the reward's state); nothing else moved
    assert after.pop("spent_requests")["helpful"] > state.pop("spent_requests")["helpful"]
    assert after == state
    composer.close()


def test_the_budget_lasts_over_the_composers_life_and_then_the_default_is_used(tmp_path, scorer, judge_server) -> None:
    _, url = scorer
    _, judge_url = judge_server
    composer = composer_from_yaml(tmp_path, url, judge_url, budget="2", policy="default")
    first = composer({"completion": COMPLETIONS})  # two batches of two: the whole budget
    second = composer({"completion": ["fresh", "ones"]})
    composer.close()
    assert first.terms["helpful"].info["spend_requests"] == 2 and first.terms["helpful"].info["defaults_used"] == 0
    np.testing.assert_array_equal(second.terms["helpful"].raw, [-1.0, -1.0])
    assert second.terms["helpful"].info["defaults_used"] == 2 and second.terms["helpful"].info["requests"] == 0


def test_acall_awaits_the_remote_terms_on_the_callers_loop(tmp_path, scorer, judge_server) -> None:
    stub, url = scorer
    _, judge_url = judge_server
    stub.delay_s = 0.3
    composer = composer_from_yaml(tmp_path, url, judge_url)

    async def main() -> tuple[float, float]:
        await composer.acall({"completion": ["warm-up"]})  # this loop's clients and connections
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.01)

        running = asyncio.ensure_future(ticker())
        out = await composer.acall({"completion": ["xyz"]})
        running.cancel()
        return float(out.terms["helpful"].raw[0]), max(np.diff(ticks))

    value, longest_gap = asyncio.run(main())
    # the caller's loop kept running while the scorer took its 0.3 s
    assert value == 3.0 and longest_gap < 0.15, longest_gap


def test_copies_and_pickles_of_a_composer_open_their_own_connections(tmp_path, scorer, judge_server) -> None:
    _, url = scorer
    _, judge_url = judge_server
    composer = composer_from_yaml(tmp_path, url, judge_url)
    composer({"completion": ["abc"]})
    for other in (copy.deepcopy(composer), pickle.loads(pickle.dumps(composer))):
        assert other({"completion": ["abcd"]}).terms["helpful"].raw == 4.0
        other.close()
    composer.close()
